package machine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Timers and run timeouts, scripted as the engine's tests drove them
// through the service (see newServiceScript).

func cancelTimerCmd(id string) api.Command {
	return api.Command{Type: api.CommandCancelTimer, CancelTimer: &api.CancelTimerCommand{TimerID: id}}
}

func TestTimerCancel(t *testing.T) {
	s := newServiceScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "T", TaskQueue: "q", Input: jsonPayload(`"in"`)})
	s.complete(startTimer("t1", time.Hour), startTimer("t2", 2*time.Hour))
	s.signal("stop", `1`)
	s.complete(cancelTimerCmd("t1"))
	if len(s.st.Timers) != 1 || s.st.Timers["t2"] == nil {
		t.Fatalf("pending timers %+v", s.st.Timers)
	}
	s.wait(time.Hour)
	wantTypes(t, s.history, "WorkflowStarted WorkflowTaskCompleted TimerStarted TimerStarted SignalReceived WorkflowTaskCompleted TimerCanceled")
	if c, _ := find[*history.TimerCanceled](t, s.history); c.TimerID != "t1" || c.StartedEventID != 3 {
		t.Fatalf("TimerCanceled %+v", c)
	}
	s.noWFT()
	s.wait(time.Hour)
	if evs := s.history; evs[len(evs)-1].Type() != history.TypeTimerFired {
		t.Fatalf("t2 did not fire:\n%s", types(evs))
	}
	s.golden()
}

func TestRunTimeout(t *testing.T) {
	s := newServiceScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "Flow", TaskQueue: "q", RunTimeout: time.Minute})
	s.complete(startTimer("t", time.Hour))
	s.wait(time.Minute - time.Millisecond)
	if !s.st.Status.Open() {
		t.Fatal("closed before the run timeout")
	}
	s.wait(time.Millisecond)
	wantTypes(t, s.history, "WorkflowStarted WorkflowTaskCompleted TimerStarted WorkflowTimedOut")
	if to, _ := find[*history.WorkflowTimedOut](t, s.history); to.Timeout != "run" {
		t.Fatalf("timed out %+v", to)
	}
	if s.st.Status != api.StatusTimedOut || s.st.Failure == nil {
		t.Fatalf("status %s, failure %+v", s.st.Status, s.st.Failure)
	}
	// The timer deadline that is still armed does nothing to a closed run.
	s.wait(time.Hour)
	if n := len(s.history); n != 4 {
		t.Fatalf("%d events after the run closed", n)
	}
	s.golden()
}
