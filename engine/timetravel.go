package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Time travel: reset and fork (machine/branch.go holds the semantics).
// Both read the base run's state and whole history, let the machine
// build the new run, and commit it in one transaction — for a reset with
// the base's termination. The pending actions of the copied prefix are
// checked against the effects ledger before anything is dispatched
// (txn.dedupeKeys), as every new schedule is.

// ResetWorkflow implements api.Service.
func (e *Engine) ResetWorkflow(ctx context.Context, req *api.ResetWorkflowRequest) (*api.ResetWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := checkReset(req); err != nil {
		return nil, err
	}
	var resp *api.ResetWorkflowResponse
	err := e.transact(ctx, []string{req.WorkflowID}, func(x *txn) error {
		var err error
		resp, err = x.reset(ctx, req)
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// checkReset checks a reset request's form.
func checkReset(req *api.ResetWorkflowRequest) error {
	n := 0
	for _, set := range []bool{req.ToEventID != 0, req.ToLastTask, req.ToFirstTask} {
		if set {
			n++
		}
	}
	switch {
	case req.WorkflowID == "":
		return api.Errorf(api.ErrInvalidArgument, "a reset needs a workflow id")
	case n != 1:
		return api.Errorf(api.ErrInvalidArgument, "a reset needs exactly one point: an event id (a WorkflowTaskCompleted), the last task or the first task")
	case strings.TrimSpace(req.Reason) == "":
		return api.Errorf(api.ErrInvalidArgument, "a reset needs a reason (it is recorded in both runs)")
	}
	return nil
}

// reset makes the new run and terminates (or links) the base.
func (x *txn) reset(ctx context.Context, req *api.ResetWorkflowRequest) (*api.ResetWorkflowResponse, error) {
	e := x.e
	base, entry, err := e.loadState(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" && base.ResetRequestID == req.RequestID && base.ResetRunID != "" {
		return &api.ResetWorkflowResponse{RunID: base.ResetRunID, BaseRunID: base.RunID, AtEventID: base.ResetAt}, nil // a reset sent again
	}
	if req.RequestID != "" && req.RunID == "" && base.RequestID == req.RequestID && base.Base != nil && base.Base.Kind == machine.BranchReset {
		// A reset sent again that named no run: the current run is the one
		// it made.
		return &api.ResetWorkflowResponse{RunID: base.RunID, BaseRunID: base.Base.RunID, AtEventID: base.Base.AtEventID}, nil
	}
	if base.Parent != nil {
		return nil, api.Errorf(api.ErrFailedPrecondition, "workflow %q run %q is a child of %q: reset its parent instead", base.WorkflowID, base.RunID,
			base.Parent.WorkflowID)
	}
	if entry == nil {
		if cur := e.openRun(req.WorkflowID); cur != nil {
			return nil, api.Errorf(api.ErrAlreadyStarted, "workflow %q has an open run %q: reset that run, or terminate it first", req.WorkflowID,
				cur.ref.RunID)
		}
	}
	events, err := e.readRun(ctx, base, 1, int(base.NextEventID-1))
	if err != nil {
		return nil, err
	}
	at, err := resetPoint(events, req)
	if err != nil {
		return nil, err
	}
	st, out, err := e.m.Branch(machine.BranchParams{Kind: machine.BranchReset, Base: base, Events: events, AtEventID: at,
		WorkflowID: base.WorkflowID, RunID: e.opts.NewRunID(), Reapply: !req.NoReapply, Reason: req.Reason, Identity: req.Identity}, x.now)
	if err != nil {
		return nil, err
	}
	st.RequestID = req.RequestID
	if err := x.closeBase(ctx, base, entry, st.RunID, at, req); err != nil {
		return nil, err
	}
	if err := x.branched(ctx, st, out); err != nil {
		return nil, err
	}
	return &api.ResetWorkflowResponse{RunID: st.RunID, BaseRunID: base.RunID, AtEventID: at}, nil
}

// resetPoint returns the WorkflowTaskCompleted event the request names.
func resetPoint(events []history.Event, req *api.ResetWorkflowRequest) (int64, error) {
	if req.ToEventID != 0 {
		return req.ToEventID, machine.CheckBranchPoint(events, req.ToEventID)
	}
	var first, last int64
	for _, ev := range events {
		if _, ok := ev.Attrs.(*history.WorkflowTaskCompleted); ok {
			if first == 0 {
				first = ev.ID
			}
			last = ev.ID
		}
	}
	if first == 0 {
		return 0, api.Errorf(api.ErrFailedPrecondition, "the run has completed no workflow task: there is nothing to go back to")
	}
	if req.ToFirstTask {
		return first, nil
	}
	return last, nil
}

// closeBase terminates the base run of a reset when it is open, and links
// it to the new run either way.
func (x *txn) closeBase(ctx context.Context, base *machine.RunState, entry *runEntry, newRun string, at int64, req *api.ResetWorkflowRequest) error {
	if entry == nil {
		linked := base.Clone()
		linked.ResetRunID, linked.ResetRequestID, linked.ResetAt = newRun, req.RequestID, at
		x.record(x.run(nil, base, linked), machine.Output{})
		return nil
	}
	tr := x.edit(entry)
	reason := fmt.Sprintf("reset to event %d as run %s: %s", at, newRun, req.Reason)
	out, err := x.e.m.Terminate(tr.st, reason, history.Payload{}, req.Identity, x.now)
	if err != nil {
		return err
	}
	if n := len(out.Events); n > 0 {
		if t, ok := out.Events[0].Attrs.(*history.WorkflowTerminated); ok {
			t.ResetRunID = newRun
		}
	}
	tr.st.ResetRunID, tr.st.ResetRequestID, tr.st.ResetAt = newRun, req.RequestID, at
	return x.apply(ctx, tr, out)
}

// branched registers a reset's or a fork's new run and consults the
// ledger for the actions its prefix left pending.
func (x *txn) branched(ctx context.Context, st *machine.RunState, out machine.Output) error {
	tr := x.run(nil, nil, st)
	tr.first = st.Base.AtEventID // the events before are the base's (machine.BaseRef.Sources)
	x.record(tr, out)
	return x.dedupeKeys(ctx, tr, machine.PendingKeyed(st))
}

// ForkWorkflow implements api.Service.
func (e *Engine) ForkWorkflow(ctx context.Context, req *api.ForkWorkflowRequest) (*api.ForkWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	sandbox, err := checkFork(e.m, req)
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" {
		// A fork sent again returns the fork it made, whatever its base
		// did since.
		if prev, err := e.forkSentAgain(ctx, req); prev != nil || err != nil {
			return prev, err
		}
	}
	base, events, err := e.forkBase(ctx, req)
	if err != nil {
		return nil, err
	}
	at := req.AtEventID
	if at == 0 {
		if at, err = resetPoint(events, &api.ResetWorkflowRequest{ToLastTask: true}); err != nil {
			return nil, err
		}
	}
	var resp *api.ForkWorkflowResponse
	// The base's lock too (when this server serves it): a delete of the
	// base (retention, cairn workflow delete) either committed before —
	// the base is gone and the fork refused — or waits and then finds the
	// fork's base-index entry and keeps the base (retention.go).
	ids := []string{req.NewWorkflowID}
	if req.WorkflowID != req.NewWorkflowID {
		ids = append(ids, req.WorkflowID)
	}
	err = e.transact(ctx, ids, func(x *txn) error {
		if prev, err := x.forkExists(ctx, req, base); prev != nil || err != nil {
			resp = prev
			return err
		}
		if !x.foreign[req.WorkflowID] {
			if _, _, err := e.loadState(ctx, base.WorkflowID, base.RunID); err != nil {
				return err
			}
		}
		st, out, err := e.m.Branch(machine.BranchParams{Kind: machine.BranchFork, Base: base, Events: events, AtEventID: at,
			WorkflowID: req.NewWorkflowID, RunID: e.opts.NewRunID(), TaskQueue: req.TaskQueue, SandboxQueue: sandbox,
			Reapply: !req.NoReapply, Reason: req.Reason, Identity: req.Identity}, x.now)
		if err != nil {
			return err
		}
		st.RequestID = req.RequestID
		resp = &api.ForkWorkflowResponse{WorkflowID: st.WorkflowID, RunID: st.RunID, AtEventID: at}
		return x.branched(ctx, st, out)
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// checkFork checks a fork request's form and returns its sandbox queue
// ("" when its effects are held).
func checkFork(m *machine.Machine, req *api.ForkWorkflowRequest) (string, error) {
	if err := firstErr(m.CheckID("workflow id", req.WorkflowID, true), m.CheckID("new workflow id", req.NewWorkflowID, true)); err != nil {
		return "", err
	}
	if req.NewWorkflowID == req.WorkflowID {
		return "", api.Errorf(api.ErrInvalidArgument, "a fork needs a workflow id of its own (reset makes a new run of the same id)")
	}
	switch {
	case req.Effects == "" || req.Effects == "hold":
		return "", nil
	case strings.HasPrefix(req.Effects, "sandbox:") && len(req.Effects) > len("sandbox:"):
		q := strings.TrimPrefix(req.Effects, "sandbox:")
		return q, m.CheckID("sandbox task queue", q, true)
	}
	return "", api.Errorf(api.ErrInvalidArgument, "effects %q: want hold or sandbox:QUEUE", req.Effects)
}

// forkBase reads the base run's state and history, under its lock so that
// the two agree (the base goes on after that: the fork copies what was).
func (e *Engine) forkBase(ctx context.Context, req *api.ForkWorkflowRequest) (*machine.RunState, []history.Event, error) {
	if e.shards != nil && !e.Serves(req.WorkflowID) {
		// In a cluster the fork is made by the new id's server; the base's
		// server may be another. Its committed state and history, read from
		// the shared store, agree (they are committed together).
		return e.storedBase(ctx, req)
	}
	unlock := e.lock(req.WorkflowID)
	defer unlock()
	base, _, err := e.loadState(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return nil, nil, err
	}
	events, err := e.readRun(ctx, base, 1, int(base.NextEventID-1))
	if err != nil {
		return nil, nil, err
	}
	return base, events, nil
}

// storedBase reads a fork's base, served by another server, from the store.
func (e *Engine) storedBase(ctx context.Context, req *api.ForkWorkflowRequest) (*machine.RunState, []history.Event, error) {
	base, _, err := e.storedState(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return nil, nil, err
	}
	events, err := e.readRun(ctx, base, 1, int(base.NextEventID-1))
	if err != nil {
		return nil, nil, err
	}
	return base, events, nil
}

// forkSentAgain returns the fork req made, if it was sent before.
func (e *Engine) forkSentAgain(ctx context.Context, req *api.ForkWorkflowRequest) (*api.ForkWorkflowResponse, error) {
	if e.shards != nil && !e.Serves(req.NewWorkflowID) {
		return nil, nil
	}
	unlock := e.lock(req.NewWorkflowID)
	defer unlock()
	prev, _, err := e.loadState(ctx, req.NewWorkflowID, "")
	if errors.Is(err, api.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if prev.RequestID == req.RequestID && prev.Base != nil && prev.Base.Kind == machine.BranchFork && prev.Base.WorkflowID == req.WorkflowID &&
		(req.RunID == "" || req.RunID == prev.Base.RunID) {
		return &api.ForkWorkflowResponse{WorkflowID: prev.WorkflowID, RunID: prev.RunID, AtEventID: prev.Base.AtEventID}, nil
	}
	return nil, nil
}

// forkExists returns the fork a request sent again made, or refuses a new
// workflow id that already ran.
func (x *txn) forkExists(ctx context.Context, req *api.ForkWorkflowRequest, base *machine.RunState) (*api.ForkWorkflowResponse, error) {
	prev, _, err := x.e.loadState(ctx, req.NewWorkflowID, "")
	if errors.Is(err, api.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if req.RequestID != "" && prev.RequestID == req.RequestID && prev.Base != nil && prev.Base.RunID == base.RunID {
		return &api.ForkWorkflowResponse{WorkflowID: prev.WorkflowID, RunID: prev.RunID, AtEventID: prev.Base.AtEventID}, nil
	}
	return nil, api.Errorf(api.ErrAlreadyStarted, "workflow %q already exists (run %q): a fork needs a new workflow id", req.NewWorkflowID, prev.RunID)
}

// originAnswer decides a fork's action (of any run of a forked workflow:
// machine.RunState.Fork) that its own ledger does not know:
// answered from the base workflow's ledger when the base completed it,
// else sent to the sandbox queue (the schedule went there already), else
// held for a person.
func (x *txn) originAnswer(ctx context.Context, tr *txnRun, schedID int64) {
	st := tr.st
	a, f := st.Activities[schedID], st.Fork()
	if a == nil || f == nil || a.State != api.ActivityStateScheduled {
		return
	}
	var le *machine.LedgerEntry
	var err error
	if a.OriginKey != "" {
		le, err = x.e.ledgerEntry(ctx, f.WorkflowID, a.OriginKey)
	}
	switch {
	case err != nil:
		x.record(tr, x.e.m.HoldForFork(st, schedID, "the base's ledger entry could not be read: "+err.Error(), x.now))
	case le != nil && le.State == machine.LedgerCompleted:
		x.record(tr, x.e.m.DeduplicateFrom(st, schedID, machine.LedgerAnswer{Result: le.Result, Omitted: le.ResultOmitted,
			WorkflowID: f.WorkflowID, RunID: le.RunID, EventID: le.ScheduledEventID}, x.now))
	case f.SandboxQueue != "":
		// Dispatched to the sandbox: its schedule names that queue.
	case f.WorkflowID == "":
		x.record(tr, x.e.m.HoldForFork(st, schedID, "a fork's child: no base ledger answers its actions", x.now))
	case a.OriginKey == "":
		x.record(tr, x.e.m.HoldForFork(st, schedID, "its key in "+f.WorkflowID+"'s key space is not known", x.now))
	default:
		x.record(tr, x.e.m.HoldForFork(st, schedID, heldReason(f.WorkflowID, le), x.now))
	}
}

// heldReason says why the base's ledger could not answer a fork's action.
func heldReason(base string, le *machine.LedgerEntry) string {
	switch {
	case le == nil:
		return fmt.Sprintf("%s never performed this action", base)
	case le.State == machine.LedgerNotHappened:
		return fmt.Sprintf("the action did not happen in %s (run %s)", base, le.RunID)
	}
	return fmt.Sprintf("run %s of %s started this action and its outcome is not known", le.RunID, base)
}
