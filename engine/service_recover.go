package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Stats are the engine's counters, for metrics and benchmarks.
type Stats struct {
	commits       atomic.Int64
	wftDispatched atomic.Int64
	actDispatched atomic.Int64
	actCompleted  atomic.Int64
	timersFired   atomic.Int64
	wftHandedOff  atomic.Int64
	actHandedOff  atomic.Int64
	// lateReports counts the judged late reports recorded since Open, by
	// verdict (api.EffectVerdict); bootDuplicates and bootPossible are the
	// (possible) duplicates the ledger held when the engine opened.
	lateReports    [5]atomic.Int64
	bootDuplicates int64
	bootPossible   int64
	// inDoubt counts the actions put in doubt after a recovery of the
	// store (doubt.go).
	inDoubt atomic.Int64
	// runsDeleted counts the runs deleted (by hand and by the retention
	// sweep), sweeps the retention sweeps run.
	runsDeleted atomic.Int64
	sweeps      atomic.Int64
	// retentionFailures counts the expired runs whose delete failed.
	retentionFailures atomic.Int64
}

// StatsSnapshot is a copy of the counters.
type StatsSnapshot struct {
	Commits            int64
	WorkflowTasks      int64
	ActivityTasks      int64
	ActivityCompletion int64
	TimersFired        int64
	OpenRuns           int
	PendingTimers      int
	// WorkflowTasksHandedOff counts the workflow tasks given to a waiting
	// poller while the transaction that scheduled them was being made
	// durable (included in WorkflowTasks).
	WorkflowTasksHandedOff int64
	// ActivityTasksHandedOff counts the Read activity attempts handed over
	// the same way (included in ActivityTasks).
	ActivityTasksHandedOff int64
	// CorruptRuns counts the quarantined runs: runs whose stored data was
	// found damaged, which are not served (see quarantine.go).
	CorruptRuns int
	// DuplicateEffects and PossibleDuplicateEffects count every late report
	// ever judged a duplicate / a possible duplicate (the ledger's, read
	// when the engine opened, plus those since). EffectConfirmations and
	// EffectConflicts count the confirmations and conflicts recorded since
	// the engine opened.
	DuplicateEffects         int64
	PossibleDuplicateEffects int64
	EffectConfirmations      int64
	EffectConflicts          int64
	// EffectsInDoubt counts the SideEffect actions put in doubt when the
	// engine opened over a recovered store (a restore, an accepted data
	// loss: doubt.go).
	EffectsInDoubt int64
	// RunsDeleted counts the closed runs deleted since the engine opened
	// (DeleteWorkflow and the retention sweep); RetentionSweeps the
	// sweeps run.
	RunsDeleted     int64
	RetentionSweeps int64
	// RetentionFailures counts the expired runs whose delete failed (each
	// is tried again RetentionRetry later; the log line names it).
	RetentionFailures int64
}

// Stats returns the engine's counters.
func (e *Engine) Stats() StatsSnapshot {
	e.mu.RLock()
	open := len(e.open)
	e.mu.RUnlock()
	return StatsSnapshot{
		Commits: e.stats.commits.Load(), WorkflowTasks: e.stats.wftDispatched.Load(), ActivityTasks: e.stats.actDispatched.Load(),
		ActivityCompletion: e.stats.actCompleted.Load(), TimersFired: e.stats.timersFired.Load(), OpenRuns: open,
		PendingTimers: e.timers.Len(), WorkflowTasksHandedOff: e.stats.wftHandedOff.Load(),
		ActivityTasksHandedOff: e.stats.actHandedOff.Load(), CorruptRuns: e.CorruptRuns(),
		DuplicateEffects:         e.stats.bootDuplicates + e.stats.lateReports[api.VerdictDuplicate].Load(),
		PossibleDuplicateEffects: e.stats.bootPossible + e.stats.lateReports[api.VerdictPossibleDuplicate].Load(),
		EffectConfirmations:      e.stats.lateReports[api.VerdictConfirmation].Load(),
		EffectConflicts:          e.stats.lateReports[api.VerdictConflict].Load(),
		EffectsInDoubt:           e.stats.inDoubt.Load(),
		RunsDeleted:              e.stats.runsDeleted.Load(),
		RetentionSweeps:          e.stats.sweeps.Load(),
		RetentionFailures:        e.stats.retentionFailures.Load(),
	}
}

