package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Record keys. Every key is a history tuple, so prefix scans are exact.
func stateKey(r history.RunRef) []byte { return history.Key().Str(r.WorkflowID).Str(r.RunID).Bytes() }
func curKey(workflowID string) []byte  { return history.Key().Str(workflowID).Bytes() }
func ledgerKey(workflowID, key string) []byte {
	return history.Key().Str(workflowID).Str(key).Bytes()
}

// Index keys: "a" lists every run by start time, "s" by status then start
// time, "o" names the open runs (scanned on Open).
func indexAllKey(st *machine.RunState) []byte {
	return history.Key().Str("a").Int(st.StartTime.UnixNano()).Str(st.WorkflowID).Str(st.RunID).Bytes()
}

func indexStatusKey(status api.Status, st *machine.RunState) []byte {
	return history.Key().Str("s").Int(int64(status)).Int(st.StartTime.UnixNano()).Str(st.WorkflowID).Str(st.RunID).Bytes()
}

func indexOpenKey(r history.RunRef) []byte {
	return history.Key().Str("o").Str(r.WorkflowID).Str(r.RunID).Bytes()
}

var bootKey = history.Key().Str("boot").Bytes()

func encodeState(st *machine.RunState) ([]byte, error) {
	b, err := api.MarshalMsgpack(st)
	if err != nil {
		return nil, fmt.Errorf("%w: encode run state: %w", api.ErrInternal, err)
	}
	return b, nil
}

func decodeState(b []byte) (*machine.RunState, error) {
	st := new(machine.RunState)
	if err := api.UnmarshalMsgpack(b, st); err != nil { // a state written before a field was appended reads too
		return nil, fmt.Errorf("%w: %w: run state: %w", api.ErrInternal, history.ErrCorrupt, err)
	}
	return st, nil
}

// txn gathers one store transaction that may span several runs.
type txn struct {
	e     *Engine
	now   time.Time
	held  map[string]bool // workflow ids whose locks the transaction holds
	batch history.Batch
	runs  []*txnRun
	byRef map[history.RunRef]*txnRun
	// ledger holds the effects-ledger entries this transaction changes,
	// by record key, read once and written once (see ledger.go).
	ledgerEntries map[string]*machine.LedgerEntry
	// newChunks are the payload chunks the batch writes (by hash).
	newChunks map[string]struct{}
	// chunkLocked: the transaction holds the chunk collector's read lock
	// (chunkgc.go) until release.
	chunkLocked bool
	// foreign are the workflow ids the transaction touches that another
	// server of the cluster serves (not locked: crossshard.go); notices
	// the closed children whose foreign parents are to be told.
	foreign map[string]bool
	notices []history.RunRef
}

// txnRun is one run touched by a transaction.
type txnRun struct {
	before  *machine.RunState // installed state before (nil for a new run)
	st      *machine.RunState // the new state
	entry   *runEntry
	first   int64 // NextEventID before the transaction
	events  []history.Event
	outs    []machine.Output
	created bool
}

func (e *Engine) newTxn(now time.Time, held []string) *txn {
	x := &txn{e: e, now: now, byRef: map[history.RunRef]*txnRun{}, held: map[string]bool{}, newChunks: map[string]struct{}{},
		foreign: map[string]bool{}}
	for _, id := range held {
		x.held[id] = true
	}
	return x
}

// run registers a run's working copy. Call once per run, before record.
func (x *txn) run(entry *runEntry, before, st *machine.RunState) *txnRun {
	// The history continues from the installed state: st may already have
	// been advanced by the machine (fire, dispatch) before it is registered.
	tr := &txnRun{before: before, st: st, entry: entry, first: 1, created: true}
	if before != nil {
		tr.first, tr.created = before.NextEventID, false
	}
	x.runs = append(x.runs, tr)
	x.byRef[st.Ref()] = tr
	return tr
}

// record adds an Output produced for tr.
func (x *txn) record(tr *txnRun, out machine.Output) {
	tr.events = append(tr.events, out.Events...)
	tr.outs = append(tr.outs, out)
}

