package scenario_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

func payScript(memo string) fakellm.Script {
	return fakellm.Script{
		fakellm.CallTool("ReadInvoice", `{"id":"INV-9"}`),
		fakellm.CallTools(
			fakellm.ToolCall{Name: "SendPayment", Arguments: `{"invoice_id":"INV-9","amount":4200,"memo":"` + memo + `"}`},
			fakellm.ToolCall{Name: "EmailVendor", Arguments: `{"invoice_id":"INV-9","to":"ap@acme.test","body":"paid"}`},
		),
		fakellm.Say("Paid INV-9."),
	}
}

// An agent's SideEffect tool whose first attempt times out after the
// payment went through is reconciled by its lookup (no second charge), its
// Idempotent tool runs once, every key is the one the tool saw, the history
// replays without model or tools, and a second run of the same workflow id
// — the model wording the memo differently — is deduplicated against the
// first: neither tool runs again and the model is told the recorded
// results (docs/effects.md, "a new run of the same workflow id").
func TestAgentSideEffectReconciledAndDeduplicatedAcrossRuns(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		memo := "first run"
		if r.Seq >= 3 {
			memo = "re-worded by the second run"
		}
		s := payScript(memo)
		return s[min(r.Turn, len(s)-1)]
	}).KeepRequests()
	s := newScene(t, model)
	s.prov.failFirst = true
	c := s.env.Client

	run := s.start(t, ctx, "pay-INV-9", Task{InvoiceID: "INV-9"})
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Paid INV-9." || res.StopReason != "final" || res.Turns != 3 {
		t.Fatalf("result %+v", res)
	}
	payCalls, charges, lookups, mailCalls, keys := s.prov.snapshot()
	if payCalls != 1 || charges != 1 || lookups != 1 || mailCalls != 1 {
		t.Fatalf("SendPayment %d calls, %d charges, %d lookups; EmailVendor %d calls", payCalls, charges, lookups, mailCalls)
	}
	payKey, mailKey := keys["SendPayment"][0], keys["EmailVendor"][0]
	if payKey == "" || mailKey == "" || payKey == mailKey || keys["LookupPayment"][0] != payKey {
		t.Fatalf("keys seen %v", keys)
	}
	calls := toolCalls(t, ctx, c, "pay-INV-9", run.RunID())
	if got := calls["SendPayment"]; len(got) != 1 || got[0].IdempotencyKey != payKey || got[0].State != api.CallCompleted || got[0].Effect != history.EffectClass(2) {
		t.Fatalf("SendPayment in the transcript: %+v (key seen %s)", got, payKey)
	}
	if got := calls["EmailVendor"]; len(got) != 1 || got[0].IdempotencyKey != mailKey || got[0].Effect != history.EffectClass(1) {
		t.Fatalf("EmailVendor in the transcript: %+v (key seen %s)", got, mailKey)
	}
	if tm := toolMessages(t, ctx, c, "pay-INV-9", run.RunID()); len(tm) != 3 || !strings.Contains(tm[1][1], "pay_001") {
		t.Fatalf("tool messages %q", tm)
	}
	effects, err := c.ListEffects(ctx, &api.ListEffectsRequest{WorkflowID: "pay-INV-9"})
	must(t, err)
	ledger := map[string]api.EffectInfo{}
	for _, e := range effects.Effects {
		ledger[e.ActivityType] = e
	}
	if len(effects.Effects) != 2 || ledger["SendPayment"].IdempotencyKey != payKey || ledger["EmailVendor"].IdempotencyKey != mailKey {
		t.Fatalf("ledger %+v", effects.Effects)
	}

	// The history replays through the same code: same commands, same keys,
	// no model call and no tool.
	evs, err := c.GetHistory(ctx, "pay-INV-9", run.RunID())
	must(t, err)
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Payables))
	must(t, r.ReplayHistory(history.RunRef{WorkflowID: "pay-INV-9", RunID: run.RunID()}, evs,
		worker.ReplayOptions{Chunks: client.NewChunkCache(c.Service(), 0)}))
	if model.Calls() != 3 {
		t.Fatalf("the model was called %d times, want 3", model.Calls())
	}

	// The same workflow id again, after completion.
	run2 := s.start(t, ctx, "pay-INV-9", Task{InvoiceID: "INV-9"})
	if run2.RunID() == run.RunID() {
		t.Fatal("no new run")
	}
	var res2 agent.Result
	must(t, run2.Get(ctx, &res2))
	if res2.Final != "Paid INV-9." {
		t.Fatalf("second result %+v", res2)
	}
	payCalls, charges, lookups, mailCalls, _ = s.prov.snapshot()
	if payCalls != 1 || charges != 1 || lookups != 1 || mailCalls != 1 {
		t.Fatalf("after the second run: SendPayment %d calls, %d charges, %d lookups; EmailVendor %d calls", payCalls, charges, lookups, mailCalls)
	}
	evs2, err := c.GetHistory(ctx, "pay-INV-9", run2.RunID())
	must(t, err)
	dedup := 0
	for _, ev := range evs2 {
		if _, ok := ev.Attrs.(*history.ActivityDeduplicated); ok {
			dedup++
		}
	}
	if dedup != 2 {
		t.Fatalf("%d ActivityDeduplicated events in the second run, want 2", dedup)
	}
	calls2 := toolCalls(t, ctx, c, "pay-INV-9", run2.RunID())
	if got := calls2["SendPayment"]; len(got) != 1 || got[0].IdempotencyKey != payKey {
		t.Fatalf("second run's SendPayment %+v, want key %s", got, payKey)
	}
	if got := calls2["EmailVendor"]; len(got) != 1 || got[0].IdempotencyKey != mailKey {
		t.Fatalf("second run's EmailVendor %+v, want key %s", got, mailKey)
	}
	// The model of the second run was told the first run's receipt.
	reqs := model.Requests()
	last := requestToolMessages(t, reqs[len(reqs)-1])
	if len(last) != 3 || !strings.Contains(last[1][1], "pay_001") || !strings.Contains(last[2][1], "sent to ap@acme.test") {
		t.Fatalf("the second run's model was told %q", last)
	}
}

