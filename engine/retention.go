package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Retention: a closed run is kept for its retention (its start's
// StartWorkflowRequest.Retention, else Options.Retention), then the sweep
// deletes it — its events (history.Batch.DeleteRuns), its run state, its
// list entries, its occurrence counters, its current-run pointer when it
// is still the current run — in one store transaction per run. What it
// leaves: the effects ledger and its indexes (SpaceLedger, the "e" and
// "x" families of SpaceIndex) and the usage ledger (SpaceUsage), which
// outlive runs on purpose: a workflow id started again after its runs
// were deleted is still answered from its ledger, so a payment made by a
// deleted run is not made a second time. Nothing deletes them.
//
// The expiry index (family "r" of SpaceIndex): when a run closes, the
// transaction that closes it puts "r" ‖ expiry ‖ workflow id ‖ run id, so
// a sweep reads only what has expired, oldest first. A run made by a
// reset or a fork (BaseRef.Sources) reads its first events from its base
// run's stored events: the base index (family "b": "b" ‖ base workflow ‖
// base run ‖ workflow ‖ run, put when such a run is created, deleted
// with it) names the runs that read a base, and a base named there is not
// deleted — the sweep moves its expiry one RetentionRetry later, and
// DeleteWorkflow refuses it — until the runs made from it are deleted.

// DefaultRetentionSweepInterval is Options.RetentionSweepInterval's default.
const DefaultRetentionSweepInterval = time.Minute

// RetentionRetry is how much later the sweep looks again at an expired run
// it could not delete yet (a base a kept reset or fork reads from, or a
// delete that failed).
const RetentionRetry = 24 * time.Hour

// retentionSweepBatch bounds the runs one sweep round reads and deletes;
// a sweep runs rounds until nothing expired is left.
const retentionSweepBatch = 256

func expiryKey(at time.Time, ref history.RunRef) []byte {
	return history.Key().Str("r").Int(at.UnixNano()).Str(ref.WorkflowID).Str(ref.RunID).Bytes()
}

// deletedKey is a deleted run's tombstone (family "d" of SpaceIndex, value
// the deletion time in unix nanos), written when its workflow id has
// effects-ledger entries: the ledger may still name the run, and `cairn
// check` tells a deleted run from a lost one by it. It is kept as long as
// the ledger (forever).
func deletedKey(ref history.RunRef) []byte {
	return history.Key().Str("d").Str(ref.WorkflowID).Str(ref.RunID).Bytes()
}

func baseIndexKey(base, run history.RunRef) []byte {
	return history.Key().Str("b").Str(base.WorkflowID).Str(base.RunID).Str(run.WorkflowID).Str(run.RunID).Bytes()
}

func baseIndexPrefix(base history.RunRef) []byte {
	return history.Key().Str("b").Str(base.WorkflowID).Str(base.RunID).Bytes()
}

// retention returns how long a closed run is kept (≤ 0: until deleted by
// hand).
func (e *Engine) retention(st *machine.RunState) time.Duration {
	if st.Retention != 0 {
		return st.Retention
	}
	return e.opts.Retention
}

// lastExpiry is the latest expiry an expiry record's key can hold (unix
// nanoseconds: 2262); a run that expires later is kept until deleted by
// hand.
var lastExpiry = time.Unix(0, math.MaxInt64)

// expiry returns when a closed run expires, and false when it never does.
func (e *Engine) expiry(st *machine.RunState) (time.Time, bool) {
	r := e.retention(st)
	if r <= 0 || st.Status.Open() {
		return time.Time{}, false
	}
	at := st.CloseTime.Add(r)
	if at.After(lastExpiry) {
		return time.Time{}, false
	}
	return at, true
}

// sourceRuns returns the runs whose stored events a run's history reads
// (a reset's or a fork's base, and the bases' bases).
func sourceRuns(st *machine.RunState) []history.RunRef {
	if st.Base == nil {
		return nil
	}
	var refs []history.RunRef
	seen := map[history.RunRef]bool{}
	for _, s := range st.Base.Sources {
		ref := history.RunRef{WorkflowID: s.WorkflowID, RunID: s.RunID}
		if ref != st.Ref() && !seen[ref] {
			seen[ref] = true
			refs = append(refs, ref)
		}
	}
	return refs
}

// retentionRecords adds to x the records retention keeps for tr: the base
// index entries of a new run made from others' events, and the expiry of
// a run that closes.
func (x *txn) retentionRecords(tr *txnRun) {
	st := tr.st
	if tr.created {
		for _, base := range sourceRuns(st) {
			x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceIndex, Key: baseIndexKey(base, st.Ref())})
		}
	}
	closes := !st.Status.Open() && (tr.before == nil || tr.before.Status.Open())
	if !closes {
		return
	}
	if at, ok := x.e.expiry(st); ok {
		x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceIndex, Key: expiryKey(at, st.Ref())})
	}
}

