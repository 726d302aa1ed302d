package machine

import (
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// A parent cancels the children it started (issue 20, point 6).

func startChildCmd(id string) api.Command {
	return api.Command{Type: api.CommandStartChildWorkflow, StartChildWorkflow: &api.StartChildWorkflowCommand{
		WorkflowID: id, WorkflowType: "Child", Input: jsonPayload(`"in"`)}}
}

func cancelChildCmd(initiated int64, id, runID string) api.Command {
	return api.Command{Type: api.CommandRequestCancelChildWorkflow, RequestCancelChildWorkflow: &api.RequestCancelChildWorkflowCommand{
		InitiatedEventID: initiated, WorkflowID: id, RunID: runID}}
}

func TestChildCancel(t *testing.T) {
	s := newServiceScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "parent", WorkflowType: "P", TaskQueue: "q"})
	out := s.complete(startChildCmd("c1"), startChildCmd("c2"))
	if len(out.ChildStarts) != 2 {
		t.Fatalf("child starts %+v", out.ChildStarts)
	}
	c1, c2 := out.ChildStarts[0].Params, out.ChildStarts[1].Params
	s.signal("go", `1`)
	out = s.complete(cancelChildCmd(3, "c1", c1.RunID))
	if len(out.CancelChildren) != 1 || out.CancelChildren[0].WorkflowID != "c1" || out.CancelChildren[0].RunID != c1.RunID {
		t.Fatalf("cancel children %+v", out.CancelChildren)
	}
	if !s.st.Children[3].CancelRequested || s.st.Children[4].CancelRequested {
		t.Fatalf("children %+v %+v", s.st.Children[3], s.st.Children[4])
	}
	if r, _ := find[*history.ChildWorkflowCancelRequested](t, s.history); r.InitiatedEventID != 3 || r.WorkflowID != "c1" ||
		r.RunID != c1.RunID || r.WorkflowTaskCompletedEventID != 6 {
		t.Fatalf("ChildWorkflowCancelRequested %+v", r)
	}
	s.noWFT() // the request alone wakes nobody: the child's outcome will

	// The child honours the request: it gets WorkflowCancelRequested and
	// closes as canceled with details, which reach the parent.
	child, first := s.m.Start(c1, s.now)
	if !first.WFTReady {
		t.Fatal("child not ready")
	}
	req := out.CancelChildren[0]
	cout, err := s.m.RequestCancel(child, req.Reason, req.Identity, s.now)
	if err != nil || len(cout.Events) != 1 {
		t.Fatalf("child cancel request: %v %+v", err, cout.Events)
	}
	if a := cout.Events[0].Attrs.(*history.WorkflowCancelRequested); a.Identity != "w1" || a.Reason == "" {
		t.Fatalf("child's WorkflowCancelRequested %+v", a)
	}
	s.m.WFTDispatched(child, 1, s.now)
	details := jsonPayload(`"cleaned up"`)
	if _, err := s.m.CompleteWFT(child, WFTCompletion{Commands: []api.Command{{Type: api.CommandCancelWorkflow,
		CancelWorkflow: &api.CancelWorkflowCommand{Details: details}}}}, s.now); err != nil {
		t.Fatal(err)
	}
	s.must("child 3 closed", func(st *RunState) (Output, error) { return s.m.ChildClosed(st, 3, child, s.now) })
	f, _ := find[*history.ChildWorkflowFailed](t, s.history)
	if f.InitiatedEventID != 3 || f.Failure.Type != "Canceled" || string(f.Failure.Details.Data) != `"cleaned up"` {
		t.Fatalf("ChildWorkflowFailed %+v", f)
	}

	// A second request for a child already asked is recorded, not sent;
	// one for a child that closed already is recorded and touches nothing.
	s.dispatchWFT()
	out = s.completeTask(cancelChildCmd(4, "c2", c2.RunID), cancelChildCmd(4, "c2", c2.RunID), cancelChildCmd(3, "c1", c1.RunID))
	if len(out.CancelChildren) != 1 || out.CancelChildren[0].WorkflowID != "c2" {
		t.Fatalf("cancel children %+v", out.CancelChildren)
	}
	if n := count(s.history, history.TypeChildWorkflowCancelRequested); n != 4 {
		t.Fatalf("%d ChildWorkflowCancelRequested", n)
	}
	s.golden()
}

func TestChildCancelNamesTheChild(t *testing.T) {
	s := newServiceScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "parent", WorkflowType: "P", TaskQueue: "q"})
	s.complete(startChildCmd("c1"))
	s.signal("go", `1`)
	s.dispatchWFT()
	_, err := s.do("cancel another workflow", func(st *RunState) (Output, error) {
		return s.m.CompleteWFT(st, WFTCompletion{Commands: []api.Command{cancelChildCmd(3, "someone-else", "")}}, s.now)
	})
	wantErr(t, err, api.ErrInvalidArgument)
	_, err = s.do("missing attributes", func(st *RunState) (Output, error) {
		return s.m.CompleteWFT(st, WFTCompletion{Commands: []api.Command{{Type: api.CommandRequestCancelChildWorkflow}}}, s.now)
	})
	wantErr(t, err, api.ErrInvalidArgument)
}