// A tool that needs approval waits — the tool does not run — until the
// approve signal; then it runs once and the transcript says who approved.
func TestAgentApprovalThenToolRuns(t *testing.T) {
	ctx := testCtx(t)
	s := newScene(t, fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-7","amount":10}`),
		fakellm.Say("Paid INV-7."),
	}))
	c := s.env.Client
	run := s.start(t, ctx, "approve-INV-7", Task{InvoiceID: "INV-7", Approve: true})
	waitEvent(t, ctx, c, "approve-INV-7", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	if got := toolCalls(t, ctx, c, "approve-INV-7", "")["SendPayment"]; len(got) != 1 || got[0].State != api.CallAwaitingApproval {
		t.Fatalf("before approval: %+v", got)
	}
	if n, _, _, _, _ := s.prov.snapshot(); n != 0 {
		t.Fatal("the payment ran before its approval")
	}
	must(t, c.SignalWorkflow(ctx, "approve-INV-7", "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ada"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if n, _, _, _, _ := s.prov.snapshot(); n != 1 || res.Final != "Paid INV-7." {
		t.Fatalf("payment ran %d times, result %+v", n, res)
	}
	got := toolCalls(t, ctx, c, "approve-INV-7", "")["SendPayment"]
	if len(got) != 1 || got[0].State != api.CallCompleted || got[0].ApprovedBy != "ada" || got[0].IdempotencyKey == "" {
		t.Fatalf("after approval: %+v", got)
	}
}

// A rejected call never runs; the model is told who rejected it and why,
// and the run goes on to a final answer.
func TestAgentRejectionIsToldToTheModel(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-8","amount":10}`),
		fakellm.Say("Not paid."),
	}).KeepRequests()
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "reject-INV-8", Task{InvoiceID: "INV-8", Approve: true})
	waitEvent(t, ctx, c, "reject-INV-8", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	must(t, c.SignalWorkflow(ctx, "reject-INV-8", "", agent.ApprovalSignal, agent.Approval{Approved: false, By: "bob", Reason: "duplicate invoice"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if n, _, _, _, _ := s.prov.snapshot(); n != 0 || res.Final != "Not paid." {
		t.Fatalf("payment ran %d times, result %+v", n, res)
	}
	reqs := model.Requests()
	told := requestToolMessages(t, reqs[len(reqs)-1])
	if len(told) != 1 || told[0][1] != "rejected by bob: duplicate invoice. The tool did not run." {
		t.Fatalf("the model was told %q", told)
	}
	got := toolCalls(t, ctx, c, "reject-INV-8", "")["SendPayment"]
	if len(got) != 1 || got[0].State != api.CallRejected || got[0].ApprovedBy != "bob" || got[0].ScheduledEventID != 0 {
		t.Fatalf("rejected call in the transcript: %+v", got)
	}
}

// Paying one invoice twice on purpose in a run makes two payments under two
// keys (occurrence 1 and 2). A new run of the same workflow id whose agent
// takes an extra, different step first lands on the same two keys in the
// same order: both payments are deduplicated, while its new action (an
// e-mail the first run never sent) runs (docs/effects.md, "The key").
func TestReusedIDDifferentStepsFirstSameKeys(t *testing.T) {
	ctx := testCtx(t)
	pay := func(memo string) fakellm.Reply {
		return fakellm.CallTool("SendPayment", `{"invoice_id":"INV-9","amount":100,"memo":"`+memo+`"}`)
	}
	first := fakellm.Script{pay("deposit"), pay("balance"), fakellm.Say("Paid twice.")}
	second := fakellm.Script{
		fakellm.CallTool("ReadInvoice", `{"id":"INV-9"}`),
		pay("the deposit, again"), pay("the balance, again"),
		fakellm.CallTool("EmailVendor", `{"invoice_id":"INV-9","to":"ap@acme.test","body":"paid"}`),
		fakellm.Say("Done."),
	}
	var mu sync.Mutex
	script := first
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		mu.Lock()
		defer mu.Unlock()
		return script[min(r.Turn, len(script)-1)]
	})
	s := newScene(t, model)
	c := s.env.Client
	run1 := s.start(t, ctx, "twice-INV-9", Task{InvoiceID: "INV-9"})
	must(t, run1.Get(ctx, nil))
	payCalls, charges, _, _, keys := s.prov.snapshot()
	if payCalls != 2 || charges != 2 || len(keys["SendPayment"]) != 2 || keys["SendPayment"][0] == keys["SendPayment"][1] {
		t.Fatalf("first run: %d payment calls, %d charges, keys %v", payCalls, charges, keys["SendPayment"])
	}
	k1, k2 := keys["SendPayment"][0], keys["SendPayment"][1]

	mu.Lock()
	script = second
	mu.Unlock()
	run2 := s.start(t, ctx, "twice-INV-9", Task{InvoiceID: "INV-9"})
	var res agent.Result
	must(t, run2.Get(ctx, &res))
	payCalls, charges, _, mailCalls, _ := s.prov.snapshot()
	if res.Final != "Done." || payCalls != 2 || charges != 2 || mailCalls != 1 {
		t.Fatalf("second run: result %+v, %d payment calls, %d charges, %d mails", res, payCalls, charges, mailCalls)
	}
	evs, err := c.GetHistory(ctx, "twice-INV-9", run2.RunID())
	must(t, err)
	var dedup []string
	for _, ev := range evs {
		if d, ok := ev.Attrs.(*history.ActivityDeduplicated); ok {
			dedup = append(dedup, d.IdempotencyKey)
		}
	}
	if len(dedup) != 2 || dedup[0] != k1 || dedup[1] != k2 {
		t.Fatalf("second run deduplicated %v, want [%s %s]", dedup, k1, k2)
	}
}

// Two payments of one invoice asked for in one turn run concurrently and
// get occurrences 1 and 2 in call order; a new run of the same workflow id
// asking for them again is deduplicated on both (docs/effects.md: keys
// are assigned in schedule order).
func TestConcurrentSameKeyPaymentsDeduplicatedOnReuse(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{ID: "a", Name: "SendPayment", Arguments: `{"invoice_id":"INV-2X","amount":1,"memo":"deposit"}`},
			fakellm.ToolCall{ID: "b", Name: "SendPayment", Arguments: `{"invoice_id":"INV-2X","amount":1,"memo":"balance"}`},
		),
		fakellm.Say("Paid twice."),
	})
	s := newScene(t, model)
	c := s.env.Client
	run1 := s.start(t, ctx, "conc-INV-2X", Task{})
	must(t, run1.Get(ctx, nil))
	byID := func(runID string) map[string]string {
		out := map[string]string{}
		for _, tc := range toolCalls(t, ctx, c, "conc-INV-2X", runID)["SendPayment"] {
			out[tc.ID] = tc.IdempotencyKey
		}
		return out
	}
	k1 := byID(run1.RunID())
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 2 || k1["a"] == "" || k1["b"] == "" || k1["a"] == k1["b"] {
		t.Fatalf("first run: %d payments, keys %v", pay, k1)
	}
	run2 := s.start(t, ctx, "conc-INV-2X", Task{})
	must(t, run2.Get(ctx, nil))
	k2 := byID(run2.RunID())
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 2 || k2["a"] != k1["a"] || k2["b"] != k1["b"] {
		t.Fatalf("second run: %d payments, keys %v, first run's %v", pay, k2, k1)
	}
}