// DeleteWorkflow implements api.Service.
func (e *Engine) DeleteWorkflow(ctx context.Context, req *api.DeleteWorkflowRequest) (*api.DeleteWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if req.WorkflowID == "" {
		return nil, api.Errorf(api.ErrInvalidArgument, "DeleteWorkflow: workflow id is required")
	}
	resp := &api.DeleteWorkflowResponse{}
	if req.Force {
		err := e.onOpenRun(ctx, req.WorkflowID, req.RunID, true, func(x *txn, tr *txnRun) (machine.Output, error) {
			reason := req.Reason
			if reason == "" {
				reason = "deleted"
			}
			return e.m.Terminate(tr.st, reason, history.Payload{}, req.Identity, x.now)
		})
		switch {
		case err == nil:
			resp.Terminated = true
		case !errors.Is(err, api.ErrWorkflowClosed):
			return nil, err
		}
	}
	runID, err := e.deleteRun(ctx, req.WorkflowID, req.RunID, nil)
	if err != nil {
		return nil, err
	}
	resp.RunID = runID
	e.log.Info().Str("workflow_id", req.WorkflowID).Str("run_id", runID).Str("identity", req.Identity).
		Bool("terminated", resp.Terminated).Msg("workflow run deleted")
	return resp, nil
}

// errBaseKept: the run is the base of a kept reset or fork.
var errBaseKept = errors.New("a reset or fork still reads its history")

// errChainOpen: the run continued as new into the run still open. That
// run's input may carry references the engine cannot see (an agent's
// Carry.Tip, sdk/agent/carry.go: a transcript chunk's hash inside the
// input's bytes), which only this run's events reference as chunks until
// the open run extends them: deleting it would let the chunk collection
// take the open run's conversation.
var errChainOpen = errors.New("it continued as new into the run still open, whose input may carry its payload chunks")

// errParentNotTold: the run is a child whose parent, on another server of
// the cluster, has not been told yet that it closed (its outbox record,
// crossshard.go): the notice reads the child's outcome from its run
// state, so deleting the run would leave the parent waiting forever.
var errParentNotTold = errors.New("its parent (on another server) has not been told yet that it closed")

