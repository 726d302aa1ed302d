package machine

import (
	"fmt"
	"slices"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Usage and budgets. Activity attempts report what they consumed (a model
// call's tokens) with their completion or failure; the machine prices it
// from Machine.Pricing, adds it to the activity, the run and (through
// Output.Usage, in the same transaction) the workflow id's ledger, and
// records each activity's sum, failed attempts included, in its closing
// event. A metered activity (a model call) about to become ready while
// the run's budget is exhausted is held instead (BudgetExceeded, status
// paused) until UpdateBudget raises the budget or stops the run.

// Price is what a model's tokens cost, in US dollars per million tokens.
type Price struct {
	Input       float64 `json:"input"`
	CachedInput float64 `json:"cached_input"`
	Output      float64 `json:"output"`
}

// Pricing maps a model name to its price.
type Pricing map[string]Price

// Cost returns the price of u's tokens and whether the model has a price.
// Cached prompt tokens cost CachedInput (Input when that is zero).
func (p Pricing) Cost(u history.Usage) (float64, bool) {
	pr, ok := p[u.Model]
	if !ok {
		return 0, false
	}
	cachedRate := pr.CachedInput
	if cachedRate == 0 {
		cachedRate = pr.Input
	}
	fresh := max(u.PromptTokens-u.CachedTokens, 0)
	return (float64(fresh)*pr.Input + float64(u.CachedTokens)*cachedRate + float64(u.CompletionTokens)*pr.Output) / 1e6, true
}

// addUsage records what the current attempt of a reported. Its Attempts
// follow history's numbering of the attempts (ActivityStarted.Attempt),
// not the count of reports: the report of attempt 4 after three attempts
// that reported nothing counts 4, so that a.Usage.Attempts is the number
// of the last attempt that reported.
func (t *transition) addUsage(a *ActivityInfo, u history.Usage) {
	if u.Tokens() == 0 && u.CachedTokens == 0 && u.CostUSD == 0 {
		return
	}
	u.Attempts = max(a.Attempt-a.Usage.Attempts, 0)
	if cost, ok := t.m.Pricing.Cost(u); ok {
		u.CostUSD = cost
	}
	st := t.st
	a.Usage = a.Usage.Add(u)
	st.Usage = addTotal(st.Usage, u)
	i := slices.IndexFunc(st.UsageByModel, func(m history.Usage) bool { return m.Model == u.Model })
	if i < 0 {
		st.UsageByModel = append(st.UsageByModel, history.Usage{Model: u.Model})
		i = len(st.UsageByModel) - 1
	}
	st.UsageByModel[i] = st.UsageByModel[i].Add(u)
	t.out.Usage = append(t.out.Usage, u)
}

// addTotal adds u to a total over several models (which names none).
func addTotal(total, u history.Usage) history.Usage {
	total = total.Add(u)
	total.Model = ""
	return total
}

// budgetExceeded says why a metered activity of turn `turn` may not start
// now ("" when it may), with p the engine's prices: a cost budget that
// cannot be enforced (a model used without a price, or no prices at all)
// holds the call as an exhausted one does.
func (st *RunState) budgetExceeded(turn int64, p Pricing) string {
	b := st.Budget
	switch {
	case b.MaxTurns > 0 && turn > b.MaxTurns:
		return fmt.Sprintf("turn budget exhausted: model call %d of at most %d", turn, b.MaxTurns)
	case b.MaxTokens > 0 && st.Usage.Tokens() >= b.MaxTokens:
		return fmt.Sprintf("token budget exhausted: %d tokens used of %d", st.Usage.Tokens(), b.MaxTokens)
	case b.MaxCostUSD > 0 && st.Usage.CostUSD >= b.MaxCostUSD:
		return fmt.Sprintf("cost budget exhausted: $%.4f spent of $%.4f", st.Usage.CostUSD, b.MaxCostUSD)
	case b.MaxCostUSD > 0:
		return st.unenforceableCost(p)
	}
	return ""
}

// unenforceableCost says why the run's cost budget cannot be enforced
// ("" when it can): the engine has no prices, or a model the run used
// has none, so its tokens count as $0.
func (st *RunState) unenforceableCost(p Pricing) string {
	const fix = "add its price (cairn server --pricing) and update the budget, or drop the cost limit (--max-cost 0)"
	if len(p) == 0 {
		return "cost budget cannot be enforced: the engine has no prices, so every model call costs $0 here; " + fix
	}
	for _, u := range st.UsageByModel {
		if _, ok := p[u.Model]; !ok && u.Tokens() > 0 {
			return fmt.Sprintf("cost budget cannot be enforced: model %q has no price, so its %d tokens cost $0 here; %s", u.Model, u.Tokens(), fix)
		}
	}
	return ""
}

// checkBudget refuses a budget that is negative, or whose cost limit the
// engine cannot enforce because it has no prices at all (a model without
// a price shows only once a call reports it: then the next call is held,
// see budgetExceeded).
func (m *Machine) checkBudget(b history.Budget) error {
	switch {
	case b.MaxTokens < 0 || b.MaxTurns < 0 || b.MaxCostUSD < 0:
		return api.Errorf(api.ErrInvalidArgument, "a budget must not be negative")
	case b.MaxCostUSD > 0 && len(m.Pricing) == 0:
		return api.Errorf(api.ErrInvalidArgument, "a cost budget of $%.4f cannot be enforced: the engine has no prices (cairn server --pricing FILE, "+
			"engine.Options.Pricing), so every model call would cost $0; give it prices, or bound the run by tokens or turns", b.MaxCostUSD)
	}
	return nil
}

// holdIfOverBudget holds a metered activity that is about to become ready
// while the budget is exhausted; it reports whether it did.
func (t *transition) holdIfOverBudget(a *ActivityInfo) bool {
	if !a.Metered || a.Reconciling {
		return false
	}
	why := t.st.budgetExceeded(a.Turn, t.m.Pricing)
	if why == "" {
		return false
	}
	a.State = api.ActivityStateHeld
	a.HeldReason = why
	a.HeldSince = t.now
	t.add(&history.BudgetExceeded{ScheduledEventID: a.ScheduledEventID, Reason: why, Used: t.st.Usage, Turns: t.st.Turns})
	return true
}

// Held returns the metered activities the budget holds, in schedule order.
func (st *RunState) Held() []*ActivityInfo {
	var out []*ActivityInfo
	for _, id := range sortedKeys(st.Activities) {
		if a := st.Activities[id]; a.State == api.ActivityStateHeld {
			out = append(out, a)
		}
	}
	return out
}

// setBudget is the CommandSetBudget of workflow code.
func (t *transition) setBudget(c *api.SetBudgetCommand, wtc int64) {
	t.st.Budget = c.Budget
	t.add(&history.BudgetUpdated{Budget: c.Budget, By: "workflow", WorkflowTaskCompletedEventID: wtc})
	t.releaseHeld()
}

// releaseHeld lets held activities go on when the budget allows them.
func (t *transition) releaseHeld() {
	for _, a := range t.st.Held() {
		if why := t.st.budgetExceeded(a.Turn, t.m.Pricing); why != "" {
			a.HeldReason = why
			continue
		}
		a.HeldReason, a.HeldSince = "", time.Time{}
		t.readyActivity(a)
	}
}

// UpdateBudget applies a person's budget change: a new budget (the held
// activities it allows go on) or a stop (they fail, non-retryable; refused
// with ErrInvalidArgument when none is held).
func (m *Machine) UpdateBudget(st *RunState, req *api.UpdateBudgetRequest, now time.Time) (Output, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, err
	}
	if err := m.checkBudget(req.Budget); err != nil && !req.Stop {
		return Output{}, err
	}
	held := st.Held()
	if req.Stop && len(held) == 0 {
		// A stop fails the held calls; with none it would be a silent no-op
		// while the agent goes on spending.
		return Output{}, api.Errorf(api.ErrInvalidArgument,
			"stop: no model call is held on this run's budget (it is not paused on its budget); cancel the run to end it, or lower its budget")
	}
	if err := m.checkGrowth(st, int64(1+2*len(held))); err != nil {
		return Output{}, err
	}
	t := m.begin(st, now)
	if !req.Stop {
		st.Budget = req.Budget
	}
	t.add(&history.BudgetUpdated{Budget: st.Budget, Stop: req.Stop, By: req.Identity, Reason: req.Reason})
	if !req.Stop {
		t.releaseHeld()
		return t.out, nil
	}
	for _, a := range held {
		reason := a.HeldReason
		if req.Reason != "" {
			reason += "; stopped: " + req.Reason
		}
		t.failActivity(a, &history.Failure{Type: "BudgetExceeded", Message: reason, NonRetryable: true}, "")
	}
	return t.out, nil
}

// BudgetStatus reports the run's budget and where it stands, with p the
// engine's prices.
func (st *RunState) BudgetStatus(p Pricing) *api.BudgetStatus {
	b := &api.BudgetStatus{Budget: st.Budget, Used: st.Usage, Turns: st.Turns}
	for _, a := range st.Held() {
		b.Held = append(b.Held, a.ScheduledEventID)
		if b.Exceeded == "" {
			b.Exceeded = a.HeldReason
		}
	}
	if b.Exceeded == "" {
		b.Exceeded = st.budgetExceeded(st.Turns+1, p)
	}
	return b
}

// UsageSummary reports the run's usage.
func (st *RunState) UsageSummary(p Pricing) *api.UsageSummary {
	return p.Summarize(st.Usage, st.UsageByModel, st.Turns)
}

// Summarize reports usage — a total, its parts by model and the metered
// calls counted — with the models p has no price for, for a run or for
// every run of a workflow id.
func (p Pricing) Summarize(total history.Usage, byModel []history.Usage, calls int64) *api.UsageSummary {
	s := &api.UsageSummary{Total: total, ByModel: slices.Clone(byModel), Calls: calls}
	for _, u := range byModel {
		if _, ok := p.Cost(u); !ok && u.Model != "" {
			s.Unpriced = append(s.Unpriced, u.Model)
		}
	}
	slices.SortFunc(s.ByModel, func(a, b history.Usage) int { return compareStrings(a.Model, b.Model) })
	slices.Sort(s.Unpriced)
	return s
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
