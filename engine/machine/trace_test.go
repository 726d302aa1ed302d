package machine

import (
	"strings"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

const (
	startTP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	taskTP  = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"
)

// TestTraceContext: a start's W3C trace context is recorded on the run's
// WorkflowStarted and kept in its state; an activity or a child started by
// a traced workflow task gets the task's traceparent, else the run's (an
// activity's is the run's when its task is built, engine.activityTask); the
// next run of a continue-as-new keeps the run's; an over-long one is not
// stored.
func TestTraceContext(t *testing.T) {
	s := newServiceScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "Agent", TaskQueue: "q", TraceParent: startTP, TraceState: "v=1"})
	ws := s.history[0].Attrs.(*history.WorkflowStarted)
	if ws.TraceParent != startTP || ws.TraceState != "v=1" || s.st.TraceParent != startTP || s.st.TraceState != "v=1" {
		t.Fatalf("started %+v, state %q %q", ws, s.st.TraceParent, s.st.TraceState)
	}
	traced := schedule("a1", "Pay", history.Read, history.ActivityOptions{})
	traced.ScheduleActivity.TraceParent = taskTP
	child := startChildCmd("c1")
	child.StartChildWorkflow.TraceParent = taskTP
	out := s.complete(traced, schedule("a2", "Pay", history.Read, history.ActivityOptions{}), child, startChildCmd("c2"))
	var got []string
	for _, a := range s.st.Activities {
		got = append(got, a.ActivityID+"="+a.TraceParent)
	}
	if len(out.ChildStarts) != 2 {
		t.Fatalf("child starts %+v", out.ChildStarts)
	}
	c1, c2 := out.ChildStarts[0].Params.Request, out.ChildStarts[1].Params.Request
	if c1.TraceParent != taskTP || c2.TraceParent != startTP || c1.TraceState != "v=1" {
		t.Errorf("children's trace context %q %q (%q)", c1.TraceParent, c2.TraceParent, c1.TraceState)
	}
	for _, a := range s.st.Activities {
		want := map[string]string{"a1": taskTP, "a2": ""}[a.ActivityID]
		if a.TraceParent != want {
			t.Errorf("activity %s traced under %q, want %q (%v)", a.ActivityID, a.TraceParent, want, got)
		}
	}
	s.signal("go", `1`)
	can := s.complete(api.Command{Type: api.CommandContinueAsNew, ContinueAsNew: &api.ContinueAsNewCommand{Input: jsonPayload(`1`)}})
	if can.ContinueAsNew == nil || can.ContinueAsNew.Request.TraceParent != startTP {
		t.Errorf("next run %+v", can.ContinueAsNew)
	}

	s.start(api.StartWorkflowRequest{WorkflowID: "wf2", WorkflowType: "Agent", TaskQueue: "q",
		TraceParent: strings.Repeat("0", maxTraceParent+1), TraceState: strings.Repeat("x", maxTraceState+1)})
	if ws := s.history[0].Attrs.(*history.WorkflowStarted); ws.TraceParent != "" || ws.TraceState != "" || s.st.TraceParent != "" {
		t.Fatalf("an over-long trace context was stored: %d bytes", len(ws.TraceParent)+len(ws.TraceState))
	}
}