// deleteRun deletes a closed run (runID "": the current run) and returns
// its run id. expired, when set, is the expiry record the sweep found,
// deleted with the run.
func (e *Engine) deleteRun(ctx context.Context, workflowID, runID string, expired []byte) (string, error) {
	var deleted *machine.RunState
	err := e.transact(ctx, []string{workflowID}, func(x *txn) error {
		st, entry, err := e.loadState(ctx, workflowID, runID)
		if err != nil {
			return err
		}
		if entry != nil || st.Status.Open() {
			return api.Errorf(api.ErrFailedPrecondition, "workflow %q run %q is open: terminate it first (or delete with force)", workflowID, st.RunID)
		}
		if cur := e.openRun(workflowID); st.Status == api.StatusContinuedAsNew && cur != nil && cur.ref.RunID == st.ContinuedAsNewRunID {
			return fmt.Errorf("%w: workflow %q run %q: %w (run %q): close that first",
				api.ErrFailedPrecondition, workflowID, st.RunID, errChainOpen, cur.ref.RunID)
		}
		ref := st.Ref()
		switch _, err := e.store.Get(ctx, history.SpaceIndex, outboxKey(ref)); {
		case err == nil:
			return fmt.Errorf("%w: workflow %q run %q: %w: try again later", api.ErrFailedPrecondition, workflowID, st.RunID, errParentNotTold)
		case !errors.Is(err, history.ErrNotFound):
			return storeErr(err)
		}
		users, err := e.store.Scan(ctx, history.SpaceIndex, history.ScanOptions{Prefix: baseIndexPrefix(ref), Limit: 1})
		if err != nil {
			return storeErr(err)
		}
		if len(users) > 0 {
			kr := history.ReadKey(users[0].Key[len(baseIndexPrefix(ref)):])
			return fmt.Errorf("%w: workflow %q run %q: %w (workflow %q run %q): delete that first",
				api.ErrFailedPrecondition, workflowID, st.RunID, errBaseKept, kr.Str(), kr.Str())
		}
		if err := e.deleteBatch(ctx, x, st, expired); err != nil {
			return err
		}
		deleted = st
		return nil
	})
	if err != nil {
		return "", err
	}
	if cached, ok := e.recent.Get(workflowID); ok && cached.RunID == deleted.RunID {
		e.recent.Remove(workflowID)
	}
	e.stats.runsDeleted.Add(1)
	return deleted.RunID, nil
}

// deleteBatch adds to x everything of st's run that a delete removes.
func (e *Engine) deleteBatch(ctx context.Context, x *txn, st *machine.RunState, expired []byte) error {
	ref := st.Ref()
	del := func(sp history.Space, key []byte) {
		for _, d := range x.batch.Deletes {
			if d.Space == sp && string(d.Key) == string(key) {
				return
			}
		}
		x.batch.Deletes = append(x.batch.Deletes, history.RecordKey{Space: sp, Key: key})
	}
	x.batch.DeleteRuns = append(x.batch.DeleteRuns, ref)
	// The tombstone only where the ledger may name the run: a workflow id
	// with ledger entries (a run without keyed actions leaves nothing).
	ledger, err := e.store.Scan(ctx, history.SpaceLedger, history.ScanOptions{Prefix: history.Key().Str(ref.WorkflowID).Bytes(), Limit: 1})
	if err != nil {
		return storeErr(err)
	}
	if len(ledger) > 0 {
		x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceIndex, Key: deletedKey(ref),
			Value: history.Key().Int(x.now.UnixNano()).Bytes()})
	}
	del(history.SpaceRunState, stateKey(ref))
	del(history.SpaceIndex, indexAllKey(st))
	del(history.SpaceIndex, indexStatusKey(st.Status, st))
	del(history.SpaceIndex, indexStatusKey(st.EffectiveStatus(), st))
	if at, ok := e.expiry(st); ok {
		del(history.SpaceIndex, expiryKey(at, ref))
	}
	if expired != nil {
		del(history.SpaceIndex, expired)
	}
	for _, base := range sourceRuns(st) {
		del(history.SpaceIndex, baseIndexKey(base, ref))
	}
	counters, err := e.store.Scan(ctx, history.SpaceIndex, history.ScanOptions{Prefix: history.Key().Str("n").Str(ref.WorkflowID).Str(ref.RunID).Bytes()})
	if err != nil {
		return storeErr(err)
	}
	for _, r := range counters {
		del(history.SpaceIndex, r.Key)
	}
	cur, err := e.store.Get(ctx, history.SpaceCurrentRun, curKey(ref.WorkflowID))
	switch {
	case err == nil && string(cur) == ref.RunID:
		del(history.SpaceCurrentRun, curKey(ref.WorkflowID))
	case err != nil && !errors.Is(err, history.ErrNotFound):
		return storeErr(err)
	}
	return nil
}

