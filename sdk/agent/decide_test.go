package agent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
)

// A payment awaiting approval is a run waiting for a person, as the
// engine lists and describes it, with the tool's real effect class; a
// person's decision reaches the agent through Decide, which refuses one
// that applies to no awaited call before sending anything.
func TestDecideAnAwaitedPayment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, _ := newEnv(t, fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.Say("Paid INV-9."),
	})
	svc := env.Client.Service()
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "pay-INV-9", TaskQueue: env.TaskQueue()}, Payer, "INV-9")
	must(t, err)
	waitFor(t, ctx, env.Client, "pay-INV-9", func(ev history.Event) bool {
		m, ok := ev.Attrs.(*history.MarkerRecorded)
		return ok && m.Name == history.MarkerApprovalRequested
	})

	d, err := env.Client.DescribeWorkflow(ctx, "pay-INV-9", "")
	must(t, err)
	p := d.Info.Pause
	if d.Info.Status != api.StatusPaused || p == nil || p.Kind != api.PauseApproval || p.ActivityType != "SendPayment" ||
		p.Effect != history.SideEffect || !p.EffectKnown || p.Signal != agent.ApprovalSignal || len(d.PendingApprovals) != 1 ||
		d.PendingApprovals[0].Arguments != `{"invoice":"INV-9","amount":4200}` {
		t.Fatalf("described %s, pause %+v, pending %+v", d.Info.Status, p, d.PendingApprovals)
	}
	l, err := env.Client.ListWorkflows(ctx, &api.ListWorkflowsRequest{PauseKind: api.PauseApproval})
	must(t, err)
	if len(l.Workflows) != 1 || l.Workflows[0].WorkflowID != "pay-INV-9" {
		t.Fatalf("runs awaiting approval: %+v", l.Workflows)
	}
	tr, err := svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "pay-INV-9"})
	must(t, err)
	for _, it := range tr.Items {
		if c := it.ToolCall; c != nil && (c.State != api.CallAwaitingApproval || c.Effect != history.SideEffect || !c.EffectKnown) {
			t.Fatalf("the payment awaiting approval is shown as %+v", c)
		}
	}

	// A decision for a call that does not wait is refused, unsent.
	before := d.Info.HistoryLength
	if _, err := agent.Decide(ctx, svc, agent.Decision{WorkflowID: "pay-INV-9", CallID: "call_9", Approved: true, By: "eve"}); !errors.Is(err, agent.ErrCallNotAwaited) {
		t.Fatalf("a decision for call_9: %v", err)
	}
	if d, _ := env.Client.DescribeWorkflow(ctx, "pay-INV-9", ""); d.Info.HistoryLength != before {
		t.Fatalf("a refused decision was sent: %d events, was %d", d.Info.HistoryLength, before)
	}
	got, err := agent.Decide(ctx, svc, agent.Decision{WorkflowID: "pay-INV-9", Approved: true, By: "ada", Reason: "INV-9 checked"})
	must(t, err)
	if got.CallID != d.PendingApprovals[0].CallID {
		t.Fatalf("decided %+v, want the call awaiting", got)
	}
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Paid INV-9." || tl.count("SendPayment") != 1 {
		t.Fatalf("result %+v, payments %d", res, tl.count("SendPayment"))
	}
	if _, err := agent.Decide(ctx, svc, agent.Decision{WorkflowID: "pay-INV-9", Approved: true, By: "ada"}); !errors.Is(err, agent.ErrNoApprovalAwaited) {
		t.Fatalf("a decision for a completed run: %v", err)
	}
	tr, err = svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "pay-INV-9"})
	must(t, err)
	for _, it := range tr.Items {
		if c := it.ToolCall; c != nil && (c.State != api.CallCompleted || c.ApprovedBy != "ada" || c.Effect != history.SideEffect) {
			t.Fatalf("the payment is shown as %+v", c)
		}
	}
}

// Awaited picks the call a decision names, or the only one.
func TestAwaited(t *testing.T) {
	one := []api.PendingApproval{{CallID: "c1", Tool: "Pay"}}
	two := append(one, api.PendingApproval{CallID: "c2", Tool: "Refund"})
	for _, c := range []struct {
		pending []api.PendingApproval
		call    string
		want    string
		err     error
	}{
		{nil, "", "", agent.ErrNoApprovalAwaited},
		{one, "", "c1", nil},
		{one, "c1", "c1", nil},
		{one, "c2", "", agent.ErrCallNotAwaited},
		{two, "", "", agent.ErrWhichCall},
		{two, "c2", "c2", nil},
	} {
		p, err := agent.Awaited(c.pending, c.call)
		if !errors.Is(err, c.err) || p.CallID != c.want {
			t.Errorf("Awaited(%d pending, %q) = %q, %v; want %q, %v", len(c.pending), c.call, p.CallID, err, c.want, c.err)
		}
	}
	if _, err := agent.Awaited(two, ""); err == nil || err.Error() != "agent: several tool calls await approval: name one (awaiting: c1 (Pay), c2 (Refund))" {
		t.Errorf("the error names the calls: %v", err)
	}
}
