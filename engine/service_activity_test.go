package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Activities across a restart and on the task queue. The machine's
// decisions on retries, timeouts, heartbeats, cancellation and fencing are
// scripted in engine/machine (activity_test.go).

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
