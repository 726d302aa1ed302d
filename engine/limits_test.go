package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Every limit is a durable, visible outcome, never a loop: a client's
// input over a limit is refused with ErrLimitExceeded and writes nothing;
// a workflow task whose commands break one fails with the cause in
// history, and the run is terminated after Limits.MaxWorkflowTaskRefusals
// such failures; an activity's outcome is never refused into a lease
// timeout.

const (
	lPayload  = 64
	lHistory  = 12
	lPending  = 2
	lIDBytes  = 16
	lSignals  = 4
	lRefusals = 3
)

func smallLimits(o *Options) {
	o.Limits = Limits{MaxPayloadBytes: lPayload, MaxHistoryEvents: lHistory, SuggestContinueAsNewAt: 6, MaxPendingActivities: lPending,
		MaxPendingTimers: lPending, MaxPendingChildren: lPending, MaxIDBytes: lIDBytes, MaxSignals: lSignals, MaxWorkflowTaskRefusals: lRefusals}
}

func payloadOf(n int) history.Payload {
	return history.Payload{Encoding: "raw", Data: bytes.Repeat([]byte("x"), n)}
}

// boundary runs probe at limit−1, limit and limit+1 and checks that the
// first two succeed and the third fails with ErrLimitExceeded.
func boundary(t *testing.T, name string, limit int, probe func(n int) error) {
	t.Helper()
	for _, n := range []int{limit - 1, limit, limit + 1} {
		err := probe(n)
		if n <= limit && err != nil {
			t.Fatalf("%s at %d (limit %d): %v", name, n, limit, err)
		}
		if n > limit {
			wantErr(t, err, api.ErrLimitExceeded)
		}
	}
}

// unchanged fails the test if workflow id's history changed length.
func (h *harness) unchanged(id string, n int, what string) {
	h.t.Helper()
	if got := h.historyLen(id); got != n {
		h.t.Fatalf("%s wrote %d events", what, got-n)
	}
}

// TestClientInputBoundaries: starts, signals and resolves over a limit are
// refused and write nothing; at the limit they are accepted.
func TestClientInputBoundaries(t *testing.T) {
	h := newHarness(t, smallLimits)
	ids := 0
	fresh := func() string {
		ids++
		id := fmt.Sprintf("wf-%d", ids)
		h.start(id, "W")
		return id
	}
	boundary(t, "start input", lPayload, func(n int) error {
		ids++
		_, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: fmt.Sprintf("in-%d", ids), WorkflowType: "W",
			TaskQueue: "q", Input: payloadOf(n)})
		if err != nil {
			_, derr := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: fmt.Sprintf("in-%d", ids)})
			wantErr(t, derr, api.ErrNotFound) // nothing written
		}
		return err
	})
	boundary(t, "workflow id", lIDBytes, func(n int) error {
		_, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: strings.Repeat("w", n), WorkflowType: "W", TaskQueue: "q"})
		return err
	})
	boundary(t, "signal input", lPayload, func(n int) error {
		id := fresh()
		err := h.eng.signalErr(id, payloadOf(n))
		if err != nil {
			h.unchanged(id, 1, "a refused signal")
		}
		return err
	})
	// Signals received: MaxSignals of them, then refused.
	id := fresh()
	boundary(t, "signals", lSignals, func(n int) error {
		for h.eng.mustState(id).Signals < int32(n-1) {
			if err := h.eng.signalErr(id, payloadOf(1)); err != nil {
				t.Fatal(err)
			}
		}
		before := h.historyLen(id)
		err := h.eng.signalErr(id, payloadOf(1))
		if err != nil {
			h.unchanged(id, before, "a refused signal")
		}
		return err
	})
	// History events: a run at limit−1 events takes one more; at the limit
	// it takes none.
	boundary(t, "history events", lHistory, func(n int) error {
		id := fresh()
		for h.historyLen(id) < n-1 {
			h.signalRaw(id)
		}
		h.eng.m.Limits.MaxSignals = 0 // the signal limit is not under test
		defer func() { h.eng.m.Limits.MaxSignals = lSignals }()
		err := h.eng.signalErr(id, payloadOf(1))
		if err != nil {
			h.unchanged(id, n-1, "a refused signal")
		}
		return err
	})
}