// QueueDepths returns how many tasks wait on a task queue, and how many
// pollers wait for them.
func (e *Engine) QueueDepths(queue string) (workflowTasks, activityTasks, workflowPollers, activityPollers int) {
	return e.wftQ.Len(queue), e.actQ.Len(queue), e.wftQ.Waiting(queue), e.actQ.Waiting(queue)
}

// onTimer is called by the timer queue for each due deadline. Each is
// handled in its own goroutine so that one slow commit does not hold up
// other runs' timers.
func (e *Engine) onTimer(k timerKey) {
	if e.closed.Load() {
		return
	}
	if k.ref.RunID == scheduleRunID {
		e.background(func() { e.fireSchedule(k.ref.WorkflowID) })
		return
	}
	e.background(func() { e.fire(k) })
}

// background runs fn in its own goroutine as background work: Close waits
// for it, and Settle for it to finish.
func (e *Engine) background(fn func()) {
	e.bg.Add(1)
	e.firing.Add(1)
	go func() {
		defer e.bg.Done()
		defer e.fireDone()
		fn()
	}()
}

func (e *Engine) fire(k timerKey) {
	ctx := context.Background()
	ids := []string{k.ref.WorkflowID}
	if p := e.parentOf(k.ref.WorkflowID); p != nil {
		ids = append(ids, p.WorkflowID)
	}
	err := e.transact(ctx, ids, func(x *txn) error {
		entry := e.openRun(k.ref.WorkflowID)
		if entry == nil || entry.ref != k.ref {
			return nil
		}
		st := entry.state.Clone()
		out := e.m.Fire(st, k.d, x.now)
		if !fireDurable(entry.state, st, out) {
			// Nothing durable changed (a stale or renewed deadline, a sticky
			// fallback, a backoff ending): act in memory only.
			e.installRun(&txnRun{st: st, entry: entry, outs: []machine.Output{out}})
			return nil
		}
		e.stats.timersFired.Add(1)
		tr := x.run(entry, entry.state, st)
		return x.apply(ctx, tr, out)
	})
	// A deadline is dropped only when its run is not this engine's to
	// move any more (its shard moved on: the owner armed it again when it
	// loaded the run) or the engine closes. A store that is down (a
	// database restarting, a run that cannot be read back yet) is waited
	// for: dropping the deadline would leave its run waiting forever.
	if err != nil && !errors.Is(err, api.ErrNotOwner) && !e.closed.Load() {
		e.log.Error().Err(err).Str("workflow", k.ref.WorkflowID).Str("run", k.ref.RunID).Msg("timer not applied; retrying")
		e.timers.Add(e.now().Add(retryDelay), k)
	}
}

// fireDurable reports whether a fired deadline changed what must survive a
// restart: new events, a dispatch, a close, an activity attempt moved to its
// retry backoff (the attempt count and backoff must not be forgotten), or a
// workflow task attempt counted.
func fireDurable(before, st *machine.RunState, out machine.Output) bool {
	if len(out.Events) > 0 || len(out.ActivitiesReady) > 0 || out.Closed || st.WFT.Attempt != before.WFT.Attempt {
		return true
	}
	for _, d := range out.Deadlines {
		if d.Kind == machine.DeadlineActivityRetry {
			return true
		}
	}
	return false
}

// recover rebuilds the in-memory view from the store: a new boot
// generation for epochs, every open run, its deadlines, and its ready
// workflow and activity tasks. Leases that were out when the process died
// keep their deadlines and expire; timers that came due fire at once.
//
// A store recovered from a loss or a backup (a doubt mark) has the side
// effects of its open runs put in doubt first (doubt.go).
//
// A run whose stored data is damaged is quarantined (quarantine.go), not a
// reason to serve nothing: its state record fails its checksum or does not
// decode, or its history does not end where its state says. Only damage
// the engine cannot pin on one run (the boot record), and store errors
// other than damage, fail Open.
func (e *Engine) recover(ctx context.Context) error {
	if err := e.bumpBoot(ctx); err != nil {
		return err
	}
	if err := e.countDuplicates(ctx); err != nil {
		return err
	}
	if err := e.loadDeclarations(ctx); err != nil {
		return err
	}
	if err := e.loadLimits(ctx); err != nil {
		return err
	}
	if err := e.loadQuarantine(ctx); err != nil {
		return fmt.Errorf("engine: recover: %w", err)
	}
	// Every open run of the store, of every shard: after a restore the
	// servers of a cluster are stopped and the first to start settles it
	// (docs/reliability.md).
	if err := e.settleDoubt(ctx); err != nil {
		return err
	}
	if e.shards != nil {
		return nil // the runs of each shard are loaded when it is acquired (Acquire)
	}
	err := e.scanIndex(ctx, history.Key().Str("o").Bytes(), func(r history.Record, bad error) error {
		return e.recoverRun(ctx, r.Key)
	})
	if err != nil {
		return fmt.Errorf("engine: recover: %w", err)
	}
	return nil
}

