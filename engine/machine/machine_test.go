package machine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

var minute = history.ActivityOptions{StartToCloseTimeout: time.Minute}

func TestMachineOneActivity(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(schedule("1", "Greet", history.Read, minute))
	ep := s.dispatchActivity(3)
	s.advance(time.Second)
	s.step("activity completed", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, ep, jsonPayload(`"hi"`), "", "w1", history.Usage{}, s.now)
	})
	s.complete(completeWF(`"done"`))
	s.golden()
}

func TestMachineRetryThenSuccess(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(schedule("1", "Flaky", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5}}))
	for i := 0; i < 2; i++ {
		ep := s.dispatchActivity(3)
		s.step("activity failed", func() (Output, error) {
			return s.m.ActivityFailed(s.st, 3, ep, history.Failure{Type: "Unavailable", Message: "try later"}, FailureReport{}, s.now)
		})
		s.advance(time.Duration(1<<i) * time.Second)
		s.fireDue()
	}
	ep := s.dispatchActivity(3)
	s.step("activity completed", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, ep, jsonPayload(`"ok"`), "", "w1", history.Usage{}, s.now)
	})
	s.step("stale completion from attempt 1", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, 1, jsonPayload(`"late"`), "", "w1", history.Usage{}, s.now)
	})
	s.golden()
}

func TestMachineNonRetryable(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(schedule("1", "Charge", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &history.RetryPolicy{NonRetryableErrorTypes: []string{"CardDeclined"}}}))
	ep := s.dispatchActivity(3)
	s.step("activity failed", func() (Output, error) {
		return s.m.ActivityFailed(s.st, 3, ep, history.Failure{Type: "CardDeclined", Message: "declined"}, FailureReport{}, s.now)
	})
	s.golden()
}

func TestMachineTimers(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(startTimer("a", time.Hour), startTimer("b", 24*time.Hour))
	s.advance(time.Hour - time.Millisecond)
	s.fireDue() // nothing is due a millisecond early
	s.advance(time.Millisecond)
	s.fireDue()
	s.complete(api.Command{Type: api.CommandCancelTimer, CancelTimer: &api.CancelTimerCommand{TimerID: "b"}}, completeWF(`null`))
	s.golden()
}

func TestMachineSignalDuringTask(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.dispatchWFT()
	s.step("signal while the task runs", func() (Output, error) {
		return s.m.Signal(s.st, "approve", jsonPayload(`true`), "alice", s.now)
	})
	s.step("complete closing the run (refused)", func() (Output, error) {
		return s.m.CompleteWFT(s.st, WFTCompletion{Commands: []api.Command{completeWF(`"early"`)}}, s.now)
	})
	s.step("complete scheduling a timer (accepted; the signal gets a new task)", func() (Output, error) {
		return s.m.CompleteWFT(s.st, WFTCompletion{Commands: []api.Command{startTimer("t", time.Minute)}}, s.now)
	})
	s.golden()
}

func TestMachineSideEffectPausesAndResolves(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "invoice-INV-9", WorkflowType: "PayInvoice", TaskQueue: "q"})
	s.complete(schedule("1", "SendPayment", history.SideEffect, minute))
	s.dispatchActivity(3)
	s.advance(time.Minute)
	s.fireDue()
	if got := s.st.EffectiveStatus(); got != api.StatusPaused {
		t.Fatalf("status %s, want paused", got)
	}
	s.step("resolve: happened", func() (Output, error) {
		return s.m.Resolve(s.st, &api.ResolveActivityRequest{ScheduledEventID: 3, Resolution: history.ResolvedHappened,
			Result: jsonPayload(`{"paid":4200}`), Identity: "alice", Reason: "ACME confirmed the transfer"}, s.now)
	})
	s.golden()
}

func TestMachineReconcile(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	c := schedule("1", "SendPayment", history.SideEffect, minute)
	c.ScheduleActivity.HasReconcile = true
	s.complete(c)
	s.dispatchActivity(3)
	s.advance(time.Minute)
	s.fireDue()
	ep := s.dispatchActivity(3) // the Reconcile lookup
	s.step("reconcile: not happened", func() (Output, error) {
		return s.m.ActivityFailed(s.st, 3, ep, history.Failure{Message: "no such payment"}, FailureReport{Kind: FailedNotHappened}, s.now)
	})
	ep = s.dispatchActivity(3)
	s.step("activity completed", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, ep, jsonPayload(`"paid"`), "", "w1", history.Usage{}, s.now)
	})
	s.golden()
}

func TestMachineIdempotencyKeys(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	// The same payment twice in one run: two actions, two keys.
	s.complete(schedule("1", "SendPayment", history.SideEffect, minute), schedule("2", "SendPayment", history.SideEffect, minute))
	k1 := s.st.Activities[3].IdempotencyKey
	k2 := s.st.Activities[4].IdempotencyKey
	if k1 == k2 {
		t.Fatal("identical calls in one run must get distinct keys")
	}
	if want := IdempotencyKey("wf", "SendPayment", []byte(`{"invoice":"INV-9"}`), 1); k1 != want {
		t.Fatalf("key %s, want %s", k1, want)
	}
	s.golden()
}

func TestMachineWorkflowTaskFailures(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	for i := 0; i < 4; i++ {
		s.dispatchWFT()
		s.step("workflow task failed", func() (Output, error) {
			return s.m.FailWFT(s.st, "panic", history.Failure{Type: "PanicError", Message: "boom"}, "w1", s.now)
		})
	}
	s.advance(time.Second)
	s.fireDue()
	s.golden()
}

func TestMachineContinueAsNewAndTerminate(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "Agent", TaskQueue: "q", RunTimeout: time.Hour})
	out := s.complete(api.Command{Type: api.CommandContinueAsNew, ContinueAsNew: &api.ContinueAsNewCommand{Input: jsonPayload(`{"turn":2}`)}})
	if out.ContinueAsNew == nil || out.ContinueAsNew.ContinuedFrom != "run-1" {
		t.Fatalf("continue-as-new: %+v", out.ContinueAsNew)
	}
	st, first := s.m.Start(*out.ContinueAsNew, s.now)
	s.st = st
	s.record("next run "+st.RunID, first, nil)
	s.step("terminate", func() (Output, error) { return s.m.Terminate(s.st, "operator", history.Payload{}, "bob", s.now) })
	s.step("signal after close", func() (Output, error) { return s.m.Signal(s.st, "x", history.Payload{}, "", s.now) })
	s.golden()
}