func (e *Engine) signalErr(id string, p history.Payload) error {
	_, err := e.SignalWorkflow(context.Background(), &api.SignalWorkflowRequest{WorkflowID: id, SignalName: "s", Input: p})
	return err
}

// signalRaw appends a signal however many the run has had (the signal
// limit is not under test).
func (h *harness) signalRaw(id string) {
	h.t.Helper()
	h.eng.m.Limits.MaxSignals = 0
	defer func() { h.eng.m.Limits.MaxSignals = lSignals }()
	if err := h.eng.signalErr(id, payloadOf(1)); err != nil {
		h.t.Fatal(err)
	}
}

func (e *Engine) mustState(id string) *machine.RunState {
	unlock := e.lock(id)
	defer unlock()
	return e.openRun(id).state
}

// TestCommandBoundaries: a workflow task whose commands are at a limit
// completes; one past it fails with cause limit_exceeded recorded in
// history, and none of its commands' events are written.
func TestCommandBoundaries(t *testing.T) {
	h := newHarness(t, smallLimits)
	ids := 0
	// probe completes a fresh run's first task with cmds(n).
	probe := func(cmds func(n int) []api.Command) func(n int) error {
		return func(n int) error {
			ids++
			id := fmt.Sprintf("wf-%d", ids)
			h.startWith(api.StartWorkflowRequest{WorkflowID: id, TaskQueue: id}) // a queue of its own: other runs' tasks stay out of the way
			task := h.pollWFT(id)
			err := h.completeErr(task, cmds(n)...)
			if err != nil {
				evs := h.history(id)
				wantTypes(t, evs, "WorkflowStarted WorkflowTaskFailed")
				f, _ := find[*history.WorkflowTaskFailed](t, evs)
				if f.Cause != api.CauseLimitExceeded || f.Failure.Type != "LimitExceeded" || !strings.Contains(f.Failure.Message, "limit") {
					t.Fatalf("refusal recorded as %+v", f)
				}
				if w := h.describe(id).WorkflowTask; w == nil || w.LastFailure == nil || w.Attempt != 2 {
					t.Fatalf("describe does not say why: %+v", w)
				}
			}
			return err
		}
	}
	repeat := func(c func(i int) api.Command) func(n int) []api.Command {
		return func(n int) []api.Command {
			var out []api.Command
			for i := range n {
				out = append(out, c(i))
			}
			return out
		}
	}
	boundary(t, "pending activities", lPending, probe(repeat(func(i int) api.Command {
		return schedule(fmt.Sprint("a", i), "A", history.Read, history.ActivityOptions{})
	})))
	boundary(t, "pending timers", lPending, probe(repeat(func(i int) api.Command { return startTimer(fmt.Sprint("t", i), time.Hour) })))
	boundary(t, "pending children", lPending, probe(repeat(func(i int) api.Command {
		ids++
		return childCmd(fmt.Sprint("kid-", ids), "C", history.ParentCloseAbandon)
	})))
	boundary(t, "workflow result", lPayload, probe(func(n int) []api.Command {
		return []api.Command{{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: payloadOf(n)}}}
	}))
	boundary(t, "marker", lPayload, probe(func(n int) []api.Command { return []api.Command{markerCmd("m", payloadOf(n).Data)} }))
	boundary(t, "activity input", lPayload, probe(func(n int) []api.Command {
		return []api.Command{{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "a",
			ActivityType: "A", Input: payloadOf(n)}}}
	}))
	boundary(t, "timer id", lIDBytes, probe(func(n int) []api.Command { return []api.Command{startTimer(strings.Repeat("t", n), time.Hour)} }))
}