// recoverRun loads one open run (the open-run index names it by its key:
// the index entry itself holds nothing).
func (e *Engine) recoverRun(ctx context.Context, key []byte) error {
	kr := history.ReadKey(key)
	_ = kr.Str()
	ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
	if kr.Err() != nil {
		// The key names no run: nothing to quarantine, and nothing to serve.
		e.log.Error().Hex("key", key).Msg("DATA CORRUPT: an open-run index key is damaged; the run it named cannot be found")
		return nil
	}
	if e.corrupt.lookup(ref.WorkflowID, ref.RunID) != nil {
		return nil
	}
	st, err := e.recoverState(ctx, ref)
	if err != nil {
		var d *runDamage
		if errors.As(err, &d) {
			e.quarantineLocked(ref, true, d.err.Error())
			return nil
		}
		return err
	}
	if !st.Status.Open() {
		return nil
	}
	entry := &runEntry{ref: ref, parent: st.Parent, changed: make(chan struct{})}
	e.mu.Lock() // Acquire loads runs while the engine serves others
	e.open[ref.WorkflowID] = entry
	e.mu.Unlock()
	e.adopt(entry, st)
	e.recoverOrphan(st)
	return nil
}

// adopt makes st, just read from the store, the open run's state in memory,
// as a restart does: what lived in memory only (dispatched workflow tasks,
// Read activities' leases, sticky caches) is forgotten and dispatched
// again; deadlines are armed and ready tasks queued. Stale queue entries
// and deadlines left from before are ignored when they come up. Call it
// with the run's lock held (or during Open).
func (e *Engine) adopt(entry *runEntry, st *machine.RunState) {
	st.WFT.StickyQueue, st.WFT.SeenEventID = "", 0 // caches are not trusted across a restart
	e.m.Recovered(st, e.now())                     // heartbeats lived in memory: a fresh window
	entry.state = st
	entry.tail.reset(st.NextEventID) // only events from now on are cached
	for _, d := range e.m.Deadlines(st) {
		e.timers.Add(d.At, timerKey{ref: entry.ref, d: d})
	}
	if st.WFT.Scheduled && !st.WFT.BackoffUntil.After(e.now()) {
		e.enqueueWFT(entry, st)
	}
	e.limits.adopt(entry.ref, st) // attempts still leased hold their slots
	for _, id := range sortedKeys(st.Activities) {
		if a := st.Activities[id]; a.State == api.ActivityStateScheduled {
			e.actQ.Push(a.Options.TaskQueue, newActItem(entry.ref, id, a))
		}
	}
}

// recoverState reads an open run's state and checks that its history ends
// where the state says: a history that is shorter (events lost) or longer
// (the state rolled back) is damage. Errors that are damage are *runDamage.
func (e *Engine) recoverState(ctx context.Context, ref history.RunRef) (*machine.RunState, error) {
	b, err := e.store.Get(ctx, history.SpaceRunState, stateKey(ref))
	if errors.Is(err, history.ErrNotFound) {
		err = &history.CorruptError{Space: history.SpaceRunState, Key: stateKey(ref), Reason: "the open-run index names this run but its state record is missing"}
	}
	if err != nil {
		return nil, damaged(ref, true, fmt.Errorf("engine: recover %q/%q: %w", ref.WorkflowID, ref.RunID, storeErr(err)))
	}
	st, err := decodeState(b)
	if err != nil {
		return nil, damaged(ref, true, fmt.Errorf("engine: recover %q/%q: %w", ref.WorkflowID, ref.RunID, err))
	}
	if !st.Status.Open() {
		return st, nil
	}
	last, err := e.store.LastEventID(ctx, ref)
	if err != nil {
		return nil, damaged(ref, true, fmt.Errorf("engine: recover %q/%q: %w", ref.WorkflowID, ref.RunID, storeErr(err)))
	}
	// A reset's or a fork's own events are stored numbered from 1 at its
	// point (machine.RunState.StoredOffset).
	if last += st.StoredOffset(); last != st.NextEventID-1 {
		return nil, damaged(ref, true, &history.CorruptError{Run: ref, EventID: min(last+1, st.NextEventID),
			Reason: fmt.Sprintf("the run's history ends at event %d but its state records %d events", last, st.NextEventID-1)})
	}
	return st, nil
}

