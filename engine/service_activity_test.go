package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// startWithActivity starts wf and completes its first task by scheduling
// one activity with opts; the activity is event 3.
func (h *harness) startWithActivity(id string, effect history.EffectClass, opts history.ActivityOptions) {
	h.t.Helper()
	h.start(id, "W")
	task := h.pollWFT("q")
	if task.WorkflowID != id {
		h.t.Fatalf("task for %s, want %s", task.WorkflowID, id)
	}
	h.complete(task, schedule("a", "Act", effect, opts))
}

func TestActivityRetriesThenSucceeds(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5}
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})

	act := h.pollActivity("q")
	if act.Attempt != 1 {
		t.Fatalf("attempt %d", act.Attempt)
	}
	h.failActivity(act, history.Failure{Type: "Flaky", Message: "first"})
	h.noActivity("q")
	if d := h.describe("wf"); d.PendingActivities[0].State != api.ActivityStateBackoff ||
		!d.PendingActivities[0].NextAttemptAt.Equal(testStart.Add(time.Second)) {
		t.Fatalf("after first failure %+v", d.PendingActivities[0])
	}
	h.advance(time.Second - time.Millisecond)
	h.noActivity("q")
	h.advance(time.Millisecond)
	act = h.pollActivity("q")
	if act.Attempt != 2 {
		t.Fatalf("attempt %d", act.Attempt)
	}
	h.failActivity(act, history.Failure{Type: "Flaky", Message: "second"})

	// The 2 s backoff is durable: restart in the middle of it.
	h.advance(time.Second)
	h.reopen()
	h.noActivity("q")
	d := h.describe("wf")
	if a := d.PendingActivities[0]; a.State != api.ActivityStateBackoff || a.Attempt != 2 || a.LastFailure == nil || a.LastFailure.Message != "second" {
		t.Fatalf("after reopen %+v", a)
	}
	h.advance(time.Second)
	act = h.pollActivity("q")
	if act.Attempt != 3 {
		t.Fatalf("attempt %d", act.Attempt)
	}
	h.completeActivity(act, `"third time lucky"`)
	task := h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityCompleted")
	started, _ := find[*history.ActivityStarted](t, task.Events)
	if started.Attempt != 3 {
		t.Fatalf("ActivityStarted attempt %d", started.Attempt)
	}
	h.complete(task, completeWF(`1`))
}

func TestActivityNonRetryable(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{MaximumAttempts: 10, NonRetryableErrorTypes: []string{"BadInput"}}
	opts := history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry}

	// A failure flagged non-retryable.
	h.startWithActivity("flag", history.Read, opts)
	h.failActivity(h.pollActivity("q"), history.Failure{Type: "Other", Message: "no", NonRetryable: true})
	task := h.pollWFT("q")
	f, _ := find[*history.ActivityFailed](t, task.Events)
	if f.Attempt != 1 || f.Failure.Message != "no" || !f.Failure.NonRetryable {
		t.Fatalf("activity failed %+v", f)
	}
	h.complete(task, completeWF(`1`))

	// A failure whose type the policy lists.
	h.startWithActivity("typed", history.Read, opts)
	h.failActivity(h.pollActivity("q"), history.Failure{Type: "BadInput", Message: "bad"})
	task = h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityFailed")
	if f, _ := find[*history.ActivityFailed](t, task.Events); f.Failure.Type != "BadInput" {
		t.Fatalf("activity failed %+v", f)
	}
}

func TestActivityMaximumAttempts(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2}
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
	h.failActivity(h.pollActivity("q"), history.Failure{Type: "E", Message: "one"})
	h.advance(time.Second)
	act := h.pollActivity("q")
	h.failActivity(act, history.Failure{Type: "E", Message: "two"})
	task := h.pollWFT("q")
	f, _ := find[*history.ActivityFailed](t, task.Events)
	if f.Attempt != 2 || f.Failure.Message != "two" {
		t.Fatalf("activity failed %+v", f)
	}
	if d := h.describe("wf"); len(d.PendingActivities) != 0 {
		t.Fatalf("pending %+v", d.PendingActivities)
	}
}

func TestActivityStartToCloseTimeout(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2}
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
	first := h.pollActivity("q")
	if !first.Deadline.Equal(testStart.Add(10 * time.Second)) {
		t.Fatalf("deadline %v", first.Deadline)
	}
	h.advance(10*time.Second - time.Millisecond)
	if d := h.describe("wf"); d.PendingActivities[0].State != api.ActivityStateStarted {
		t.Fatalf("lease ended early: %+v", d.PendingActivities[0])
	}
	h.advance(time.Millisecond)
	if a := h.describe("wf").PendingActivities[0]; a.State != api.ActivityStateBackoff || a.LastFailure == nil || a.LastFailure.Type != "Timeout" {
		t.Fatalf("after the timeout %+v", a)
	}
	// The retry (and the attempt count) survive a restart in the backoff.
	h.reopen()
	h.noActivity("q")
	h.advance(time.Second)
	second := h.pollActivity("q")
	if second.Attempt != 2 {
		t.Fatalf("attempt %d", second.Attempt)
	}
	h.advance(10 * time.Second)
	task := h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityTimedOut")
	to, _ := find[*history.ActivityTimedOut](t, task.Events)
	if to.Timeout != "start_to_close" || to.Attempt != 2 {
		t.Fatalf("timed out %+v", to)
	}
	// Both attempts are fenced off now.
	_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: second.TaskToken})
	wantErr(t, err, api.ErrStaleAttempt)
}

