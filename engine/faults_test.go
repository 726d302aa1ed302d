package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
)

// The engine under store faults (history/faultstore): an I/O error, a full
// disk, a commit that reached the disk but was reported as failed. Each
// call gets a typed error; nothing is half-applied; no run is left stuck
// behind its own history.

// failNextCommit makes the next commit fail, before or after it is applied.
func (h *harness) failNextCommit(mode faultstore.Mode, err error) {
	h.fault.Inject(faultstore.Rule{Op: faultstore.OpCommit, Mode: mode, Err: err, Times: 1})
}

// TestCommitFailsBeforeWriting: an I/O error or a full disk fails the call
// with a typed error and writes nothing; the same call succeeds afterwards.
func TestCommitFailsBeforeWriting(t *testing.T) {
	h := newHarness(t)
	h.failNextCommit(faultstore.Before, faultstore.ErrDiskFull)
	_, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"})
	wantErr(t, err, api.ErrResourceExhausted)
	_, err = h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: "wf"})
	wantErr(t, err, api.ErrNotFound)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), schedule("a", "A", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	act := h.pollActivity("q")
	n := h.historyLen("wf")
	h.failNextCommit(faultstore.Before, faultstore.ErrIO)
	_, err = h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: act.TaskToken, Result: jsonPayload(`"paid"`)})
	wantErr(t, err, api.ErrInternal)
	h.unchanged("wf", n, "a failed commit")
	// The worker retries its report: recorded once.
	h.completeActivity(act, `"paid"`)
	if c := count(h.history("wf"), history.TypeActivityCompleted); c != 1 {
		t.Fatalf("%d completions", c)
	}
	h.complete(h.pollWFT("q"), completeWF(`1`))
}

// TestCommittedButReportedFailed: the commit is durable, the caller hears
// an error. The engine reads the run back, so it goes on from what was
// written — not stuck appending at event ids the store already used — and
// the retried report is not recorded twice.
func TestCommittedButReportedFailed(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), schedule("a", "A", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	act := h.pollActivity("q")
	h.failNextCommit(faultstore.After, faultstore.ErrIO)
	_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: act.TaskToken, Result: jsonPayload(`"paid"`)})
	wantErr(t, err, api.ErrInternal)
	// The worker's retry of its report is answered as the repeat it is
	// (reports are idempotent), and recorded once.
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: act.TaskToken, Result: jsonPayload(`"paid"`)}); err != nil {
		t.Fatalf("retried report: %v", err)
	}
	h.signal("wf", "s", `1`) // the run takes new events at the right ids
	task := h.pollWFT("q")
	if _, ev := find[*history.ActivityCompleted](t, task.Events); ev.ID == 0 {
		t.Fatal("the durable completion is not in the next task")
	}
	h.complete(task, completeWF(`1`))
	if r := h.result("wf", ""); r.Status != api.StatusCompleted {
		t.Fatalf("result %+v", r)
	}
	if c := count(h.history("wf"), history.TypeActivityCompleted); c != 1 {
		t.Fatalf("%d completions", c)
	}
	// Without the read-back the run would be stuck: prove the failure
	// really left memory behind the store.
	if h.fault.Failures(faultstore.OpCommit) != 1 {
		t.Fatal("the fault did not fire")
	}
}

// TestStartCommittedButReportedFailed: a start whose commit was applied
// but reported failed is served (its run is adopted), and the client's
// retry with the same request id finds it.
func TestStartCommittedButReportedFailed(t *testing.T) {
	h := newHarness(t)
	req := &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q", RequestID: "req-1"}
	h.failNextCommit(faultstore.After, faultstore.ErrIO)
	_, err := h.eng.StartWorkflow(h.ctx(), req)
	wantErr(t, err, api.ErrInternal)
	resp, err := h.eng.StartWorkflow(h.ctx(), req)
	if err != nil || resp.Started {
		t.Fatalf("retried start: %+v %v, want the run the failed call created", resp, err)
	}
	task := h.pollWFT("q")
	if task.WorkflowID != "wf" || task.RunID != resp.RunID {
		t.Fatalf("task %+v", task)
	}
	h.complete(task, completeWF(`1`))
}

// TestReadBackWaitsForTheStore: when the run cannot even be read back
// (the store is down), it is read back before its next transition.
func TestReadBackWaitsForTheStore(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	task := h.pollWFT("q")
	h.fault.Kill(faultstore.ErrIO) // every call fails from now on
	wantErr(t, h.completeErr(task, startTimer("t", time.Hour)), api.ErrInternal)
	_, err := h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "s"})
	wantErr(t, err, api.ErrUnavailable)
	h.fault.Revive()
	h.signal("wf", "s", `1`)
	task = h.pollWFT("q") // dispatched afresh after the read-back
	h.complete(task, completeWF(`1`))
	evs := h.history("wf")
	wantTypes(t, evs, "WorkflowStarted SignalReceived WorkflowTaskCompleted WorkflowCompleted")
}

// TestDeadlineSurvivesAStoreOutage: a deadline that comes due while the
// store is down (a database restarting) is tried again until the store is
// back, however many times the read-back fails meanwhile — never dropped,
// which would leave its run waiting for a timeout that no longer exists.
func TestDeadlineSurvivesAStoreOutage(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute,
		HeartbeatTimeout: 2 * time.Second, RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3}}))
	first := h.pollActivity("q")
	h.fault.Kill(faultstore.ErrIO) // the store is down
	// The heartbeat deadline passes; its transition fails, and so does each
	// retry (the run cannot be read back), for a while.
	for range 5 {
		h.advance(2 * time.Second)
	}
	h.fault.Revive()
	for range 5 {
		h.advance(2 * time.Second)
	}
	// The lost attempt's deadline was applied: the activity is dispatched
	// again (a Read attempt read back is dispatched afresh).
	second := h.pollActivity("q")
	if second.ActivityID != "a" || second.LeaseEpoch == first.LeaseEpoch {
		t.Fatalf("after the outage: %s attempt %d epoch %d, want a new dispatch of a (the first had epoch %d)",
			second.ActivityID, second.Attempt, second.LeaseEpoch, first.LeaseEpoch)
	}
}

// TestQueuedTaskSurvivesAStoreOutage: a workflow task a poller takes while
// its run cannot be read back (the store is down, a commit of the run
// failed) stays queued: once the store is back it is dispatched. Dropped,
// it left a run with nothing to move it — no deadline, no call.
func TestQueuedTaskSurvivesAStoreOutage(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W") // its first workflow task is queued
	h.fault.Kill(faultstore.ErrIO)
	_, err := h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "s"})
	wantErr(t, err, api.ErrInternal) // the run is to be read back
	if resp, err := h.eng.PollWorkflowTask(h.ctx(), &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"}); err == nil && resp.Task != nil {
		t.Fatalf("a task dispatched from a run that cannot be read back: %+v", resp.Task)
	}
	h.fault.Revive()
	task := h.pollWFT("q")
	h.complete(task, completeWF(`1`))
	wantTypes(t, h.history("wf"), "WorkflowStarted WorkflowTaskCompleted WorkflowCompleted")
}