// recoverOrphan applies the parent-close policy to a child whose parent
// closed while the engine was down between the two transactions.
func (e *Engine) recoverOrphan(st *machine.RunState) {
	p := st.Parent
	if p == nil || p.ParentClosePolicy == history.ParentCloseAbandon {
		return
	}
	e.background(func() {
		ctx := context.Background()
		pst, err := e.parentState(ctx, p)
		if err != nil || pst.Status.Open() {
			return
		}
		e.applyParentClose(ctx, pst, machine.ChildInfo{WorkflowID: st.WorkflowID, RunID: st.RunID, ParentClosePolicy: p.ParentClosePolicy})
	})
}

// bumpBoot persists a new boot generation; epochs carry it so that a lease
// or task token from before a restart never matches one issued after.
//
// Engines sharing a store (Options.Shards) take generations with a
// compare-and-set, so no two of them ever issue the same epoch.
func (e *Engine) bumpBoot(ctx context.Context) error {
	var err error
	for range 100 {
		if err = e.tryBumpBoot(ctx); !errors.Is(err, history.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("engine: write boot generation: %w", storeErr(err))
}

func (e *Engine) tryBumpBoot(ctx context.Context) error {
	var gen int64
	b, err := e.store.Get(ctx, history.SpaceMeta, bootKey)
	switch {
	case err == nil && len(b) == 8:
		gen = int64(binary.BigEndian.Uint64(b))
	case err != nil && !errors.Is(err, history.ErrNotFound):
		return fmt.Errorf("engine: read boot generation: %w", storeErr(err))
	}
	gen++
	e.bootGen = gen
	cond := history.Condition{Space: history.SpaceMeta, Key: bootKey, Exists: err == nil, Value: b}
	err = e.storeCommit(ctx, &history.Batch{Conditions: []history.Condition{cond}, Puts: []history.Record{e.bootRecord()}})
	if errors.Is(err, history.ErrConflict) {
		return err // another engine took it: read again
	}
	if errors.Is(err, history.ErrNoSpace) {
		// A full disk must not keep the engine from serving reads: every
		// write fails until space returns anyway, and the first one that
		// succeeds writes the generation with it (commit).
		e.bootPending.Store(true)
		e.log.Warn().Err(err).Int64("boot", gen).Msg("disk full: the boot generation will be written with the first commit")
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: write boot generation: %w", storeErr(err))
	}
	return nil
}

// bootRecord is the record of the current boot generation.
func (e *Engine) bootRecord() history.Record {
	return history.Record{Space: history.SpaceMeta, Key: bootKey, Value: binary.BigEndian.AppendUint64(nil, uint64(e.bootGen))}
}

// commit commits b, adding the boot generation while it is still to be
// written (bumpBoot on a full disk).
func (e *Engine) commit(ctx context.Context, b *history.Batch) error {
	return e.commitAs(ctx, "", b)
}

// commitAs is commit under the crash points of name (storeCommitAs).
func (e *Engine) commitAs(ctx context.Context, name string, b *history.Batch) error {
	if !e.bootPending.Load() {
		return e.storeCommitAs(ctx, name, b)
	}
	withBoot := *b
	withBoot.Puts = append(slices.Clip(b.Puts), e.bootRecord())
	err := e.storeCommitAs(ctx, name, &withBoot)
	if err == nil {
		e.bootPending.Store(false)
	}
	return err
}

// parentState reads a child's parent run: here, or from the server that
// serves it.
func (e *Engine) parentState(ctx context.Context, p *machine.ParentRef) (*machine.RunState, error) {
	if !e.Serves(p.WorkflowID) && e.remote != nil {
		d, err := e.remote.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: p.WorkflowID, RunID: p.RunID})
		if err != nil {
			return nil, err
		}
		return &machine.RunState{WorkflowID: d.Info.WorkflowID, RunID: d.Info.RunID, Status: d.Info.Status}, nil
	}
	unlock := e.lock(p.WorkflowID)
	defer unlock()
	st, _, err := e.loadState(ctx, p.WorkflowID, p.RunID)
	return st, err
}
