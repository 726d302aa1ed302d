package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// StartWorkflow implements api.Service.
func (e *Engine) StartWorkflow(ctx context.Context, req *api.StartWorkflowRequest) (*api.StartWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := e.m.ValidateStart(req); err != nil {
		return nil, err
	}
	var resp *api.StartWorkflowResponse
	err := e.transact(ctx, []string{req.WorkflowID}, func(x *txn) error {
		var err error
		resp, err = x.start(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// start starts a run unless the id's open run or reuse policy says no.
func (x *txn) start(ctx context.Context, req *api.StartWorkflowRequest) (*api.StartWorkflowResponse, error) {
	e := x.e
	if cur := e.openRun(req.WorkflowID); cur != nil {
		if req.ConflictPolicy == api.ConflictUseExisting || (req.RequestID != "" && req.RequestID == cur.state.RequestID) {
			return &api.StartWorkflowResponse{RunID: cur.ref.RunID}, nil
		}
		return nil, api.Errorf(api.ErrAlreadyStarted, "workflow %q has an open run %q", req.WorkflowID, cur.ref.RunID)
	}
	prev, _, err := e.loadState(ctx, req.WorkflowID, "")
	if err != nil && !errors.Is(err, api.ErrNotFound) {
		return nil, err
	}
	if prev != nil {
		if err := reuseAllowed(req.ReusePolicy, prev); err != nil {
			return nil, err
		}
	}
	st, out := e.m.Start(startParams(req, e.opts.NewRunID), x.now)
	tr := x.run(nil, nil, st)
	if err := x.apply(ctx, tr, out); err != nil {
		return nil, err
	}
	return &api.StartWorkflowResponse{RunID: st.RunID, Started: true}, nil
}

func reuseAllowed(p api.ReusePolicy, prev *machine.RunState) error {
	switch p {
	case api.RejectDuplicate:
		return api.Errorf(api.ErrAlreadyStarted, "workflow %q already ran (run %q, %s) and the reuse policy rejects duplicates",
			prev.WorkflowID, prev.RunID, prev.Status)
	case api.AllowDuplicateFailedOnly:
		if prev.Status == api.StatusCompleted {
			return api.Errorf(api.ErrAlreadyStarted, "workflow %q completed (run %q) and the reuse policy allows only failed runs to be retried",
				prev.WorkflowID, prev.RunID)
		}
	}
	return nil
}

// SignalWorkflow implements api.Service.
func (e *Engine) SignalWorkflow(ctx context.Context, req *api.SignalWorkflowRequest) (*api.SignalWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := firstErr(e.m.CheckID("signal name", req.SignalName, true), e.m.CheckPayload("signal", req.Input)); err != nil {
		return nil, err
	}
	err := e.onOpenRun(ctx, req.WorkflowID, req.RunID, false, func(x *txn, tr *txnRun) (machine.Output, error) {
		if tr.st.SignalSeen(req.RequestID) {
			return machine.Output{}, nil // delivered already: a signal sent again
		}
		out, err := e.m.Signal(tr.st, req.SignalName, req.Input, req.Identity, x.now)
		if err == nil {
			tr.st.NoteSignal(req.RequestID)
		}
		return out, err
	})
	if err != nil {
		return nil, err
	}
	return &api.SignalWorkflowResponse{}, nil
}

// onOpenRun applies fn to the named open run in one transaction. With
// mayClose, the run's parent is locked too (its close notifies the parent).
func (e *Engine) onOpenRun(ctx context.Context, workflowID, runID string, mayClose bool, fn func(x *txn, tr *txnRun) (machine.Output, error)) error {
	ids := []string{workflowID}
	if mayClose {
		if p := e.parentOf(workflowID); p != nil {
			ids = append(ids, p.WorkflowID)
		}
	}
	return e.transact(ctx, ids, func(x *txn) error {
		st, entry, err := e.loadState(ctx, workflowID, runID)
		if err != nil {
			return err
		}
		if entry == nil {
			return api.Errorf(api.ErrWorkflowClosed, "workflow %q run %q is %s", workflowID, st.RunID, st.Status)
		}
		if mayClose && entry.parent != nil && !x.held[entry.parent.WorkflowID] && !x.foreign[entry.parent.WorkflowID] {
			return fmt.Errorf("%w: parent of %q changed while locking", api.ErrUnavailable, workflowID)
		}
		tr := x.edit(entry)
		out, err := fn(x, tr)
		if err != nil {
			return err
		}
		return x.apply(ctx, tr, out)
	})
}

// SignalWithStartWorkflow implements api.Service.
func (e *Engine) SignalWithStartWorkflow(ctx context.Context, req *api.SignalWithStartRequest) (*api.StartWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	start := req.Start
	start.ConflictPolicy = api.ConflictUseExisting
	if err := firstErr(e.m.ValidateStart(&start), e.m.CheckID("signal name", req.SignalName, true),
		e.m.CheckPayload("signal", req.SignalInput)); err != nil {
		return nil, err
	}
	var resp *api.StartWorkflowResponse
	err := e.transact(ctx, []string{start.WorkflowID}, func(x *txn) error {
		var err error
		if resp, err = x.start(ctx, &start); err != nil {
			return err
		}
		tr := x.findOpen(start.WorkflowID)
		if tr == nil {
			tr = x.edit(e.openRun(start.WorkflowID))
		}
		out, err := e.m.Signal(tr.st, req.SignalName, req.SignalInput, start.Identity, x.now)
		if err != nil {
			return err
		}
		return x.apply(ctx, tr, out)
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// RequestCancelWorkflow implements api.Service.
func (e *Engine) RequestCancelWorkflow(ctx context.Context, req *api.CancelWorkflowRequest) (*api.CancelWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	err := e.onOpenRun(ctx, req.WorkflowID, req.RunID, false, func(x *txn, tr *txnRun) (machine.Output, error) {
		return e.m.RequestCancel(tr.st, req.Reason, req.Identity, x.now)
	})
	if err != nil {
		return nil, err
	}
	return &api.CancelWorkflowResponse{}, nil
}

// TerminateWorkflow implements api.Service.
func (e *Engine) TerminateWorkflow(ctx context.Context, req *api.TerminateWorkflowRequest) (*api.TerminateWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := e.m.CheckPayload("details", req.Details); err != nil {
		return nil, err
	}
	err := e.onOpenRun(ctx, req.WorkflowID, req.RunID, true, func(x *txn, tr *txnRun) (machine.Output, error) {
		return e.m.Terminate(tr.st, req.Reason, req.Details, req.Identity, x.now)
	})
	if err != nil {
		return nil, err
	}
	return &api.TerminateWorkflowResponse{}, nil
}

// ResolveActivity implements api.Service.
func (e *Engine) ResolveActivity(ctx context.Context, req *api.ResolveActivityRequest) (*api.ResolveActivityResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	err := e.onOpenRun(ctx, req.WorkflowID, req.RunID, false, func(x *txn, tr *txnRun) (machine.Output, error) {
		if out, ok, err := x.ledgerAnswers(ctx, tr, req); ok || err != nil {
			return out, err
		}
		return e.m.Resolve(tr.st, req, x.now)
	})
	if err != nil {
		return nil, err
	}
	return &api.ResolveActivityResponse{}, nil
}

// ledgerAnswers answers from the effects ledger an action a person is
// about to have performed (not-happened, perform) when the ledger has
// learned since the run paused on it that it completed: an earlier run's
// late success (the base of a reset, terminated with the attempt in
// flight), or, for a fork's held action, its base's. Performing it would
// do it a second time.
func (x *txn) ledgerAnswers(ctx context.Context, tr *txnRun, req *api.ResolveActivityRequest) (machine.Output, bool, error) {
	if req.Resolution != history.ResolvedNotHappened && req.Resolution != history.ResolvedPerform {
		return machine.Output{}, false, nil
	}
	st := tr.st
	a := machine.FindActivity(st, req.ScheduledEventID, req.ActivityID)
	if a == nil || a.State != api.ActivityStateUnknown || a.IdempotencyKey == "" || len(a.Attempts) > 0 {
		return machine.Output{}, false, nil // its own attempt's outcome: the person decides
	}
	le, err := x.e.ledgerEntry(ctx, st.WorkflowID, a.IdempotencyKey)
	if err != nil {
		return machine.Output{}, false, err
	}
	if le != nil && le.State == machine.LedgerCompleted && le.RunID != st.RunID {
		return x.e.m.Deduplicate(st, a.ScheduledEventID, le.Result, le.ResultOmitted, le.RunID, le.ScheduledEventID, x.now), true, nil
	}
	if f := st.Fork(); a.ForkHeld && f != nil && a.OriginKey != "" {
		le, err := x.e.ledgerEntry(ctx, f.WorkflowID, a.OriginKey)
		if err != nil {
			return machine.Output{}, false, err
		}
		if le != nil && le.State == machine.LedgerCompleted {
			return x.e.m.DeduplicateFrom(st, a.ScheduledEventID, machine.LedgerAnswer{Result: le.Result, Omitted: le.ResultOmitted,
				WorkflowID: f.WorkflowID, RunID: le.RunID, EventID: le.ScheduledEventID}, x.now), true, nil
		}
	}
	return machine.Output{}, false, nil
}

// DescribeWorkflow implements api.Service.
func (e *Engine) DescribeWorkflow(ctx context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if c := e.corrupt.lookup(req.WorkflowID, req.RunID); c != nil {
		return &api.DescribeWorkflowResponse{Info: c.info()}, nil
	}
	resp, err := e.describeRun(ctx, req)
	if err = e.settle(err); err != nil {
		if c := e.corrupt.lookup(req.WorkflowID, req.RunID); c != nil {
			return &api.DescribeWorkflowResponse{Info: c.info()}, nil // found damaged just now
		}
		return nil, err
	}
	return resp, nil
}

func (e *Engine) describeRun(ctx context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	unlock := e.lock(req.WorkflowID)
	defer unlock()
	st, _, err := e.loadState(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return nil, err
	}
	resp := describe(st)
	for i := range resp.PendingActivities {
		p := &resp.PendingActivities[i]
		a := st.Activities[p.ScheduledEventID]
		p.LimitKey = a.Options.LimitKey
		if a.State == api.ActivityStateScheduled {
			p.WaitsForLimit = e.limits.blocking(a.Options.TaskQueue, a.ActivityType, a.Options.LimitKey)
		}
	}
	if resp.EffectReports, err = e.runReports(ctx, st.Ref()); err != nil {
		return nil, err
	}
	resp.Usage = st.UsageSummary(e.opts.Pricing)
	resp.Budget = st.BudgetStatus(e.opts.Pricing)
	resp.Unpolled = e.unpolled(st, e.now())
	if wu, err := e.workflowUsage(ctx, st.WorkflowID); err != nil {
		return nil, err
	} else if wu != nil {
		resp.WorkflowUsage = e.opts.Pricing.Summarize(wu.Total, wu.ByModel, wu.Calls)
	}
	if err := e.describeApprovals(ctx, st, resp); err != nil {
		return nil, err
	}
	if p := resp.Info.Pause; p != nil && p.Kind != api.PauseApproval {
		// The paused action's arguments, for the person deciding.
		if evs, err := e.readRun(ctx, st, p.ScheduledEventID, 1); err == nil && len(evs) == 1 {
			if s, ok := evs[0].Attrs.(*history.ActivityScheduled); ok {
				p.Input = s.Input
			}
		}
	}
	return resp, nil
}

func describe(st *machine.RunState) *api.DescribeWorkflowResponse {
	resp := &api.DescribeWorkflowResponse{Info: *summary(st), CancelRequested: st.CancelRequested, PendingApprovals: pendingApprovals(st)}
	for _, id := range sortedKeys(st.Activities) {
		a := st.Activities[id]
		state := a.State
		if a.Reconciling {
			state = api.ActivityStateReconciling
		}
		resp.PendingActivities = append(resp.PendingActivities, api.PendingActivity{
			ScheduledEventID: id, ActivityID: a.ActivityID, ActivityType: a.ActivityType, State: state, Attempt: a.Attempt,
			LeaseEpoch: a.LeaseEpoch, LeaseExpires: a.LeaseDeadline, NextAttemptAt: a.NextAttemptAt, LastFailure: a.LastFailure,
			LastHeartbeat: a.LastHeartbeat, HeartbeatDetails: a.HeartbeatDetails, Effect: a.Effect, IdempotencyKey: a.IdempotencyKey,
			CancelRequested: a.CancelRequested, InDoubt: a.InDoubt(),
		})
	}
	for _, name := range sortedKeys(st.Timers) {
		t := st.Timers[name]
		resp.PendingTimers = append(resp.PendingTimers, api.PendingTimer{TimerID: t.TimerID, StartedEventID: t.StartedEventID, FireAt: t.FireAt})
	}
	for _, id := range sortedKeys(st.Children) {
		c := st.Children[id]
		resp.PendingChildren = append(resp.PendingChildren, api.PendingChild{InitiatedEventID: id, WorkflowID: c.WorkflowID,
			RunID: c.RunID, WorkflowType: c.WorkflowType, CancelRequested: c.CancelRequested})
	}
	if st.Status.Open() {
		for _, u := range st.Updates {
			if u.CompletedEventID == 0 {
				resp.PendingUpdates = append(resp.PendingUpdates, api.PendingUpdate{UpdateID: u.ID, Name: u.Name, AcceptedEventID: u.AcceptedEventID})
			}
		}
	}
	if st.WFT.Scheduled || st.WFT.Started {
		resp.WorkflowTask = &api.PendingWorkflowTask{Attempt: st.WFT.Attempt, Started: st.WFT.Started,
			LastFailure: st.WFT.LastFailure, StickyQueue: st.WFT.StickyQueue}
	}
	return resp
}

// GetHistory implements api.Service.
func (e *Engine) GetHistory(ctx context.Context, req *api.GetHistoryRequest) (*api.GetHistoryResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	from := max(req.FromEventID, 1)
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, e.opts.PollTimeout)
	defer cancel()
	for {
		st, changed, err := e.snapshot(ctx, req.WorkflowID, req.RunID)
		if err != nil {
			return nil, err
		}
		resp := &api.GetHistoryResponse{RunID: st.RunID, NextEventID: st.NextEventID, Closed: !st.Status.Open()}
		if from < st.NextEventID {
			limit := int(st.NextEventID - from)
			if req.MaxEvents > 0 && req.MaxEvents < limit {
				limit = req.MaxEvents
			}
			evs, err := e.readRun(ctx, st, from, limit)
			if err != nil {
				return nil, e.settle(damaged(st.Ref(), changed != nil || e.isCurrentRun(ctx, st.Ref()), err))
			}
			resp.Events = evs
			return resp, nil
		}
		if !req.WaitNewEvents || changed == nil {
			return resp, nil
		}
		if !waitChange(ctx, changed, e.stop) {
			// The poll's own timeout answers "nothing new yet"; the
			// caller's context ending is the caller's error, so that a
			// loop polling on it ends instead of spinning.
			if err := caller.Err(); err != nil {
				return nil, fmt.Errorf("cairn: get history: %w", err)
			}
			return resp, nil
		}
	}
}

// snapshot returns a run's state and, for an open run, the channel that
// closes at its next transition.
func (e *Engine) snapshot(ctx context.Context, workflowID, runID string) (*machine.RunState, chan struct{}, error) {
	st, changed, err := e.snapshotLocked(ctx, workflowID, runID)
	return st, changed, e.settle(err)
}

func (e *Engine) snapshotLocked(ctx context.Context, workflowID, runID string) (*machine.RunState, chan struct{}, error) {
	unlock := e.lock(workflowID)
	defer unlock()
	st, entry, err := e.loadState(ctx, workflowID, runID)
	if err != nil {
		return nil, nil, err
	}
	if entry == nil {
		return st, nil, nil
	}
	return st, entry.changed, nil
}

func waitChange(ctx context.Context, changed <-chan struct{}, stop <-chan struct{}) bool {
	select {
	case <-changed:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

// GetResult implements api.Service.
func (e *Engine) GetResult(ctx context.Context, req *api.GetResultRequest) (*api.GetResultResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	ctx, cancel := context.WithTimeout(ctx, e.opts.PollTimeout)
	defer cancel()
	for {
		st, changed, err := e.snapshot(ctx, req.WorkflowID, req.RunID)
		if err != nil {
			return nil, err
		}
		if !st.Status.Open() {
			result, err := e.resolve(ctx, st.Result)
			if err != nil {
				return nil, err
			}
			return &api.GetResultResponse{RunID: st.RunID, Closed: true, Status: st.Status, Result: result,
				Failure: st.Failure, ContinuedAsNewRunID: st.ContinuedAsNewRunID}, nil
		}
		if !req.Wait || !waitChange(ctx, changed, e.stop) {
			return &api.GetResultResponse{RunID: st.RunID, Status: st.EffectiveStatus()}, nil
		}
		if req.RunID == "" {
			req = &api.GetResultRequest{WorkflowID: req.WorkflowID, RunID: st.RunID, Wait: true}
		}
	}
}

// ListWorkflows implements api.Service.
func (e *Engine) ListWorkflows(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if req.Corrupt {
		return e.listCorrupt(req), nil
	}
	if req.WorkflowID != "" {
		return e.listRunsOf(ctx, req)
	}
	size := req.PageSize
	if size <= 0 {
		size = 100
	}
	prefix := history.Key().Str("a").Bytes()
	status := req.Status
	if status == api.StatusUnspecified && req.PauseKind != "" {
		status = api.StatusPaused // only paused runs wait for anything
	}
	if status != api.StatusUnspecified {
		prefix = history.Key().Str("s").Int(int64(status)).Bytes()
	}
	resp := &api.ListWorkflowsResponse{}
	// One damaged index entry does not fail the list: it is listed from
	// its key (listEntry) and the scan goes on after it.
	err := scanRecords(ctx, e.store, history.SpaceIndex, history.ScanOptions{Prefix: prefix, After: req.NextPageToken, Reverse: true}, size,
		func(r history.Record, _ error) (bool, error) {
			if !indexKeyMatches(r.Key, req) {
				return true, nil
			}
			if info, ok := e.listEntry(r, req); ok && (req.Status == api.StatusUnspecified || e.corrupt.lookup(info.WorkflowID, info.RunID) == nil) {
				// A quarantined run is listed by status as quarantined
				// (Corrupt), not under the status it had.
				resp.Workflows = append(resp.Workflows, *info)
				if len(resp.Workflows) == size {
					resp.NextPageToken = r.Key
					return false, nil
				}
			}
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// listEntry decodes one list index entry and applies the request's
// filters. A quarantined run carries its Corrupt reason; an entry that is
// itself damaged is listed from its key (the run's ids and start time)
// with Corrupt saying so, rather than failing the whole list.
func (e *Engine) listEntry(r history.Record, req *api.ListWorkflowsRequest) (*api.WorkflowInfo, bool) {
	info := new(api.WorkflowInfo)
	if r.Value == nil || decodeMsgpack(r.Value, info) != nil {
		info = damagedListEntry(r.Key)
	}
	if c := e.corrupt.lookup(info.WorkflowID, info.RunID); c != nil {
		ci := c.info()
		if c.state == nil { // keep what the index knew
			ci = *info
			ci.Corrupt = c.reason
		}
		info = &ci
	}
	return info, listMatches(info, req)
}

// indexKeyMatches applies the filters a list index key answers — the
// workflow id prefix and the start time, both in the key — before its value
// is decoded: a filtered list or count decodes only the entries that pass.
// A key that does not read as an index key passes (listEntry decides).
func indexKeyMatches(key []byte, req *api.ListWorkflowsRequest) bool {
	if req.WorkflowIDPrefix == "" && req.StartedAfter.IsZero() && req.StartedBefore.IsZero() {
		return true
	}
	kr := history.ReadKey(key)
	if kr.Str() == "s" {
		kr.Int()
	}
	start := kr.Int()
	wf := kr.Str()
	if kr.Err() != nil {
		return true
	}
	info := api.WorkflowInfo{WorkflowID: wf, StartTime: time.Unix(0, start)}
	return listMatches(&info, &api.ListWorkflowsRequest{WorkflowIDPrefix: req.WorkflowIDPrefix, StartedAfter: req.StartedAfter,
		StartedBefore: req.StartedBefore})
}

// listRunsOf lists one workflow id's runs from their run state records
// (stateKey extends curKey: a scan of that id's keys only), newest first.
// A damaged record is listed from its key with Corrupt saying so. The page
// token is the last run's start time and run id.
func (e *Engine) listRunsOf(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	var runs []api.WorkflowInfo
	err := scanRecords(ctx, e.store, history.SpaceRunState, history.ScanOptions{Prefix: curKey(req.WorkflowID)}, 0,
		func(r history.Record, bad error) (bool, error) {
			kr := history.ReadKey(r.Key)
			wf, run := kr.Str(), kr.Str()
			if kr.Err() != nil || wf != req.WorkflowID {
				return true, nil
			}
			info := &api.WorkflowInfo{WorkflowID: wf, RunID: run, Corrupt: "the run's state record is damaged"}
			if bad == nil {
				if st, err := decodeState(r.Value); err == nil {
					info = summary(st)
				}
			}
			if c := e.corrupt.lookup(wf, run); c != nil {
				ci := c.info()
				if c.state == nil {
					ci = *info
					ci.Corrupt = c.reason
				}
				info = &ci
			}
			if (req.Status == api.StatusUnspecified || info.Status == req.Status) && listMatches(info, req) {
				runs = append(runs, *info)
			}
			return true, nil
		})
	if err != nil {
		return nil, err
	}
	newer := func(a, b *api.WorkflowInfo) int { // newest first; ties by run id, descending
		if c := b.StartTime.Compare(a.StartTime); c != 0 {
			return c
		}
		return strings.Compare(b.RunID, a.RunID)
	}
	slices.SortFunc(runs, func(a, b api.WorkflowInfo) int { return newer(&a, &b) })
	if req.NextPageToken != nil {
		kr := history.ReadKey(req.NextPageToken)
		last := api.WorkflowInfo{StartTime: time.Unix(0, kr.Int()).UTC(), RunID: kr.Str()}
		if kr.Err() != nil {
			return nil, api.Errorf(api.ErrInvalidArgument, "malformed page token")
		}
		i := 0
		for i < len(runs) && newer(&runs[i], &last) <= 0 {
			i++
		}
		runs = runs[i:]
	}
	size := req.PageSize
	if size <= 0 {
		size = 100
	}
	resp := &api.ListWorkflowsResponse{Workflows: runs}
	if len(runs) > size {
		resp.Workflows = runs[:size]
		l := runs[size-1]
		resp.NextPageToken = history.Key().Int(l.StartTime.UnixNano()).Str(l.RunID).Bytes()
	}
	return resp, nil
}

// damagedListEntry is the listing of an index entry whose value is
// damaged: what its key says ("a"/start/wf/run or "s"/status/start/wf/run).
func damagedListEntry(key []byte) *api.WorkflowInfo {
	kr := history.ReadKey(key)
	info := &api.WorkflowInfo{Corrupt: "the run's list index entry is damaged"}
	if kr.Str() == "s" {
		info.Status = api.Status(kr.Int())
	}
	start := kr.Int()
	info.WorkflowID, info.RunID = kr.Str(), kr.Str()
	if kr.Err() == nil {
		info.StartTime = time.Unix(0, start).UTC()
	}
	return info
}

// listMatches applies a list request's filters (all but Status, which
// selects the index).
func listMatches(info *api.WorkflowInfo, req *api.ListWorkflowsRequest) bool {
	if !matchesPause(info, req.PauseKind) {
		return false
	}
	if req.WorkflowType != "" && info.WorkflowType != req.WorkflowType {
		return false
	}
	if !strings.HasPrefix(info.WorkflowID, req.WorkflowIDPrefix) {
		return false
	}
	if !req.StartedAfter.IsZero() && !info.StartTime.After(req.StartedAfter) {
		return false
	}
	if !req.StartedBefore.IsZero() && !info.StartTime.Before(req.StartedBefore) {
		return false
	}
	return true
}

// pendingQuery is a query waiting for a worker's answer.
type pendingQuery struct {
	id    string
	query api.WorkflowQuery
	done  chan *api.RespondQueryTaskRequest
	// at is the run's NextEventID in the state the query task carries
	// (set when it is dispatched): the state the answer is about.
	at atomic.Int64
}

// QueryWorkflow implements api.Service: the query goes to a worker as a
// query task on the run's task queue and nothing is written to history.
func (e *Engine) QueryWorkflow(ctx context.Context, req *api.QueryWorkflowRequest) (*api.QueryWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := firstErr(e.m.CheckID("query type", req.QueryType, true), e.m.CheckPayload("query", req.Args)); err != nil {
		return nil, err
	}
	st, _, err := e.snapshot(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return nil, err
	}
	r, _, err := e.askWorker(ctx, st, api.WorkflowQuery{QueryType: req.QueryType, Args: req.Args})
	if err != nil {
		return nil, err
	}
	if r.Failure != nil {
		return nil, api.Errorf(api.ErrQueryFailed, "%s", r.Failure.Error())
	}
	return &api.QueryWorkflowResponse{Result: r.Result}, nil
}

// RespondQueryTask implements api.Service.
func (e *Engine) RespondQueryTask(ctx context.Context, req *api.RespondQueryTaskRequest) (*api.RespondQueryTaskResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	e.queriesMu.Lock()
	q := e.queries[string(req.TaskToken)]
	e.queriesMu.Unlock()
	if q == nil {
		return nil, api.Errorf(api.ErrNotFound, "no query waits for this answer (it may have timed out)")
	}
	select {
	case q.done <- req:
	default:
	}
	return &api.RespondQueryTaskResponse{}, nil
}

// startParams are the parameters of a run a start request creates: a new
// run id, or for a child started by its parent on another server
// (api.ChildOf) the run id and parent the parent decided.
func startParams(req *api.StartWorkflowRequest, newRunID func() string) machine.StartParams {
	c := req.Child
	if c == nil {
		return machine.StartParams{Request: *req, RunID: newRunID()}
	}
	r := *req
	r.Child = nil
	return machine.StartParams{Request: r, RunID: c.RunID, Parent: &machine.ParentRef{WorkflowID: c.ParentWorkflowID, RunID: c.ParentRunID,
		InitiatedEventID: c.InitiatedEventID, ParentClosePolicy: c.ParentClosePolicy}}
}