// TestRefusedTasksEndTheRun: the same refused commands, task after task,
// end in a terminated run that says why — never a loop of timeouts.
func TestRefusedTasksEndTheRun(t *testing.T) {
	h := newHarness(t, smallLimits)
	h.start("wf", "W")
	big := api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: payloadOf(lPayload + 1)}}
	for attempt := int32(1); attempt <= lRefusals; attempt++ {
		task := h.pollWFT("q")
		if task.Attempt != attempt || task.MaxPayloadBytes != lPayload {
			t.Fatalf("task %+v, want attempt %d telling the limit", task, attempt)
		}
		wantErr(t, h.completeErr(task, big), api.ErrLimitExceeded)
	}
	r := h.result("wf", "")
	if r.Status != api.StatusTerminated || r.Failure == nil || r.Failure.Type != "LimitExceeded" ||
		!strings.Contains(r.Failure.Message, "3 workflow tasks in a row") || !strings.Contains(r.Failure.Message, "result payload is 65 bytes") {
		t.Fatalf("result %+v %+v", r, r.Failure)
	}
	// Only the first failure of the streak is in history, then the end.
	wantTypes(t, h.history("wf"), "WorkflowStarted WorkflowTaskFailed WorkflowTerminated")
	h.noWFT("q")
	// A worker reporting the refusal itself counts the same.
	h.start("wf2", "W")
	for range lRefusals {
		task := h.pollWFT("q")
		if _, err := h.eng.FailWorkflowTask(h.ctx(), &api.FailWorkflowTaskRequest{TaskToken: task.TaskToken, Cause: api.CauseLimitExceeded,
			Failure: history.Failure{Type: "LimitExceeded", Message: "request body too large"}}); err != nil {
			t.Fatal(err)
		}
	}
	if r := h.result("wf2", ""); r.Status != api.StatusTerminated {
		t.Fatalf("wf2: %+v", r)
	}
	// Any other outcome in between starts the count again.
	h.start("wf3", "W")
	for i := range 2 * lRefusals {
		task := h.pollWFT("q")
		cause := api.CauseLimitExceeded
		if i%2 == 1 {
			cause = "panic"
		}
		if _, err := h.eng.FailWorkflowTask(h.ctx(), &api.FailWorkflowTaskRequest{TaskToken: task.TaskToken, Cause: cause}); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Hour) // past any backoff
	}
	if r := h.result("wf3", ""); r.Status != api.StatusRunning {
		t.Fatalf("wf3: %+v", r)
	}
}