// build turns the gathered runs into the store batch.
func (x *txn) build(ctx context.Context) error {
	for _, tr := range x.runs {
		st := tr.st
		ref := st.Ref()
		if err := x.storeEventPayloads(ctx, tr); err != nil {
			return err
		}
		if len(tr.events) > 0 {
			x.batch.Appends = append(x.batch.Appends, storedAppend(ref, st.StoredOffset(), tr.first, tr.events))
		}
		x.occurrences(tr)
		b, err := encodeState(st)
		if err != nil {
			return err
		}
		x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceRunState, Key: stateKey(ref), Value: b})
		var used []history.Usage
		for _, out := range tr.outs {
			if err := x.ledger(ctx, tr, out.Ledger); err != nil {
				return err
			}
			used = append(used, out.Usage...)
		}
		if err := x.usage(ctx, tr, used); err != nil {
			return err
		}
		if err := x.index(tr); err != nil {
			return err
		}
		x.retentionRecords(tr)
	}
	return nil
}

// storedAppend is the store's append of events numbered from first in a
// run's history whose own stored events are numbered offset less
// (RunState.StoredOffset: a reset's or a fork's, whose history begins
// with its base's events).
func storedAppend(ref history.RunRef, offset, first int64, events []history.Event) history.Append {
	if offset == 0 {
		return history.Append{Run: ref, ExpectedNext: first, Events: events}
	}
	stored := make([]history.Event, len(events))
	for i, ev := range events {
		ev.ID -= offset
		stored[i] = ev
	}
	return history.Append{Run: ref, ExpectedNext: first - offset, Events: stored}
}

// index keeps the list indexes and the current-run pointer in step.
func (x *txn) index(tr *txnRun) error {
	st := tr.st
	ref := st.Ref()
	newStatus := st.EffectiveStatus()
	var oldStatus api.Status
	if tr.before != nil {
		oldStatus = tr.before.EffectiveStatus()
	}
	if tr.created {
		x.batch.Puts = append(x.batch.Puts,
			history.Record{Space: history.SpaceCurrentRun, Key: curKey(st.WorkflowID), Value: []byte(st.RunID)},
			history.Record{Space: history.SpaceIndex, Key: indexOpenKey(ref)})
	}
	if oldStatus == newStatus && !tr.created && !countsChanged(tr.before, st) && !pauseChanged(tr.before, st) {
		return nil
	}
	info, err := api.MarshalMsgpack(summary(st))
	if err != nil {
		return fmt.Errorf("%w: encode index entry: %w", api.ErrInternal, err)
	}
	x.batch.Puts = append(x.batch.Puts,
		history.Record{Space: history.SpaceIndex, Key: indexAllKey(st), Value: info},
		history.Record{Space: history.SpaceIndex, Key: indexStatusKey(newStatus, st), Value: info})
	if oldStatus != api.StatusUnspecified && oldStatus != newStatus {
		x.batch.Deletes = append(x.batch.Deletes, history.RecordKey{Space: history.SpaceIndex, Key: indexStatusKey(oldStatus, st)})
	}
	if !st.Status.Open() {
		x.batch.Deletes = append(x.batch.Deletes, history.RecordKey{Space: history.SpaceIndex, Key: indexOpenKey(ref)})
	}
	return nil
}

// countsChanged reports whether the effect counters the list shows moved.
func countsChanged(before, st *machine.RunState) bool {
	return before != nil && (before.Duplicates != st.Duplicates || before.EffectConflicts != st.EffectConflicts)
}

// summary is what the list indexes store about a run.
func summary(st *machine.RunState) *api.WorkflowInfo {
	info := &api.WorkflowInfo{
		WorkflowID: st.WorkflowID, RunID: st.RunID, WorkflowType: st.WorkflowType, TaskQueue: st.TaskQueue,
		Status: st.EffectiveStatus(), StartTime: st.StartTime, CloseTime: st.CloseTime, HistoryLength: st.NextEventID - 1,
		ContinuedAsNewRunID: st.ContinuedAsNewRunID, Duplicates: st.Duplicates, EffectConflicts: st.EffectConflicts,
		ResetRunID: st.ResetRunID, LedgerAnswers: st.LedgerAnswers,
	}
	if b := st.Base; b != nil {
		info.Base = &api.BaseRun{Kind: b.Kind, WorkflowID: b.WorkflowID, RunID: b.RunID, AtEventID: b.AtEventID}
		if f := st.Fork(); f != nil {
			info.Base.Effects = "hold"
			if f.SandboxQueue != "" {
				info.Base.Effects = "sandbox:" + f.SandboxQueue
			}
		}
	}
	if st.Parent != nil {
		info.ParentWorkflowID, info.ParentRunID = st.Parent.WorkflowID, st.Parent.RunID
	}
	if a := st.Paused(); a != nil {
		info.Pause = &api.PauseInfo{ScheduledEventID: a.ScheduledEventID, ActivityID: a.ActivityID, ActivityType: a.ActivityType,
			IdempotencyKey: a.IdempotencyKey, Attempt: a.Attempt, Reason: a.UnknownReason, Since: a.UnknownSince,
			Kind: api.PauseOutcomeUnknown, Effect: a.Effect, EffectKnown: true}
		if a.ForkHeld {
			info.Pause.Kind = api.PauseHeld
		}
	} else if held := st.Held(); len(held) > 0 && st.Status.Open() {
		a := held[0]
		info.Pause = &api.PauseInfo{ScheduledEventID: a.ScheduledEventID, ActivityID: a.ActivityID, ActivityType: a.ActivityType,
			Attempt: a.Attempt, Reason: a.HeldReason, Since: a.HeldSince, Kind: api.PauseBudget, Effect: a.Effect, EffectKnown: true}
	} else if len(st.Approvals) > 0 && st.Status.Open() {
		info.Pause = approvalPause(st, st.Approvals[0])
	}
	return info
}

