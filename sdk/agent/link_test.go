package agent_test

import (
	"context"
	"net/http/httptest"
	"strings"
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
)

// LinkPayer is Payer with its approvals also sent as links.
func LinkPayer(ctx sdk.Context, invoice string) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{
		Model:  "fake-1",
		System: "You pay invoices.",
		Tools: []agent.Tool{
			agent.NewTool(t.SendPayment, "Pay", agent.RequireApproval()),
		},
		ApprovalLinks: true,
	})
	return a.Run(ctx, "Pay "+invoice)
}

// linkEnv runs LinkPayer with a notifier that hands each link to the test.
func linkEnv(t *testing.T, script fakellm.Script) (*tools, client.Client, string, chan agent.ApprovalLink) {
	hs := httptest.NewServer(fakellm.New(script))
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1"})
	must(t, err)
	env := storeEnv(t, testenv.Options{NoTimeSkipping: true})
	tl := &tools{calls: map[string]int{}}
	env.RegisterWorkflow(LinkPayer)
	must(t, m.Register(env.Worker))
	env.RegisterActivity(tl.SendPayment, activities.Options{Effect: activities.SideEffect})
	links := make(chan agent.ApprovalLink, 4)
	notify := agent.ApprovalNotifierFunc(func(_ context.Context, l agent.ApprovalLink) error {
		links <- l
		return nil
	})
	env.RegisterActivity(agent.ApprovalLinkFunc(notify), agent.ApprovalLinkActivityOptions)
	env.Start()
	return tl, env.Client, env.TaskQueue(), links
}

func nextLink(t *testing.T, ctx context.Context, links chan agent.ApprovalLink) agent.ApprovalLink {
	t.Helper()
	select {
	case l := <-links:
		return l
	case <-ctx.Done():
		t.Fatal("no approval link was sent")
	}
	return agent.ApprovalLink{}
}

// A call awaiting approval is sent as a link (the request: run, call,
// tool, arguments, token); the person following it decides the call as
// the signal would. The same decision again (a retried webhook) is
// accepted once; another is refused.
func TestApprovalByLink(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tl, c, queue, links := linkEnv(t, fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.Say("Done."),
	})
	const id = "link-approve"
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: queue}, LinkPayer, "INV-9")
	must(t, err)
	l := nextLink(t, ctx, links)
	if l.WorkflowID != id || l.RunID != run.RunID() || l.Tool != "SendPayment" || !strings.Contains(l.Arguments, "INV-9") || l.Token == "" || l.CallID == "" {
		t.Fatalf("link %+v", l)
	}
	if tl.count("SendPayment") != 0 {
		t.Fatal("the payment ran before its approval")
	}
	yes := agent.Approval{Approved: true, By: "ada", Reason: "checked"}
	must(t, agent.CompleteApproval(ctx, c, l.Token, yes))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Done." || tl.count("SendPayment") != 1 {
		t.Fatalf("result %+v, %d payments", res, tl.count("SendPayment"))
	}
	tr, err := c.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id})
	must(t, err)
	if len(tr.Ignored) != 0 {
		t.Fatalf("ignored approvals %+v", tr.Ignored)
	}
	must(t, agent.CompleteApproval(ctx, c, l.Token, yes)) // the webhook retried
	if err := agent.CompleteApproval(ctx, c, l.Token, agent.Approval{Approved: false, By: "bob"}); err == nil {
		t.Fatal("a second, different decision on the link was accepted")
	}
	if err := agent.CompleteApproval(ctx, c, "not a token", yes); err == nil {
		t.Fatal("a malformed token was accepted")
	}
}

// The signal decides first: the link's request is withdrawn, and a
// decision through that link afterwards is recorded as ignored — it never
// decides the next call awaiting approval — while the next call's own
// link decides it.
func TestApprovalLinkAfterTheSignal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tl, c, queue, links := linkEnv(t, fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4100}`),
		fakellm.Say("Done."),
	})
	const id = "link-late"
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: queue}, LinkPayer, "INV-9")
	must(t, err)
	first := nextLink(t, ctx, links)
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{Approved: false, By: "bob", Reason: "wrong amount"}))
	waitFor(t, ctx, c, id, func(ev history.Event) bool { _, ok := ev.Attrs.(*history.ActivityCancelRequested); return ok })
	second := nextLink(t, ctx, links)
	if second.CallID == first.CallID && second.Token == first.Token {
		t.Fatalf("the second call's link is the first's: %+v", second)
	}
	must(t, agent.CompleteApproval(ctx, c, first.Token, agent.Approval{Approved: true, By: "mallory"}))
	waitFor(t, ctx, c, id, isMarker(history.MarkerApprovalIgnored))
	if tl.count("SendPayment") != 0 {
		t.Fatal("the late link decided a call")
	}
	must(t, agent.CompleteApproval(ctx, c, second.Token, agent.Approval{Approved: true, By: "ada"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if tl.count("SendPayment") != 1 {
		t.Fatalf("%d payments, want the second call's only", tl.count("SendPayment"))
	}
	tr, err := c.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id})
	must(t, err)
	if len(tr.Ignored) != 1 || tr.Ignored[0].By != "mallory" || !strings.Contains(tr.Ignored[0].Why, "approval link came after") {
		t.Fatalf("ignored %+v", tr.Ignored)
	}
}
