package agent_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
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

// QueuedPayer runs its payment on a task queue of its own ("tools").
func QueuedPayer(ctx sdk.Context, invoice string) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{
		Model:       "fake-1",
		Tools:       []agent.Tool{agent.NewTool(t.SendPayment, "Pay", agent.RequireApproval())},
		ToolOptions: &sdk.ActivityOptions{TaskQueue: "tools", StartToCloseTimeout: time.Minute},
	})
	return a.Run(ctx, "Pay "+invoice)
}

// The transcript's effect class of a tool call is what the engine knows:
// not known while no worker of the tool's queue declared it (not Read),
// the class its activity was recorded with once scheduled, and the class
// the declaration of the worker that ran it gave it at dispatch.
func TestTranscriptEffectIsTheEnginesKnowledge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	model := httptest.NewServer(fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.Say("Paid."),
	}))
	t.Cleanup(model.Close)
	m, err := llm.New(llm.Config{BaseURL: model.URL + "/v1"})
	must(t, err)
	env := testenv.New(t, testenv.Options{NoTimeSkipping: true})
	env.RegisterWorkflow(QueuedPayer)
	must(t, m.Register(env.Worker)) // the payment is registered on the tools' worker only
	env.Start()
	svc := env.Client.Service()
	payment := func() *api.ToolCallInfo {
		t.Helper()
		tr, err := svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "queued"})
		must(t, err)
		for _, it := range tr.Items {
			if it.ToolCall != nil {
				return it.ToolCall
			}
		}
		t.Fatal("no tool call in the transcript")
		return nil
	}
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "queued", TaskQueue: env.TaskQueue()}, QueuedPayer, "INV-9")
	must(t, err)
	waitFor(t, ctx, env.Client, "queued", func(ev history.Event) bool {
		m, ok := ev.Attrs.(*history.MarkerRecorded)
		return ok && m.Name == history.MarkerApprovalRequested
	})
	if c := payment(); c.State != api.CallAwaitingApproval || c.EffectKnown {
		t.Fatalf("awaiting approval, no declaration known: %+v", c)
	}
	_, err = agent.Decide(ctx, svc, agent.Decision{WorkflowID: "queued", Approved: true, By: "ada"})
	must(t, err)
	waitFor(t, ctx, env.Client, "queued", func(ev history.Event) bool {
		s, ok := ev.Attrs.(*history.ActivityScheduled)
		return ok && s.ActivityType == "SendPayment"
	})
	if c := payment(); !c.EffectKnown || c.Effect != history.Read || c.ScheduledEventID == 0 {
		t.Fatalf("scheduled by a workflow worker that does not know the tool: %+v", c)
	}
	tl := &tools{calls: map[string]int{}}
	w := env.NewWorker(worker.Options{TaskQueue: "tools", Identity: "tools-worker"})
	must(t, w.RegisterActivity(tl.SendPayment, activities.Options{Effect: activities.SideEffect}))
	defer env.RunWorker(w)()
	must(t, run.Get(ctx, nil))
	if c := payment(); c.State != api.CallCompleted || c.Effect != history.SideEffect || c.IdempotencyKey == "" || tl.count("SendPayment") != 1 {
		t.Fatalf("run by a worker declaring it SideEffect: %+v (%d payments)", c, tl.count("SendPayment"))
	}
}