// commit writes the transaction durably and then installs the new states
// and performs the post-commit work (queues, timers, wake-ups). The caller
// holds the locks of every run in the transaction.
func (x *txn) commit(ctx context.Context) error {
	if err := x.build(ctx); err != nil {
		return err
	}
	h := x.handOff()
	// Once decided, a transition is not abandoned halfway because the
	// caller went away: the store either commits all of it or none.
	if err := x.e.commitFenced(context.WithoutCancel(ctx), &x.batch, x.held); err != nil {
		if errors.Is(err, api.ErrNotOwner) {
			// Nothing was written, and this engine no longer serves (one
			// of) the shards: the runs are not read back, they are dropped.
			return err
		}
		// A task handed off is now stale: its completion finds the run as
		// it was and is refused. A commit that may have been applied all
		// the same leaves the runs to be read back (resync.go).
		if ambiguousCommit(err) || errors.Is(err, history.ErrConflict) {
			// A conflict means the store holds events this engine's copy of
			// the run does not know: it is stale (another server of a
			// cluster served the run meanwhile). Left as it was, every
			// later transition of the run would conflict again, forever;
			// read back, the next one starts from the truth.
			x.resyncAll(ctx)
		}
		return storeErr(err)
	}
	x.e.stats.commits.Add(1)
	for h := range x.newChunks {
		x.e.chunks.Add(h, struct{}{})
	}
	x.install()
	if h != nil {
		h.installed()
	}
	return nil
}

// handedOff is what a transaction gave to waiting pollers before it was
// durable: the deadlines of those tasks start once it is installed.
type handedOff struct {
	e         *Engine
	tr        *txnRun
	deadlines []machine.Deadline
	wftNext   int64 // the workflow task's NextEventID, 0 if none was handed off
}

// handOff gives the tasks this transaction makes ready to pollers already
// waiting for them, before the transaction is durable, so that workers run
// them while the store syncs instead of after. The transaction's caller is
// still answered only once it is durable.
//
// Why this is safe: a task's only way back into the engine is a new
// transaction on the same run, which waits for the run's lock until this
// one is installed and comes after it in the log, so it can never be
// durable without it; if this commit fails the tasks are stale and their
// completions are refused. What a task does outside the engine decides
// which tasks may go early:
//
//   - a workflow task acts on nothing outside the engine;
//   - a Read activity, by its declaration, has no side effect: should this
//     transaction be lost, the workflow schedules it again and it runs
//     again, which is what a Read attempt already risks (its lease lives in
//     memory and a restart dispatches it again);
//   - Idempotent and SideEffect activities, and Reconcile lookups, never go
//     early: their intent must be durable before they run.
//
// It returns nil, changing nothing, unless exactly one open run is touched
// and a poller waits for a task it makes ready.
func (x *txn) handOff() *handedOff {
	// A transaction that writes payload chunks hands nothing off: a task
	// referencing them would send its worker after chunks not stored yet.
	if len(x.runs) != 1 || !x.runs[0].st.Status.Open() || len(x.newChunks) > 0 {
		return nil
	}
	h := &handedOff{e: x.e, tr: x.runs[0]}
	x.handOffWFT(h)
	x.handOffActivities(h)
	if len(h.deadlines) == 0 {
		return nil
	}
	return h
}