// SweepReport is what one retention sweep did.
type SweepReport struct {
	// Deleted runs, and Postponed ones (bases a kept run still reads).
	Deleted, Postponed int
	// Skipped: expired runs another server of the cluster serves, or
	// whose expiry record could not be moved (tried again by the next
	// sweep).
	Skipped int
	// ChunksDeleted: payload chunks no kept run references any more
	// (CollectChunks, run after a sweep that deleted runs, at most once
	// per ChunkCollectInterval).
	ChunksDeleted int
	Took          time.Duration
	// Failed: expired runs whose delete failed (a store error; a run too
	// long to delete in one store transaction: history.ErrTooLarge). Each
	// is logged, counted (cairn_retention_delete_failures_total) and
	// tried again RetentionRetry later, not at every sweep.
	Failed int
}

// ChunkCollectInterval is how often at most a sweep collects payload
// chunks (CollectChunks reads every stored history).
const ChunkCollectInterval = time.Hour

// collectChunksAfterSweep runs CollectChunks when the store holds chunks,
// the engine serves every shard and the last collection is old enough.
func (e *Engine) collectChunksAfterSweep(ctx context.Context, now time.Time, rep *SweepReport) {
	if e.opts.Shards != nil || now.Sub(e.lastChunkCollect) < ChunkCollectInterval && !e.lastChunkCollect.IsZero() {
		return
	}
	if stored, err := e.store.Scan(ctx, history.SpaceChunk, history.ScanOptions{Limit: 1}); err != nil || len(stored) == 0 {
		return
	}
	e.lastChunkCollect = now
	cr, err := e.CollectChunks(ctx)
	rep.ChunksDeleted = cr.Deleted
	if err != nil {
		e.log.Warn().Err(err).Msg("retention: collect payload chunks")
	}
}

// SweepRetention deletes every closed run whose retention has passed (by
// the engine's clock), in bounded rounds, and returns what it did. The
// engine runs it every Options.RetentionSweepInterval; tests and
// benchmarks call it directly. In a cluster, each server deletes only the
// runs of the shards it serves.
func (e *Engine) SweepRetention(ctx context.Context) (SweepReport, error) {
	if err := e.enter(); err != nil {
		return SweepReport{}, err
	}
	defer e.leave()
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	start := time.Now()
	var rep SweepReport
	now := e.now()
	var after []byte
	for {
		recs, err := e.store.Scan(ctx, history.SpaceIndex, history.ScanOptions{
			Prefix: history.Key().Str("r").Bytes(), After: after, Limit: retentionSweepBatch})
		if err != nil {
			return rep, storeErr(err)
		}
		done := len(recs) < retentionSweepBatch
		var due []expired
		for _, r := range recs {
			after = r.Key
			kr := history.ReadKey(r.Key)
			_ = kr.Str()
			at := time.Unix(0, kr.Int())
			ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
			if kr.Err() != nil {
				rep.Skipped++
				continue
			}
			if at.After(now) {
				done = true
				break
			}
			due = append(due, expired{ref: ref, key: r.Key})
		}
		e.sweepRound(ctx, due, now, &rep)
		if done || ctx.Err() != nil {
			break
		}
	}
	if rep.Deleted > 0 {
		e.collectChunksAfterSweep(ctx, now, &rep)
	}
	if r, ok := e.store.(history.Reclaimer); ok && rep.Deleted > 0 && ctx.Err() == nil {
		if err := r.Reclaim(ctx); err != nil {
			e.log.Warn().Err(err).Msg("retention: reclaim the store's space")
		}
	}
	rep.Took = time.Since(start)
	e.stats.sweeps.Add(1)
	ev := e.log.Info()
	if rep.Deleted == 0 && rep.Postponed == 0 && rep.Skipped == 0 {
		ev = e.log.Debug()
	}
	ev.Int("deleted", rep.Deleted).Int("postponed", rep.Postponed).Int("skipped", rep.Skipped).Int("chunks_deleted", rep.ChunksDeleted).
		Dur("took", rep.Took).Msg("retention sweep")
	return rep, ctx.Err()
}

