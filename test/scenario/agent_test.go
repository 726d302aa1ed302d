package scenario_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
)

// waitPausedForBudget waits until the run's held model call shows in
// history, then checks describe reports the run paused with kind "budget".
func waitPausedForBudget(t *testing.T, s *scene, id string) *api.DescribeWorkflowResponse {
	t.Helper()
	ctx := testCtx(t)
	waitEvent(t, ctx, s.env.Client, id, "", "BudgetExceeded", func(ev history.Event) bool {
		_, ok := ev.Attrs.(*history.BudgetExceeded)
		return ok
	})
	d, err := s.env.Client.DescribeWorkflow(ctx, id, "")
	must(t, err)
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseBudget || d.Info.Pause.Reason == "" {
		t.Fatalf("describe after the budget was crossed: status %v, pause %+v", d.Info.Status, d.Info.Pause)
	}
	if d.Budget == nil || d.Budget.Exceeded == "" || len(d.Budget.Held) != 1 {
		t.Fatalf("budget status %+v", d.Budget)
	}
	return d
}

func readLoop(final string) fakellm.Script {
	return fakellm.Script{
		fakellm.CallTool("ReadInvoice", `{"id":"INV-1"}`),
		fakellm.CallTool("ReadInvoice", `{"id":"INV-2"}`),
		fakellm.Say(final),
	}
}

// A turn budget crossed pauses the run (kind "budget", visible through
// describe) with the next model call held and not sent; raising the budget
// lets the held call go on to the final answer.
func TestTurnBudgetPausesAndRaiseResumes(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(readLoop("Both read."))
	s := newScene(t, model)
	run := s.start(t, ctx, "turns", Task{Budget: history.Budget{MaxTurns: 2}})
	waitPausedForBudget(t, s, "turns")
	if model.Calls() != 2 {
		t.Fatalf("the model was called %d times with a budget of 2 turns", model.Calls())
	}
	_, err := s.env.Client.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "turns",
		Budget: history.Budget{MaxTurns: 5}, Identity: "ada", Reason: "worth finishing"})
	must(t, err)
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Both read." || res.Turns != 3 || model.Calls() != 3 {
		t.Fatalf("result %+v after %d model calls", res, model.Calls())
	}
}

// A token budget crossed pauses the run; stopping it ends the run with a
// clear outcome: the agent's ErrBudgetExceeded, and the model is not called
// again.
func TestTokenBudgetStopEndsTheRun(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		rep := readLoop("never said")[min(r.Turn, 2)]
		rep.PromptTokens, rep.CompletionTokens = 600, 10
		return rep
	})
	s := newScene(t, model)
	run := s.start(t, ctx, "tokens", Task{Budget: history.Budget{MaxTokens: 1000}})
	d := waitPausedForBudget(t, s, "tokens")
	if d.Budget.Used.PromptTokens+d.Budget.Used.CompletionTokens < 1000 || model.Calls() != 2 {
		t.Fatalf("paused having used %+v, %d model calls", d.Budget.Used, model.Calls())
	}
	_, err := s.env.Client.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "tokens", Stop: true, Identity: "ada", Reason: "enough"})
	must(t, err)
	err = run.Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), agent.ErrBudgetExceeded.Error()) {
		t.Fatalf("the stopped run ended with %v, want %q", err, agent.ErrBudgetExceeded)
	}
	var appErr *sdk.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("the run's error %T is not an ApplicationError", err)
	}
	d, err = s.env.Client.DescribeWorkflow(ctx, "tokens", "")
	must(t, err)
	if d.Info.Status != api.StatusFailed || d.Info.Pause != nil || model.Calls() != 2 {
		t.Fatalf("after the stop: status %v, pause %+v, %d model calls", d.Info.Status, d.Info.Pause, model.Calls())
	}
}