func TestActivityHeartbeatTimeout(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2}
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: retry})
	act := h.pollActivity("q")
	if !act.Deadline.Equal(testStart.Add(10*time.Second)) || act.HeartbeatTimeout != 10*time.Second {
		t.Fatalf("task %+v", act)
	}
	// Heartbeats keep extending the lease well past the first deadline.
	for i := range 5 {
		h.advance(9 * time.Second)
		resp := h.heartbeat(act, `{"progress":`+string(rune('0'+i))+`}`)
		if resp.CancelRequested || !resp.Deadline.Equal(h.clk.Now().Add(10*time.Second)) {
			t.Fatalf("heartbeat %d: %+v", i, resp)
		}
	}
	d := h.describe("wf")
	if a := d.PendingActivities[0]; a.State != api.ActivityStateStarted || !a.LastHeartbeat.Equal(h.clk.Now()) ||
		string(a.HeartbeatDetails.Data) != `{"progress":4}` || !a.LeaseExpires.Equal(h.clk.Now().Add(10*time.Second)) {
		t.Fatalf("pending %+v", a)
	}
	// Silence: the lease ends 10 s after the last heartbeat.
	h.advance(10 * time.Second)
	if a := h.describe("wf").PendingActivities[0]; a.State != api.ActivityStateBackoff || a.LastFailure == nil {
		t.Fatalf("after heartbeat timeout %+v", a)
	}
	_, err := h.eng.RecordActivityHeartbeat(h.ctx(), &api.HeartbeatRequest{TaskToken: act.TaskToken})
	wantErr(t, err, api.ErrStaleAttempt)
	h.advance(time.Second)
	// The retry carries the last heartbeat's details.
	act = h.pollActivity("q")
	if act.Attempt != 2 || string(act.HeartbeatDetails.Data) != `{"progress":4}` {
		t.Fatalf("retry %+v", act)
	}
	h.advance(10 * time.Second)
	task := h.pollWFT("q")
	to, _ := find[*history.ActivityTimedOut](t, task.Events)
	if to.Timeout != "heartbeat" || to.Attempt != 2 {
		t.Fatalf("timed out %+v", to)
	}
}

func TestActivityCancel(t *testing.T) {
	h := newHarness(t)
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: time.Minute})
	act := h.pollActivity("q")
	if resp := h.heartbeat(act, `1`); resp.CancelRequested {
		t.Fatal("cancel requested before the request")
	}
	h.signal("wf", "stop", `1`)
	h.complete(h.pollWFT("q"), cancelActivityCmd(3))
	// A running attempt learns it from its heartbeat; nothing closes yet.
	if resp := h.heartbeat(act, `2`); !resp.CancelRequested {
		t.Fatal("heartbeat does not report the cancel request")
	}
	if d := h.describe("wf"); len(d.PendingActivities) != 1 || !d.PendingActivities[0].CancelRequested {
		t.Fatalf("pending %+v", d.PendingActivities)
	}
	if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: act.TaskToken, Canceled: true,
		Failure: history.Failure{Type: "Canceled"}}); err != nil {
		t.Fatal(err)
	}
	task := h.pollWFT("q")
	if _, ev := find[*history.ActivityCanceled](t, task.Events); ev.ID != task.NextEventID-1 {
		t.Fatalf("ActivityCanceled is event %d of %d", ev.ID, task.NextEventID-1)
	}
	h.complete(task, completeWF(`1`))

	// A scheduled activity that no worker took is canceled at once.
	h.startWithActivity("wf2", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour})
	h.signal("wf2", "stop", `1`)
	h.complete(h.pollWFT("q"), cancelActivityCmd(3))
	task = h.pollWFT("q")
	wantTypes(t, task.Events, `WorkflowStarted WorkflowTaskCompleted ActivityScheduled SignalReceived WorkflowTaskCompleted
		ActivityCancelRequested ActivityCanceled`)
}

