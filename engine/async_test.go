package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Asynchronous completion (async.go): an activity whose worker returned
// activities.ErrResultPending reports nothing; whoever holds its task
// token, or its ids, reports its outcome later. The scripted worker here
// polls the attempt and never reports (as a worker process that died after
// returning ErrResultPending); the clock is the harness's fake.

// asyncLease is the lease of the activities below: an hour to complete,
// and the token holder must heartbeat every 10 s.
var asyncLease = history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second,
	RetryPolicy: &history.RetryPolicy{MaximumAttempts: 1}}

func (h *harness) completeAsync(req api.CompleteActivityRequest) error {
	h.t.Helper()
	_, err := h.eng.CompleteActivity(h.ctx(), &req)
	return err
}

func (h *harness) startAsync(id string, effect history.EffectClass) *api.ActivityTask {
	h.t.Helper()
	h.start(id, "Approve")
	h.complete(h.pollWFT("q"), schedule("approval", "AskApproval", effect, asyncLease))
	return h.pollActivity("q") // and the worker never reports
}

// A SideEffect completed by its token: the intent was recorded at dispatch,
// the completion goes through the ledger, and a second, identical
// completion is acknowledged without writing anything, a different one is
// refused.
func TestAsyncCompleteByToken(t *testing.T) {
	h := newHarness(t)
	task := h.startAsync("a", history.SideEffect)
	evs := h.history("a")
	if _, ev := find[*history.ActivityStarted](t, evs); ev.ID == 0 {
		t.Fatal("no ActivityStarted before the async completion")
	}
	if err := h.completeAsync(api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"approved"`), Identity: "alice"}); err != nil {
		t.Fatalf("complete by token: %v", err)
	}
	done, _ := find[*history.ActivityCompleted](t, h.history("a"))
	if string(done.Result.Data) != `"approved"` || done.Identity != "alice" {
		t.Fatalf("completion %+v", done)
	}
	n := h.historyLen("a")
	if err := h.completeAsync(api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"approved"`), Identity: "alice"}); err != nil {
		t.Fatalf("the same completion again (its reply lost): %v", err)
	}
	err := h.completeAsync(api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"rejected"`), Identity: "bob"})
	wantErr(t, err, api.ErrStaleAttempt)
	if h.historyLen("a") != n {
		t.Fatalf("repeated completions wrote events:\n%s", types(h.history("a")))
	}
	effects, err := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{WorkflowID: "a"})
	if err != nil || len(effects.Effects) != 1 || effects.Effects[0].State != api.EffectCompleted {
		t.Fatalf("ledger: %+v, %v", effects, err)
	}
}

// By ids: the workflow id and the activity id the workflow gave; the run
// id defaults to the current run. Heartbeats by id keep the lease; a
// completion for an activity no longer pending is ErrNotFound.
func TestAsyncByID(t *testing.T) {
	h := newHarness(t)
	h.startAsync("b", history.Idempotent)
	for range 3 { // 24 s, past the 10 s heartbeat timeout, kept by heartbeats
		h.advance(8 * time.Second)
		resp, err := h.eng.RecordActivityHeartbeat(h.ctx(), &api.HeartbeatRequest{WorkflowID: "b", ActivityID: "approval",
			Details: jsonPayload(`"waiting"`)})
		if err != nil || resp.CancelRequested {
			t.Fatalf("heartbeat by id: %+v, %v", resp, err)
		}
	}
	if p := h.describe("b").PendingActivities; len(p) != 1 || p[0].State != api.ActivityStateStarted || string(p[0].HeartbeatDetails.Data) != `"waiting"` {
		t.Fatalf("pending %+v", p)
	}
	err := h.completeAsync(api.CompleteActivityRequest{WorkflowID: "b", RunID: "run-other", ActivityID: "approval"})
	wantErr(t, err, api.ErrNotFound)
	err = h.completeAsync(api.CompleteActivityRequest{WorkflowID: "b", ActivityID: "nope"})
	wantErr(t, err, api.ErrNotFound)
	err = h.completeAsync(api.CompleteActivityRequest{WorkflowID: "b"})
	wantErr(t, err, api.ErrInvalidArgument)
	err = h.completeAsync(api.CompleteActivityRequest{TaskToken: []byte{0x90}, WorkflowID: "b", ActivityID: "approval"})
	wantErr(t, err, api.ErrInvalidArgument)
	if err := h.completeAsync(api.CompleteActivityRequest{WorkflowID: "b", ActivityID: "approval", Result: jsonPayload(`"ok"`)}); err != nil {
		t.Fatalf("complete by id: %v", err)
	}
	if done, _ := find[*history.ActivityCompleted](t, h.history("b")); string(done.Result.Data) != `"ok"` {
		t.Fatalf("completion %+v", done)
	}
	err = h.completeAsync(api.CompleteActivityRequest{WorkflowID: "b", ActivityID: "approval", Result: jsonPayload(`"ok"`)})
	wantErr(t, err, api.ErrNotFound)
	if c := count(h.history("b"), history.TypeActivityCompleted); c != 1 {
		t.Fatalf("%d completions", c)
	}
}

// FailActivity by id fails the attempt (retried per the policy: here the
// only attempt, so the activity fails). An activity waiting for its retry
// has no attempt to report by id.
func TestAsyncFailByID(t *testing.T) {
	h := newHarness(t)
	h.start("c", "Approve")
	retry := asyncLease
	retry.RetryPolicy = &history.RetryPolicy{MaximumAttempts: 2, InitialInterval: time.Minute}
	h.complete(h.pollWFT("q"), schedule("approval", "AskApproval", history.Idempotent, retry))
	h.pollActivity("q")
	fail := func() error {
		_, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{WorkflowID: "c", ActivityID: "approval",
			Failure: history.Failure{Type: "Rejected", Message: "no"}})
		return err
	}
	if err := fail(); err != nil {
		t.Fatalf("fail by id: %v", err)
	}
	wantErr(t, fail(), api.ErrFailedPrecondition) // waiting a minute for attempt 2
	h.advance(time.Minute)
	if a := h.pollActivity("q"); a.Attempt != 2 {
		t.Fatalf("attempt %d", a.Attempt)
	}
	if err := fail(); err != nil {
		t.Fatalf("fail attempt 2 by id: %v", err)
	}
	if f, _ := find[*history.ActivityFailed](t, h.history("c")); f.Failure.Type != "Rejected" {
		t.Fatalf("failure %+v", f)
	}
}

// A server restart between the worker's ErrResultPending and the token
// holder's completion: the attempt of an Idempotent or SideEffect activity
// was recorded, so its token (and its ids) still name it.
func TestAsyncAfterRestart(t *testing.T) {
	h := newHarness(t)
	task := h.startAsync("r", history.SideEffect)
	h.startAsync("r2", history.Idempotent)
	h.reopen()
	h.advance(5 * time.Second)
	if err := h.completeAsync(api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"yes"`)}); err != nil {
		t.Fatalf("complete by token after a restart: %v", err)
	}
	if _, err := h.eng.RecordActivityHeartbeat(h.ctx(), &api.HeartbeatRequest{WorkflowID: "r2", ActivityID: "approval"}); err != nil {
		t.Fatalf("heartbeat by id after a restart: %v", err)
	}
	if err := h.completeAsync(api.CompleteActivityRequest{WorkflowID: "r2", ActivityID: "approval", Result: jsonPayload(`"yes"`)}); err != nil {
		t.Fatalf("complete by id after a restart: %v", err)
	}
	for _, id := range []string{"r", "r2"} {
		if done, _ := find[*history.ActivityCompleted](t, h.history(id)); string(done.Result.Data) != `"yes"` {
			t.Fatalf("%s: completion %+v", id, done)
		}
	}
}