// Two tool calls in one model turn run at the same time (ReadInvoice
// cannot finish before CheckVendor started), and their results are
// appended in the order the model asked for them, whatever order they
// finished in — in the transcript, in the next request, and on replay.
func TestToolCallsOfOneTurnRunConcurrentlyInCallOrder(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{ID: "call_a", Name: "ReadInvoice", Arguments: `{"id":"INV-3"}`},
			fakellm.ToolCall{ID: "call_b", Name: "CheckVendor", Arguments: `{"id":"INV-3"}`},
		),
		fakellm.Say("Checked."),
	}).KeepRequests()
	s := newScene(t, model)
	s.prov.gate = make(chan struct{})
	run := s.start(t, ctx, "concurrent", Task{})
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Checked." {
		t.Fatalf("result %+v", res)
	}
	reqs := model.Requests()
	told := requestToolMessages(t, reqs[len(reqs)-1])
	if len(told) != 2 || told[0][0] != "call_a" || !strings.Contains(told[0][1], `"amount":4200`) ||
		told[1][0] != "call_b" || told[1][1] != "vendor ok for INV-3" {
		t.Fatalf("the model was told %q", told)
	}
	tm := toolMessages(t, ctx, s.env.Client, "concurrent", "")
	if len(tm) != 2 || tm[0][0] != "ReadInvoice" || tm[1][0] != "CheckVendor" {
		t.Fatalf("transcript tool messages %q", tm)
	}
	// Both were scheduled by the same workflow task, before either ended.
	evs, err := s.env.Client.GetHistory(ctx, "concurrent", "")
	must(t, err)
	var order []string
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityScheduled:
			if a.ActivityType != "llm.Chat" {
				order = append(order, "scheduled "+a.ActivityType)
			}
		case *history.ActivityCompleted:
			order = append(order, "completed")
		}
	}
	if len(order) < 3 || order[1] != "scheduled ReadInvoice" || order[2] != "scheduled CheckVendor" {
		t.Fatalf("history order %q", order)
	}
}

// A model that names a tool that does not exist, or passes arguments that
// do not fit, is told so as that call's result; nothing runs, nothing
// panics, the run goes on to a final answer.
func TestConfusedModelIsToldAndNothingRuns(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{ID: "c1", Name: "Refund", Arguments: `{"invoice_id":"INV-4"}`},
			fakellm.ToolCall{ID: "c2", Name: "SendPayment", Arguments: `{"invoice_id":"INV-4","amount":"a lot"}`},
			fakellm.ToolCall{ID: "c3", Name: "SendPayment", Arguments: `{"invoice_id":"INV-4","amount":1,"currency":"EUR"}`},
			fakellm.ToolCall{ID: "c4", Name: "SendPayment", Arguments: `{"invoice_id":`},
			fakellm.ToolCall{ID: "c5", Name: "EmailVendor", Arguments: `[1,2]`},
			fakellm.ToolCall{ID: "c6", Name: "", Arguments: `{}`},
		),
		fakellm.Say("Sorry."),
	}).KeepRequests()
	s := newScene(t, model)
	run := s.start(t, ctx, "confused", Task{Approve: true})
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Sorry." || res.Turns != 2 {
		t.Fatalf("result %+v", res)
	}
	if pay, _, _, mail, _ := s.prov.snapshot(); pay != 0 || mail != 0 {
		t.Fatalf("tools ran: SendPayment %d, EmailVendor %d", pay, mail)
	}
	reqs := model.Requests()
	told := requestToolMessages(t, reqs[len(reqs)-1])
	want := []string{`no tool "Refund"`, "arguments of SendPayment are invalid", "arguments of SendPayment are invalid",
		"arguments of SendPayment are invalid", "arguments of EmailVendor are invalid", `no tool ""`}
	if len(told) != len(want) {
		t.Fatalf("the model was told %q", told)
	}
	for i, w := range want {
		if !strings.HasPrefix(told[i][1], "error: ") || !strings.Contains(told[i][1], w) {
			t.Errorf("call %d: told %q, want it to say %q", i+1, told[i][1], w)
		}
	}
	if !strings.Contains(told[2][1], "currency") {
		t.Errorf("an unknown field is not named: %q", told[2][1])
	}
	calls := toolCalls(t, ctx, s.env.Client, "confused", "")
	for name, cs := range calls {
		for _, c := range cs {
			if c.State != api.CallFailed || c.ScheduledEventID != 0 {
				t.Errorf("%s call %s in the transcript: %+v", name, c.ID, c)
			}
		}
	}
}

