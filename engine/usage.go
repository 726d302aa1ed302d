package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// UsageEntry is the token and cost ledger of one workflow id
// (history.SpaceUsage): what every run of the id reported. Like the
// effects ledger it outlives runs.
type UsageEntry struct {
	Total   history.Usage
	ByModel []history.Usage `msgpack:",omitempty"`
	// Calls counts the metered activities scheduled by all runs.
	Calls int64 `msgpack:",omitempty"`
}

func usageKey(workflowID string) []byte { return history.Key().Str(workflowID).Bytes() }

// workflowUsage reads the workflow id's usage ledger (nil when empty).
func (e *Engine) workflowUsage(ctx context.Context, workflowID string) (*UsageEntry, error) {
	b, err := e.store.Get(ctx, history.SpaceUsage, usageKey(workflowID))
	if errors.Is(err, history.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr(err)
	}
	var u UsageEntry
	if err := api.UnmarshalMsgpack(b, &u); err != nil {
		return nil, fmt.Errorf("%w: %w: usage entry of %q: %w", api.ErrInternal, history.ErrCorrupt, workflowID, err)
	}
	return &u, nil
}

// usage adds what a run's inputs reported (and the metered activities it
// scheduled) to its workflow id's ledger, in the same transaction.
func (x *txn) usage(ctx context.Context, tr *txnRun, used []history.Usage) error {
	calls := tr.st.Turns
	if tr.before != nil {
		calls -= tr.before.Turns
	}
	if len(used) == 0 && calls <= 0 {
		return nil
	}
	u, err := x.e.workflowUsage(ctx, tr.st.WorkflowID)
	if err != nil {
		return err
	}
	if u == nil {
		u = &UsageEntry{}
	}
	u.Calls += max(calls, 0)
	for _, v := range used {
		u.Total = addTotal(u.Total, v)
		i := slices.IndexFunc(u.ByModel, func(m history.Usage) bool { return m.Model == v.Model })
		if i < 0 {
			u.ByModel = append(u.ByModel, history.Usage{Model: v.Model})
			i = len(u.ByModel) - 1
		}
		u.ByModel[i] = u.ByModel[i].Add(v)
	}
	b, err := api.MarshalMsgpack(u)
	if err != nil {
		return fmt.Errorf("%w: encode usage entry: %w", api.ErrInternal, err)
	}
	x.put(history.SpaceUsage, usageKey(tr.st.WorkflowID), b)
	return nil
}

// UpdateBudget implements api.Service.
func (e *Engine) UpdateBudget(ctx context.Context, req *api.UpdateBudgetRequest) (*api.UpdateBudgetResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	var status *api.BudgetStatus
	err := e.transact(ctx, []string{req.WorkflowID}, func(x *txn) error {
		entry := e.openRun(req.WorkflowID)
		if entry == nil || (req.RunID != "" && entry.ref.RunID != req.RunID) {
			if _, _, err := e.loadState(ctx, req.WorkflowID, req.RunID); err != nil {
				return err
			}
			return api.Errorf(api.ErrWorkflowClosed, "workflow %q has no open run to budget", req.WorkflowID)
		}
		tr := x.edit(entry)
		out, err := e.m.UpdateBudget(tr.st, req, x.now)
		if err != nil {
			return err
		}
		status = tr.st.BudgetStatus(e.opts.Pricing)
		return x.apply(ctx, tr, out)
	})
	if err != nil {
		return nil, err
	}
	return &api.UpdateBudgetResponse{Budget: *status}, nil
}

// addTotal adds u to a total over several models (which names none), as
// machine.RunState.Usage sums a run's.
func addTotal(total, u history.Usage) history.Usage {
	total = total.Add(u)
	total.Model = ""
	return total
}