func TestActivityScheduleToStartTimeout(t *testing.T) {
	h := newHarness(t)
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToStartTimeout: 5 * time.Second})
	h.advance(5*time.Second - time.Millisecond)
	h.noWFT("q")
	h.advance(time.Millisecond)
	task := h.pollWFT("q")
	to, _ := find[*history.ActivityTimedOut](t, task.Events)
	if to.Timeout != "schedule_to_start" {
		t.Fatalf("timed out %+v", to)
	}
	// The timed-out attempt's queue entry is never handed out: the next
	// poll skips it and gets the activity scheduled after it.
	h.complete(task, schedule("b", "Next", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	if act := h.pollActivity("q"); act.ActivityID != "b" {
		t.Fatalf("poll after the timeout got %s (attempt %d)", act.ActivityID, act.Attempt)
	}
}

func TestActivityScheduleToCloseTimeout(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1}
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		ScheduleToCloseTimeout: 25 * time.Second, RetryPolicy: retry})
	for attempt := int32(1); attempt <= 2; attempt++ {
		act := h.pollActivity("q")
		if act.Attempt != attempt {
			t.Fatalf("attempt %d, want %d", act.Attempt, attempt)
		}
		h.advance(10 * time.Second) // lease expires
		h.advance(time.Second)      // backoff
	}
	// 22 s: attempt 3 runs until the schedule-to-close deadline at 25 s.
	h.pollActivity("q")
	h.advance(3*time.Second - time.Millisecond)
	h.noWFT("q")
	h.advance(time.Millisecond)
	task := h.pollWFT("q")
	to, ev := find[*history.ActivityTimedOut](t, task.Events)
	if to.Timeout != "schedule_to_close" || to.Attempt != 3 || !ev.Time.Equal(testStart.Add(25*time.Second)) {
		t.Fatalf("timed out %+v at %v", to, ev.Time)
	}
}

func TestStaleAttemptsFenced(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second}
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
	old := h.pollActivity("q")
	h.advance(10 * time.Second)
	h.advance(time.Second)
	cur := h.pollActivity("q")
	if cur.Attempt != 2 || cur.LeaseEpoch == old.LeaseEpoch {
		t.Fatalf("re-dispatch %+v", cur)
	}
	n := h.historyLen("wf")
	_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: old.TaskToken, Result: jsonPayload(`"late"`)})
	wantErr(t, err, api.ErrStaleAttempt)
	_, err = h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: old.TaskToken, Failure: history.Failure{Message: "late"}})
	wantErr(t, err, api.ErrStaleAttempt)
	_, err = h.eng.RecordActivityHeartbeat(h.ctx(), &api.HeartbeatRequest{TaskToken: old.TaskToken})
	wantErr(t, err, api.ErrStaleAttempt)
	if h.historyLen("wf") != n {
		t.Fatal("stale calls wrote events")
	}
	if a := h.describe("wf").PendingActivities[0]; a.State != api.ActivityStateStarted || a.LeaseEpoch != cur.LeaseEpoch {
		t.Fatalf("current attempt disturbed: %+v", a)
	}
	h.heartbeat(cur, `1`)
	h.completeActivity(cur, `"on time"`)
	task := h.pollWFT("q")
	c, _ := find[*history.ActivityCompleted](t, task.Events)
	if string(c.Result.Data) != `"on time"` {
		t.Fatalf("completed %+v", c)
	}
	_, err = h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: cur.TaskToken})
	wantErr(t, err, api.ErrStaleAttempt)
}

// An Idempotent action counts attempts, not duplicates: the downstream
// deduplicates on the key by contract. A late success of an earlier
// attempt completes the action (the running attempt gets the same result
// from the downstream), and the running attempt's success afterwards is a
// confirmation — never a duplicate alarm.
func TestLateSuccessOfIdempotentActionIsNoDuplicate(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second}
	h.startWithActivity("wf", history.Idempotent, history.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
	old := h.pollActivity("q")
	if old.IdempotencyKey == "" {
		t.Fatal("no idempotency key")
	}
	h.advance(10 * time.Second)
	h.advance(time.Second)
	cur := h.pollActivity("q")
	if cur.IdempotencyKey != old.IdempotencyKey || cur.Attempt != 2 {
		t.Fatalf("retry %+v", cur)
	}
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: old.TaskToken, Result: jsonPayload(`"paid"`),
		Identity: "old"}); err != nil {
		t.Fatalf("late success of attempt 1: %v, want it accepted", err)
	}
	_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: cur.TaskToken, Result: jsonPayload(`"paid"`)})
	wantErr(t, err, api.ErrStaleAttempt)
	evs := h.history("wf")
	wantTypes(t, evs, `WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityStarted ActivityCompleted
		ActivityLateReport`)
	c, _ := find[*history.ActivityCompleted](t, evs)
	lr, _ := find[*history.ActivityLateReport](t, evs)
	if c.Identity != "old" || lr.Verdict != "confirmation" || lr.Attempt != 2 {
		t.Fatalf("completed %+v, late report %+v", c, lr)
	}
	if d := h.describe("wf"); d.Info.Duplicates != 0 {
		t.Fatalf("duplicates %d, want none", d.Info.Duplicates)
	}
}