// After the heartbeat timeout an Idempotent activity has timed out: the
// token holder's completion is refused with ErrStaleAttempt and recorded
// as a late report, never as a second outcome.
func TestAsyncAfterHeartbeatTimeoutIdempotent(t *testing.T) {
	h := newHarness(t)
	task := h.startAsync("t", history.Idempotent)
	h.advance(11 * time.Second)
	wantTypes(t, h.history("t")[4:], "ActivityTimedOut")
	err := h.completeAsync(api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"late"`)})
	wantErr(t, err, api.ErrStaleAttempt)
	err = h.completeAsync(api.CompleteActivityRequest{WorkflowID: "t", ActivityID: "approval", Result: jsonPayload(`"late"`)})
	wantErr(t, err, api.ErrNotFound)
	evs := h.history("t")
	if count(evs, history.TypeActivityCompleted) != 0 {
		t.Fatalf("a completion after the timeout was recorded as the outcome:\n%s", types(evs))
	}
	if count(evs, history.TypeActivityLateReport) != 1 {
		t.Fatalf("the late completion is not recorded:\n%s", types(evs))
	}
}

// After the heartbeat timeout a SideEffect's outcome is unknown (the run
// pauses on it): the token holder's completion is the news it waits for,
// and decides it. Then a second holder's different report is refused.
func TestAsyncAfterHeartbeatTimeoutSideEffect(t *testing.T) {
	h := newHarness(t)
	task := h.startAsync("s", history.SideEffect)
	h.advance(11 * time.Second)
	if p := h.describe("s").PendingActivities; len(p) != 1 || p[0].State != api.ActivityStateUnknown {
		t.Fatalf("pending %+v", p)
	}
	if err := h.completeAsync(api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"sent"`)}); err != nil {
		t.Fatalf("complete the paused attempt by token: %v", err)
	}
	if done, _ := find[*history.ActivityCompleted](t, h.history("s")); string(done.Result.Data) != `"sent"` {
		t.Fatalf("completion %+v", done)
	}
	err := h.completeAsync(api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"other"`)})
	wantErr(t, err, api.ErrStaleAttempt)
}