// expired is an expiry record due.
type expired struct {
	ref history.RunRef
	key []byte
}

// sweepDeleters is how many runs a sweep deletes at once: each delete is
// its own transaction, and concurrent ones share group commits.
const sweepDeleters = 16

// sweepRound deletes (or postpones) the runs of one round, sweepDeleters
// at a time.
func (e *Engine) sweepRound(ctx context.Context, due []expired, now time.Time, rep *SweepReport) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan expired)
	for range min(sweepDeleters, len(due)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range next {
				var one SweepReport
				e.sweepOne(ctx, d.ref, d.key, now, &one)
				mu.Lock()
				rep.Deleted += one.Deleted
				rep.Postponed += one.Postponed
				rep.Skipped += one.Skipped
				rep.Failed += one.Failed
				mu.Unlock()
			}
		}()
	}
	for _, d := range due {
		next <- d
	}
	close(next)
	wg.Wait()
}

// sweepOne deletes one expired run, or postpones it.
func (e *Engine) sweepOne(ctx context.Context, ref history.RunRef, key []byte, now time.Time, rep *SweepReport) {
	if e.shards.check(ref.WorkflowID) != nil {
		rep.Skipped++
		return
	}
	_, err := e.deleteRun(ctx, ref.WorkflowID, ref.RunID, key)
	switch {
	case err == nil:
		rep.Deleted++
	case errors.Is(err, errBaseKept), errors.Is(err, errChainOpen), errors.Is(err, errParentNotTold):
		if e.postpone(ctx, ref, key, now) == nil {
			rep.Postponed++
		} else {
			rep.Skipped++
		}
	case errors.Is(err, api.ErrNotFound):
		// Deleted by hand, or under another expiry: drop the record.
		if e.commitFenced(ctx, &history.Batch{Deletes: []history.RecordKey{{Space: history.SpaceIndex, Key: key}}},
			map[string]bool{ref.WorkflowID: true}) != nil {
			rep.Skipped++
		}
	default:
		e.log.Warn().Err(err).Str("workflow_id", ref.WorkflowID).Str("run_id", ref.RunID).
			Dur("retry_in", RetentionRetry).Msg("retention: delete failed")
		e.stats.retentionFailures.Add(1)
		rep.Failed++
		if e.postpone(ctx, ref, key, now) != nil {
			rep.Skipped++
		}
	}
}

// postpone moves an expiry record RetentionRetry later.
func (e *Engine) postpone(ctx context.Context, ref history.RunRef, key []byte, now time.Time) error {
	b := &history.Batch{
		Deletes: []history.RecordKey{{Space: history.SpaceIndex, Key: key}},
		Puts:    []history.Record{{Space: history.SpaceIndex, Key: expiryKey(now.Add(RetentionRetry), ref)}},
	}
	return e.commitFenced(ctx, b, map[string]bool{ref.WorkflowID: true})
}

// sweepLoop runs SweepRetention every Options.RetentionSweepInterval on the
// engine's clock until Close.
func (e *Engine) sweepLoop() {
	defer e.bg.Done()
	tick := make(chan struct{}, 1)
	for {
		t := e.clk.AfterFunc(e.opts.RetentionSweepInterval, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
		select {
		case <-e.stop:
			t.Stop()
			return
		case <-tick:
		}
		if _, err := e.SweepRetention(context.Background()); err != nil && !errors.Is(err, ErrClosed) {
			e.log.Warn().Err(err).Msg("retention sweep failed")
		}
	}
}