// TestHistoryLimitEndsTheRunUnlessItCloses: at the history limit a task
// that would grow it terminates the run at once (no retry can help); one
// that closes the run is always accepted; outcomes of work under way are
// recorded past the limit.
func TestHistoryLimitEndsTheRunUnlessItCloses(t *testing.T) {
	h := newHarness(t, smallLimits)
	h.start("wf", "W")
	task := h.pollWFT("q")
	for h.historyLen("wf") < lHistory-3 {
		h.signalRaw("wf")
	}
	// WorkflowTaskCompleted and one ActivityScheduled: limit−1.
	h.complete(task, schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	for h.historyLen("wf") < lHistory {
		h.signalRaw("wf")
	}
	// At the limit, the activity's outcome is still recorded.
	act := h.pollActivity("q")
	h.completeActivity(act, `"r"`)
	if n := h.historyLen("wf"); n != lHistory+2 {
		t.Fatalf("history %d events", n)
	}
	task = h.pollWFT("q")
	wantErr(t, h.completeErr(task, startTimer("t", time.Hour)), api.ErrLimitExceeded)
	r := h.result("wf", "")
	if r.Status != api.StatusTerminated || !strings.Contains(r.Failure.Message, "MaxHistoryEvents") {
		t.Fatalf("result %+v %+v", r, r.Failure)
	}
	// A run at its limit can still close itself.
	h.start("closes", "W")
	for h.historyLen("closes") < lHistory {
		h.signalRaw("closes")
	}
	h.complete(h.pollWFT("q"), continueAsNewCmd(`"fresh"`))
	next := h.pollWFT("q")
	if next.ContinueAsNewSuggested || len(next.Events) != 1 {
		t.Fatalf("new run task: suggested %v, %d events", next.ContinueAsNewSuggested, len(next.Events))
	}
	h.complete(next, completeWF(`1`))
}

// TestOversizedActivityResultIsAnOutcome: a result over the payload limit
// is recorded as completed without its result (the effect happened), the
// ledger says so, and the workflow gets a task — never a lease timeout or a
// false unknown outcome. A later run deduplicating the action is told the
// same.
func TestOversizedActivityResultIsAnOutcome(t *testing.T) {
	h := newHarness(t, smallLimits)
	for _, n := range []int{lPayload - 1, lPayload, lPayload + 1} {
		id := fmt.Sprint("pay-", n)
		h.start(id, "W")
		h.complete(h.pollWFT("q"), schedule("p", "Pay", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
		act := h.pollActivity("q")
		if act.MaxResultBytes != lPayload {
			t.Fatalf("the task does not tell the limit: %d", act.MaxResultBytes)
		}
		if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: act.TaskToken, Result: payloadOf(n)}); err != nil {
			t.Fatalf("result of %d bytes: %v", n, err)
		}
		c, _ := find[*history.ActivityCompleted](t, h.history(id))
		le, err := h.eng.ledgerEntry(h.ctx(), id, act.IdempotencyKey)
		if err != nil || le.State != machine.LedgerCompleted {
			t.Fatalf("ledger %+v %v", le, err)
		}
		switch {
		case n <= lPayload && (len(c.Result.Data) != n || c.ResultOmitted != "" || le.ResultOmitted != ""):
			t.Fatalf("%d bytes: %+v / ledger %q", n, c, le.ResultOmitted)
		case n > lPayload && (len(c.Result.Data) != 0 || !strings.Contains(c.ResultOmitted, "over the limit") || le.ResultOmitted == ""):
			t.Fatalf("%d bytes: %+v / ledger %q", n, c, le.ResultOmitted)
		}
		h.complete(h.pollWFT("q"), completeWF(`1`))
		if n > lPayload {
			// A new run of the workflow makes the same payment: not again, and
			// not with an empty result either.
			h.start(id, "W")
			h.complete(h.pollWFT("q"), schedule("p", "Pay", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
			d, _ := find[*history.ActivityDeduplicated](t, h.history(id))
			if d.ResultOmitted == "" {
				t.Fatalf("dedup %+v", d)
			}
			h.noActivity("q")
			h.complete(h.pollWFT("q"), completeWF(`1`))
		}
	}
	// A worker that checked first says so itself.
	h.start("w", "W")
	h.complete(h.pollWFT("q"), schedule("r", "Read", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	act := h.pollActivity("q")
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: act.TaskToken,
		ResultOmitted: "the result is 3 MB"}); err != nil {
		t.Fatal(err)
	}
	if c, _ := find[*history.ActivityCompleted](t, h.history("w")); c.ResultOmitted != "the result is 3 MB" {
		t.Fatalf("%+v", c)
	}
}

// TestOversizedDetailsAreDropped: heartbeat and failure details over the
// limit are dropped, not refused: the lease is extended, the failure
// recorded.
func TestOversizedDetailsAreDropped(t *testing.T) {
	h := newHarness(t, smallLimits)
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &history.RetryPolicy{MaximumAttempts: 1}})
	act := h.pollActivity("q")
	h.advance(5 * time.Second)
	resp, err := h.eng.RecordActivityHeartbeat(h.ctx(), &api.HeartbeatRequest{TaskToken: act.TaskToken, Details: payloadOf(lPayload + 1)})
	if err != nil || !resp.Deadline.Equal(h.clk.Now().Add(10*time.Second)) {
		t.Fatalf("heartbeat %+v %v", resp, err)
	}
	if d := h.describe("wf").PendingActivities[0]; len(d.HeartbeatDetails.Data) != 0 {
		t.Fatalf("details kept: %d bytes", len(d.HeartbeatDetails.Data))
	}
	if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: act.TaskToken,
		Failure: history.Failure{Type: "Boom", Message: "it broke", Details: payloadOf(lPayload + 1)}}); err != nil {
		t.Fatal(err)
	}
	f, _ := find[*history.ActivityFailed](t, h.history("wf"))
	if f.Failure.Type != "Boom" || len(f.Failure.Details.Data) != 0 || !strings.Contains(f.Failure.Message, "details dropped") {
		t.Fatalf("%+v", f.Failure)
	}
}