// handOffWFT hands the run's workflow task over if it became ready in this
// transaction, its events are all at hand and a poller waits on its queue.
func (x *txn) handOffWFT(h *handedOff) {
	e, tr := x.e, h.tr
	st := tr.st
	if !st.WFT.Scheduled || st.WFT.Started || !wftReady(tr.outs) {
		return
	}
	sticky := st.WFT.StickyQueue != ""
	queue := st.TaskQueue
	if sticky {
		queue = st.WFT.StickyQueue
	}
	if e.wftQ.Waiting(queue) == 0 {
		return
	}
	first := int64(1)
	if sticky && st.WFT.SeenEventID > 0 {
		first = st.WFT.SeenEventID + 1
	}
	evs, ok := tr.eventsFrom(first)
	if !ok || first+int64(len(evs)) != st.NextEventID {
		return
	}
	seq, epoch := e.seq.Add(1), e.nextEpoch()
	task := e.workflowTask(st, epoch, first)
	task.Events = evs
	if !e.wftQ.Offer(queue, wftItem{ref: st.Ref(), seq: seq, task: task}) {
		return
	}
	// The state installed after the commit records the dispatch, exactly
	// as dispatchWFT would have right after it.
	e.m.WFTEnqueued(st, seq, sticky, x.now)
	h.deadlines = append(h.deadlines, e.m.WFTDispatched(st, epoch, x.now))
	h.wftNext = st.NextEventID
}

// handOffActivities hands over the Read activities this transaction
// scheduled whose queue has a waiting poller.
func (x *txn) handOffActivities(h *handedOff) {
	e, st := x.e, h.tr.st
	for _, out := range h.tr.outs {
		for _, id := range out.ActivitiesReady {
			a, ok := st.Activities[id]
			if !ok || a.State != api.ActivityStateScheduled || a.Effect != history.Read || a.Reconciling || a.Input == nil ||
				e.actQ.Waiting(a.Options.TaskQueue) == 0 {
				continue
			}
			epoch := e.nextEpoch()
			var lease []machine.Deadline
			e.actQ.OfferBuilt(a.Options.TaskQueue, func(identity string) (actItem, bool) {
				if e.upgrades(a) {
					// The waiting poller declared it: it is dispatched the
					// usual way, which applies the declaration first.
					return actItem{}, false
				}
				it := newActItem(st.Ref(), id, a)
				if !e.limits.admit(a.Options.TaskQueue, it) {
					return actItem{}, false // a limit holds it back: it is queued after the commit
				}
				out, err := e.m.ActivityDispatched(st, id, epoch, identity, x.now)
				if err != nil || len(out.Events) > 0 { // a Read attempt records nothing
					e.limits.unadmit(it)
					return actItem{}, false
				}
				task, err := e.activityTask(context.Background(), st, a, true) // the input is at hand: no read
				if err != nil {
					a.State, a.LeaseEpoch, a.LeaseDeadline = api.ActivityStateScheduled, 0, time.Time{}
					e.limits.unadmit(it)
					return actItem{}, false
				}
				e.limits.bind(it, epoch)
				lease = out.Deadlines
				it.task = task
				return it, true
			})
			if lease != nil {
				h.deadlines = append(h.deadlines, lease...)
				e.stats.actHandedOff.Add(1)
			}
		}
	}
}

// installed finishes a hand-off once its transaction is installed: the
// tasks' deadlines start and the event tail forgets what it handed out.
func (h *handedOff) installed() {
	entry := h.tr.entry // set by installRun for a run this transaction created
	for _, d := range h.deadlines {
		h.e.timers.Add(d.At, timerKey{ref: entry.ref, d: d})
	}
	if h.wftNext > 0 {
		entry.tail.dispatched(h.wftNext)
		h.e.stats.wftHandedOff.Add(1)
	}
}

func wftReady(outs []machine.Output) bool {
	for _, o := range outs {
		if o.WFTReady {
			return true
		}
	}
	return false
}

// eventsFrom returns the run's events from first to the end of this
// transaction: the installed run's event tail, then the new events.
func (tr *txnRun) eventsFrom(first int64) ([]history.Event, bool) {
	var evs []history.Event
	if first < tr.first {
		if tr.entry == nil {
			return nil, false
		}
		old, ok := tr.entry.tail.get(first, tr.first)
		if !ok {
			return nil, false
		}
		evs = old
	}
	skip := max(0, first-tr.first)
	if skip > int64(len(tr.events)) {
		return nil, false
	}
	return append(evs, tr.events[skip:]...), true
}

// install makes committed states current and acts on their outputs.
func (x *txn) install() {
	e := x.e
	for _, tr := range x.runs {
		e.installRun(tr)
	}
}
