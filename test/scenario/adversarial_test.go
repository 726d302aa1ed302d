package scenario_test

import (
	"testing"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/agent"
)

// A run canceled while a call awaits approval ends canceled: the tool never
// runs and the model is not called again.
func TestCancelWhileAwaitingApproval(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-C","amount":1}`),
		fakellm.Say("Paid."),
	})
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "cancel-approval", Task{Approve: true})
	waitEvent(t, ctx, c, "cancel-approval", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	must(t, c.CancelWorkflow(ctx, "cancel-approval", "", "changed my mind"))
	err := run.Get(ctx, nil)
	d, derr := c.DescribeWorkflow(ctx, "cancel-approval", "")
	must(t, derr)
	if err == nil || d.Info.Status != api.StatusCanceled {
		t.Fatalf("canceled run ended with %v, status %v", err, d.Info.Status)
	}
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 0 || model.Calls() != 1 {
		t.Fatalf("after the cancel: %d payments, %d model calls", pay, model.Calls())
	}
}

// An approval signal with a payload that is not an Approval (a CLI user
// typing --input '"yes"') must not wedge the run: it is ignored or
// reported, and a proper approval afterwards still works.
func TestMalformedApprovalSignal(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-M","amount":1}`),
		fakellm.Say("Paid."),
	})
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "bad-signal", Task{Approve: true})
	waitEvent(t, ctx, c, "bad-signal", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	must(t, c.SignalWorkflow(ctx, "bad-signal", "", agent.ApprovalSignal, "yes"))
	must(t, c.SignalWorkflow(ctx, "bad-signal", "", agent.ApprovalSignal, map[string]any{"Approved": "yes", "By": 7}))
	must(t, c.SignalWorkflow(ctx, "bad-signal", "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ada"}))
	// waitEvent fails the test on a failed workflow task (the run wedged).
	waitEvent(t, ctx, c, "bad-signal", "", "approval decided", isMarker(history.MarkerApprovalDecided))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 1 || res.Final != "Paid." {
		t.Fatalf("%d payments, result %+v", pay, res)
	}
}