// TestBadCommandsFailTheTask: malformed commands fail the task with cause
// bad_commands (and count toward the refusals) instead of being refused
// into a timeout.
func TestBadCommandsFailTheTask(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Limits.MaxWorkflowTaskRefusals = 100 })
	h.start("wf", "W")
	bad := []api.Command{
		{Type: api.CommandType(99)},
		{Type: api.CommandUnspecified},
		{Type: api.CommandScheduleActivity},
		{Type: api.CommandStartTimer, CompleteWorkflow: &api.CompleteWorkflowCommand{}},
		{Type: api.CommandCompleteWorkflow},
		{Type: api.CommandStartChildWorkflow},
		{Type: api.CommandContinueAsNew},
		{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "a"}},    // no type
		{Type: api.CommandStartTimer, StartTimer: &api.StartTimerCommand{TimerID: "t", Duration: -time.Second}}, // negative
	}
	for i, c := range bad {
		task := h.pollWFT("q")
		if err := h.completeErr(task, c); !strings.Contains(errString(err), "invalid argument") {
			t.Fatalf("bad command %d (%s): %v", i, c.Type, err)
		}
		h.advance(time.Hour) // past the retry backoff
	}
	// A closing command that is not last.
	task := h.pollWFT("q")
	wantErr(t, h.completeErr(task, completeWF(`1`), startTimer("t", time.Second)), api.ErrInvalidArgument)
	evs := h.history("wf")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskFailed")
	if f, _ := find[*history.WorkflowTaskFailed](t, evs); f.Cause != api.CauseBadCommands {
		t.Fatalf("cause %q", f.Cause)
	}
	h.advance(time.Hour)
	h.complete(h.pollWFT("q"), completeWF(`1`))
}

// TestCommandReferencingAMissingChunkFailsTheTask: a command whose payload
// extends a chunk that is not stored (a worker's transcript that moved its
// tip past a model call never recorded) cannot be written; the task fails
// durably with cause bad_commands, like any malformed command, instead of
// being refused into a timeout that comes back with the same commands.
func TestCommandReferencingAMissingChunkFailsTheTask(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Limits.MaxWorkflowTaskRefusals = 100 })
	h.start("wf", "W")
	missing := bytes.Repeat([]byte{7}, 32)
	cmd := api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "model:2",
		ActivityType: "llm.Chat", Input: history.Payload{Encoding: history.EncodingTranscript, Ref: missing, Data: []byte("more")},
		Options: history.ActivityOptions{StartToCloseTimeout: time.Minute}}}
	err := h.completeErr(h.pollWFT("q"), cmd)
	wantErr(t, err, api.ErrInvalidArgument)
	if !strings.Contains(err.Error(), "which is not stored") || !strings.Contains(err.Error(), "recorded as a failed workflow task") {
		t.Fatalf("the refusal: %v", err)
	}
	evs := h.history("wf")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskFailed")
	if f, _ := find[*history.WorkflowTaskFailed](t, evs); f.Cause != api.CauseBadCommands || !strings.Contains(f.Failure.Message, "which is not stored") {
		t.Fatalf("the failed task: %+v", f)
	}
	h.advance(time.Hour) // past the retry backoff: fixed code goes on
	h.complete(h.pollWFT("q"), completeWF(`1`))
}
