package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// transact runs fn under the locks of ids with a fresh transaction and
// commits what fn gathered. Nothing is written when fn fails. A run that
// fn found damaged is quarantined once the locks are released (settle).
//
// ids[0] is the run the transition is about: it must be served here.
// Another id whose shard another server serves is not locked: the
// transaction reaches that run through the cluster (crossshard.go).
func (e *Engine) transact(ctx context.Context, ids []string, fn func(x *txn) error) error {
	local, foreign := e.shards.split(ids)
	if err := e.shards.wait(ctx, local); err != nil {
		return err
	}
	return e.settle(e.transactLocked(ctx, local, foreign, fn))
}

func (e *Engine) transactLocked(ctx context.Context, ids, foreign []string, fn func(x *txn) error) error {
	unlock := e.lock(ids...)
	defer unlock()
	if err := e.shards.check(ids...); err != nil {
		return err
	}
	if err := e.resyncHeld(ctx, ids); err != nil {
		return err
	}
	x := e.newTxn(e.now(), ids)
	defer x.release()
	for _, id := range foreign {
		x.foreign[id] = true
	}
	if err := fn(x); err != nil {
		return err
	}
	if len(x.runs) == 0 && x.batch.Empty() {
		return nil
	}
	if err := x.commit(ctx); err != nil {
		return err
	}
	e.deliverNoticesLater(x.notices)
	return nil
}

// edit registers an existing open run for modification and returns its
// working copy.
func (x *txn) edit(entry *runEntry) *txnRun {
	if tr, ok := x.byRef[entry.ref]; ok {
		return tr
	}
	return x.run(entry, entry.state, entry.state.Clone())
}

// apply records out for tr and performs the cross-run consequences it asks
// for, inside the same transaction.
func (x *txn) apply(ctx context.Context, tr *txnRun, out machine.Output) error {
	x.record(tr, out)
	keepInputs(tr.st, out.Events)
	if err := x.dedupe(ctx, tr, out.Events); err != nil {
		return err
	}
	for _, cs := range out.ChildStarts {
		if err := x.startChild(ctx, tr, cs); err != nil {
			return err
		}
	}
	for _, so := range out.SignalsOut {
		if err := x.deliverSignal(ctx, tr.st.Ref(), so); err != nil {
			return err
		}
	}
	for _, cc := range out.CancelChildren {
		if err := x.cancelChild(ctx, cc); err != nil {
			return err
		}
	}
	if out.ContinueAsNew != nil {
		st, first := x.e.m.Start(*out.ContinueAsNew, x.now)
		ntr := x.run(nil, nil, st)
		if err := x.apply(ctx, ntr, first); err != nil {
			return err
		}
	}
	if out.Closed && tr.st.Status != api.StatusContinuedAsNew {
		return x.notifyParent(ctx, tr.st)
	}
	return nil
}

func (x *txn) need(workflowID string) error {
	if !x.held[workflowID] {
		return fmt.Errorf("%w: transaction touches workflow %q without its lock", api.ErrInternal, workflowID)
	}
	return nil
}

// startChild creates a child run decided by the parent's command (on the
// server that serves it, when that is another).
func (x *txn) startChild(ctx context.Context, parent *txnRun, cs machine.ChildStart) error {
	if x.foreign[cs.Params.Request.WorkflowID] {
		return x.startForeignChild(ctx, cs)
	}
	if err := x.need(cs.Params.Request.WorkflowID); err != nil {
		return err
	}
	st, out := x.e.m.Start(cs.Params, x.now)
	ctr := x.run(nil, nil, st)
	x.record(ctr, out)
	return nil
}

// deliverSignal appends a signal to another open run (on the server that
// serves it, when that is another).
func (x *txn) deliverSignal(ctx context.Context, from history.RunRef, so machine.SignalOut) error {
	if x.foreign[so.WorkflowID] {
		return x.signalForeign(ctx, from, so)
	}
	if err := x.need(so.WorkflowID); err != nil {
		return err
	}
	tr := x.openTarget(so.WorkflowID)
	if tr == nil {
		return nil
	}
	out, err := x.e.m.Signal(tr.st, so.Name, so.Input, so.Identity, x.now)
	if err != nil {
		return err
	}
	x.record(tr, out)
	return nil
}

// openTarget returns the working copy of workflowID's open run: the one
// this transaction already holds (a child it started), else the current
// one; nil when there is none.
func (x *txn) openTarget(workflowID string) *txnRun {
	if tr := x.findOpen(workflowID); tr != nil {
		return tr
	}
	if target := x.e.openRun(workflowID); target != nil {
		return x.edit(target)
	}
	return nil
}