// A tool failing for good (a non-retryable error) is reported to the model
// as "error: …" and the run goes on.
func TestToolFailureIsToldToTheModel(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("ReadInvoice", `{"id":"INV-404"}`),
		fakellm.Say("No such invoice."),
	}).KeepRequests()
	s := newScene(t, model)
	run := s.start(t, ctx, "not-found", Task{})
	var res agent.Result
	must(t, run.Get(ctx, &res))
	reqs := model.Requests()
	told := requestToolMessages(t, reqs[len(reqs)-1])
	if res.Final != "No such invoice." || len(told) != 1 || told[0][1] != "error: invoice INV-404 not found" {
		t.Fatalf("result %+v, the model was told %q", res, told)
	}
	if c := toolCalls(t, ctx, s.env.Client, "not-found", "")["ReadInvoice"]; len(c) != 1 || c[0].State != api.CallFailed {
		t.Fatalf("the failed call in the transcript: %+v", c)
	}
}

// Two calls awaiting approval in one turn are decided separately by their
// call ids, the later one first: the approved one runs, the rejected one
// does not, and each decision lands on its own call.
func TestTwoApprovalsDecidedByCallID(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{ID: "pay_a", Name: "SendPayment", Arguments: `{"invoice_id":"INV-A","amount":1}`},
			fakellm.ToolCall{ID: "pay_b", Name: "SendPayment", Arguments: `{"invoice_id":"INV-B","amount":2}`},
		),
		fakellm.Say("One paid."),
	}).KeepRequests()
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "two-approvals", Task{Approve: true})
	n := 0
	waitEvent(t, ctx, c, "two-approvals", "", "two approval requests", func(ev history.Event) bool {
		if isMarker(history.MarkerApprovalRequested)(ev) {
			n++
		}
		return n == 2
	})
	must(t, c.SignalWorkflow(ctx, "two-approvals", "", agent.ApprovalSignal, agent.Approval{CallID: "pay_b", Approved: true, By: "ada"}))
	must(t, c.SignalWorkflow(ctx, "two-approvals", "", agent.ApprovalSignal, agent.Approval{CallID: "pay_a", Approved: false, By: "bob", Reason: "not due"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	pay, _, _, _, keys := s.prov.snapshot()
	if pay != 1 || len(keys["SendPayment"]) != 1 {
		t.Fatalf("SendPayment ran %d times", pay)
	}
	reqs := model.Requests()
	told := requestToolMessages(t, reqs[len(reqs)-1])
	if len(told) != 2 || told[0][0] != "pay_a" || told[0][1] != "rejected by bob: not due. The tool did not run." ||
		told[1][0] != "pay_b" || told[1][1] != "pay_001" {
		t.Fatalf("the model was told %q", told)
	}
	byID := map[string]api.ToolCallInfo{}
	for _, tc := range toolCalls(t, ctx, c, "two-approvals", "")["SendPayment"] {
		byID[tc.ID] = tc
	}
	if a, b := byID["pay_a"], byID["pay_b"]; a.State != api.CallRejected || a.ApprovedBy != "bob" ||
		b.State != api.CallCompleted || b.ApprovedBy != "ada" || b.IdempotencyKey != keys["SendPayment"][0] {
		t.Fatalf("transcript calls %+v", byID)
	}
}

// Usage is kept per run and per workflow id across its runs
// (docs/agents.md): two runs of one id each report their own tokens, and
// the workflow's usage is their sum.
func TestUsagePerRunAndPerWorkflowID(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		rep := fakellm.Say("Done.")
		rep.PromptTokens, rep.CompletionTokens = 100, 7
		return rep
	})
	s := newScene(t, model)
	var runs []string
	for i := 0; i < 2; i++ {
		run := s.start(t, ctx, "usage", Task{})
		must(t, run.Get(ctx, nil))
		runs = append(runs, run.RunID())
	}
	for _, id := range runs {
		d, err := s.env.Client.DescribeWorkflow(ctx, "usage", id)
		must(t, err)
		if d.Usage == nil || d.Usage.Total.PromptTokens != 100 || d.Usage.Total.CompletionTokens != 7 || d.Usage.Calls != 1 {
			t.Fatalf("run %s usage %+v", id, d.Usage)
		}
		if d.WorkflowUsage == nil || d.WorkflowUsage.Total.PromptTokens != 200 || d.WorkflowUsage.Total.CompletionTokens != 14 {
			t.Fatalf("run %s: workflow usage %+v", id, d.WorkflowUsage)
		}
	}
}
