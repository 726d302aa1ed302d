package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// modelCall schedules a metered activity (a model call) on queue q.
func modelCall(id string) api.Command {
	c := schedule(id, "Chat", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute})
	c.ScheduleActivity.Metered = true
	return c
}

// wantHeld checks that id is paused on its budget, the reason saying want.
func (h *harness) wantHeld(id, want string) {
	h.t.Helper()
	d := h.describe(id)
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseBudget ||
		!strings.Contains(d.Info.Pause.Reason, want) {
		h.t.Fatalf("%s: status %s, pause %+v; want paused on its budget saying %q", id, d.Info.Status, d.Info.Pause, want)
	}
	if !strings.Contains(d.Budget.Exceeded, want) {
		h.t.Fatalf("%s: budget %+v does not say %q", id, d.Budget, want)
	}
	h.noActivity("q")
}

// TestCostBudgetWithoutPricesIsRefusedAtStart: an engine with no prices
// cannot enforce a cost budget: a start, and a person's budget update,
// that sets one are refused, saying so.
func TestCostBudgetWithoutPricesIsRefusedAtStart(t *testing.T) {
	h := newHarness(t)
	_, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: "a", WorkflowType: "Agent", TaskQueue: "q",
		Budget: history.Budget{MaxCostUSD: 1}})
	if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot be enforced: the engine has no prices (cairn server --pricing") {
		t.Fatalf("start with a cost budget on an engine without prices: %v, want it refused saying why", err)
	}
	h.startWith(api.StartWorkflowRequest{WorkflowID: "b", Budget: history.Budget{MaxTokens: 1000}}) // tokens need no price
	_, err = h.eng.UpdateBudget(h.ctx(), &api.UpdateBudgetRequest{WorkflowID: "b", Budget: history.Budget{MaxCostUSD: 2}, Identity: "ops"})
	if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "cannot be enforced") {
		t.Fatalf("a cost budget set by a person on an engine without prices: %v, want it refused", err)
	}
}

// TestCostBudgetOnAnUnpricedModelHolds: a run with a cost budget whose
// model call reports a model the engine has no price for cannot have its
// cost counted: the next model call is held and the run paused, saying
// so, instead of running on at $0 a call. Dropping the cost limit lets it
// go on.
func TestCostBudgetOnAnUnpricedModelHolds(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Pricing = Pricing{"priced": {Input: 1, Output: 2}} })
	h.startWith(api.StartWorkflowRequest{WorkflowID: "agent", Budget: history.Budget{MaxCostUSD: 0.5}})
	h.complete(h.pollWFT("q"), modelCall("1"))
	task := h.pollActivity("q")
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"hi"`),
		Usage: history.Usage{Model: "unpriced", PromptTokens: 900_000, CompletionTokens: 100_000}}); err != nil {
		t.Fatal(err)
	}
	h.complete(h.pollWFT("q"), modelCall("2"))
	h.wantHeld("agent", `cost budget cannot be enforced: model "unpriced" has no price, so its 1000000 tokens cost $0 here`)
	if n := count(h.history("agent"), history.TypeBudgetExceeded); n != 1 {
		t.Fatalf("%d BudgetExceeded events, want 1", n)
	}
	if _, err := h.eng.UpdateBudget(h.ctx(), &api.UpdateBudgetRequest{WorkflowID: "agent", Budget: history.Budget{}, Identity: "ops",
		Reason: "no cost limit for this one"}); err != nil {
		t.Fatal(err)
	}
	h.pollActivity("q") // the held call goes on
}

// TestCostBudgetSetByWorkflowWithoutPricesHolds: workflow code that sets
// a cost budget on an engine with no prices is not refused (a refused
// workflow task would only fail again): its first model call is held,
// saying why.
func TestCostBudgetSetByWorkflowWithoutPricesHolds(t *testing.T) {
	h := newHarness(t)
	h.startWith(api.StartWorkflowRequest{WorkflowID: "agent"})
	h.complete(h.pollWFT("q"), api.Command{Type: api.CommandSetBudget, SetBudget: &api.SetBudgetCommand{Budget: history.Budget{MaxCostUSD: 1}}},
		modelCall("1"))
	h.wantHeld("agent", "cost budget cannot be enforced: the engine has no prices")
}