// cancelChild asks a parent's open child run to cancel (on the server that
// serves it, when that is another). A child that closed meanwhile, or
// whose id now names another run, is left alone.
func (x *txn) cancelChild(ctx context.Context, cc machine.ChildCancel) error {
	if x.foreign[cc.WorkflowID] {
		return x.cancelForeignChild(ctx, cc)
	}
	if err := x.need(cc.WorkflowID); err != nil {
		return err
	}
	tr := x.openTarget(cc.WorkflowID)
	if tr == nil || tr.st.RunID != cc.RunID || !tr.st.Status.Open() {
		return nil
	}
	out, err := x.e.m.RequestCancel(tr.st, cc.Reason, cc.Identity, x.now)
	if err != nil {
		return err
	}
	x.record(tr, out)
	return nil
}

// findOpen returns a run of the transaction that is open for workflowID.
func (x *txn) findOpen(workflowID string) *txnRun {
	for _, tr := range x.runs {
		if tr.st.WorkflowID == workflowID && tr.st.Status.Open() {
			return tr
		}
	}
	return nil
}

// notifyParent tells an open parent that its child closed.
func (x *txn) notifyParent(ctx context.Context, child *machine.RunState) error {
	p := child.Parent
	if p == nil {
		return nil
	}
	if x.foreign[p.WorkflowID] {
		return x.noteForeignParent(child)
	}
	if err := x.need(p.WorkflowID); err != nil {
		return err
	}
	var ptr *txnRun
	if tr, ok := x.byRef[history.RunRef{WorkflowID: p.WorkflowID, RunID: p.RunID}]; ok {
		ptr = tr
	} else if pe := x.e.openRun(p.WorkflowID); pe != nil && pe.ref.RunID == p.RunID {
		ptr = x.edit(pe)
	}
	if ptr == nil {
		return nil
	}
	out, err := x.e.m.ChildClosed(ptr.st, p.InitiatedEventID, child, x.now)
	if err != nil {
		return err
	}
	x.record(ptr, out)
	return nil
}

// keepInputs keeps the inputs of newly scheduled activities in memory (a
// copy: the request's buffers are the caller's).
func keepInputs(st *machine.RunState, events []history.Event) {
	for _, ev := range events {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok {
			if a := st.Activities[ev.ID]; a != nil {
				in := clonePayload(s.Input)
				a.Input = &in
			}
		}
	}
}

// dedupe consults the effects ledger for every newly scheduled action with
// an idempotency key: an action already completed under the key (by this
// or an earlier run of the workflow id) is answered from the ledger and not
// dispatched; one in flight or unknown from an earlier run pauses the run.
func (x *txn) dedupe(ctx context.Context, tr *txnRun, events []history.Event) error {
	for _, ev := range events {
		schedID, key := ev.ID, ""
		switch s := ev.Attrs.(type) {
		case *history.ActivityScheduled:
			key = s.IdempotencyKey
		case *history.ActivityKeyed: // a key assigned after the schedule, before any intent
			if a := tr.st.Activities[s.ScheduledEventID]; a != nil && len(a.Attempts) == 0 {
				schedID, key = s.ScheduledEventID, s.IdempotencyKey
			}
		}
		if key == "" {
			continue
		}
		if err := x.dedupeOne(ctx, tr, schedID, key); err != nil {
			return err
		}
	}
	return nil
}

// dedupeKeys is dedupe for the pending activities schedIDs (a reset's or
// a fork's, whose schedules were copied), under their current keys.
func (x *txn) dedupeKeys(ctx context.Context, tr *txnRun, schedIDs []int64) error {
	for _, id := range schedIDs {
		if a := tr.st.Activities[id]; a != nil && a.IdempotencyKey != "" {
			if err := x.dedupeOne(ctx, tr, id, a.IdempotencyKey); err != nil {
				return err
			}
		}
	}
	return nil
}

// dedupeOne consults the ledger for one action.
func (x *txn) dedupeOne(ctx context.Context, tr *txnRun, schedID int64, key string) error {
	entry, err := x.e.ledgerEntry(ctx, tr.st.WorkflowID, key)
	if err != nil {
		// A damaged ledger entry: whether this action already happened
		// cannot be known, so the run may not go on.
		return damaged(tr.st.Ref(), true, err)
	}
	if entry == nil {
		// An action put in doubt as its key was assigned (after a
		// recovery of the store) is unknown in the ledger from now on.
		x.record(tr, x.e.m.LedgerInDoubt(tr.st, schedID, x.now))
		// A fork's action: its base's ledger may know it (timetravel.go).
		x.originAnswer(ctx, tr, schedID)
		return nil
	}
	switch entry.State {
	case machine.LedgerCompleted:
		x.record(tr, x.e.m.Deduplicate(tr.st, schedID, entry.Result, entry.ResultOmitted, entry.RunID, entry.ScheduledEventID, x.now))
	case machine.LedgerInFlight, machine.LedgerUnknown:
		if entry.RunID != tr.st.RunID {
			reason := fmt.Sprintf("run %s already started this action (%s, key %s) and its outcome is unknown", entry.RunID,
				entry.ActivityType, key)
			if entry.Doubt != "" {
				reason += " after a recovery of the store (" + entry.Doubt + ")"
			}
			x.record(tr, x.e.m.PauseOnLedger(tr.st, schedID, reason, x.now))
		}
	case 0:
		// Only noted by a run (never dispatched, never answered): to a
		// fork it is as unknown as no entry.
		x.originAnswer(ctx, tr, schedID)
	}
	return nil
}

// installRun makes a committed run state current and acts on its outputs.
// The caller holds the run's lock.
func (e *Engine) installRun(tr *txnRun) {
	st := tr.st
	st.OccurrencesCommitted() // read from the store from now on (occurrences.go)
	entry := tr.entry
	if entry != nil && st.Status.Open() {
		// The common case: an open run moves on. Its state is read and
		// replaced only under its stripe lock, which the caller holds; the
		// map of open runs does not change.
		entry.state = st
	} else {
		e.mu.Lock()
		if entry == nil {
			entry = &runEntry{ref: st.Ref(), parent: st.Parent, changed: make(chan struct{})}
			tr.entry = entry
		}
		entry.state = st
		if st.Status.Open() {
			e.open[st.WorkflowID] = entry
		} else if e.open[st.WorkflowID] == entry {
			delete(e.open, st.WorkflowID)
		}
		e.mu.Unlock()
		if !st.Status.Open() {
			e.recent.Add(st.WorkflowID, st)
		}
	}
	entry.tail.extend(tr.first, tr.events)
	e.streams.settle(entry.ref, st, tr.events, e.now())
	close(entry.changed)
	entry.changed = make(chan struct{})
	e.watch.notify()
	e.limits.sync(entry.ref, st) // frees the slots of the attempts that ended
	for _, out := range tr.outs {
		e.afterCommit(entry, st, out)
	}
}

// afterCommit dispatches what a committed output asks for.
func (e *Engine) afterCommit(entry *runEntry, st *machine.RunState, out machine.Output) {
	if out.WFTReady && st.WFT.Scheduled && !st.WFT.Started {
		e.enqueueWFT(entry, st)
	}
	for _, id := range out.ActivitiesReady {
		if a, ok := st.Activities[id]; ok && a.State == api.ActivityStateScheduled {
			e.actQ.Push(a.Options.TaskQueue, newActItem(entry.ref, id, a))
		}
	}
	for _, d := range out.Deadlines {
		e.timers.Add(d.At, timerKey{ref: entry.ref, d: d})
	}
	if len(out.CloseChildren) > 0 {
		e.closeChildren(st, out.CloseChildren)
	}
	for i := range out.Reports {
		e.noteReport(&out.Reports[i])
	}
}

// enqueueWFT puts the run's workflow task on the sticky queue of the worker
// that caches the run, or on the run's task queue.
func (e *Engine) enqueueWFT(entry *runEntry, st *machine.RunState) {
	seq := e.seq.Add(1)
	sticky := st.WFT.StickyQueue != ""
	if d, ok := e.m.WFTEnqueued(st, seq, sticky, e.now()); ok {
		e.timers.Add(d.At, timerKey{ref: entry.ref, d: d})
	}
	queue := st.TaskQueue
	if sticky {
		queue = st.WFT.StickyQueue
	}
	e.wftQ.Push(queue, wftItem{ref: entry.ref, seq: seq})
}

// closeChildren applies the parent-close policy to a closed parent's open
// children, each in its own transaction, in the background.
func (e *Engine) closeChildren(parent *machine.RunState, children []machine.ChildInfo) {
	e.background(func() {
		ctx := context.Background()
		for _, c := range children {
			e.applyParentClose(ctx, parent, c)
		}
	})
}

func (e *Engine) applyParentClose(ctx context.Context, parent *machine.RunState, c machine.ChildInfo) {
	var svc api.Service = e
	if !e.Serves(c.WorkflowID) && e.remote != nil {
		svc = e.remote // the child is served by another server of the cluster
		if !e.foreignChildOpen(ctx, parent, c) {
			return
		}
	} else if p := e.parentOf(c.WorkflowID); p == nil || p.WorkflowID != parent.WorkflowID {
		return // the child closed already (or its id now belongs to another run)
	}
	var err error
	reason := fmt.Sprintf("parent workflow %q run %q closed (%s)", parent.WorkflowID, parent.RunID, parent.Status)
	switch c.ParentClosePolicy {
	case history.ParentCloseTerminate:
		_, err = svc.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: c.WorkflowID, Reason: reason, Identity: "parent-close-policy"})
	case history.ParentCloseRequestCancel:
		_, err = svc.RequestCancelWorkflow(ctx, &api.CancelWorkflowRequest{WorkflowID: c.WorkflowID, Reason: reason, Identity: "parent-close-policy"})
	}
	if err != nil && !errors.Is(err, api.ErrWorkflowClosed) && !errors.Is(err, api.ErrNotFound) && !errors.Is(err, api.ErrUnavailable) {
		e.log.Warn().Err(err).Str("workflow", c.WorkflowID).Msg("parent-close policy not applied")
	}
}
