package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Quarantine: one damaged run never takes the others down.
//
// A run whose stored data is found damaged — its state record, an event of
// its history, an effects-ledger entry it consults, or a history that ends
// elsewhere than its state says — is quarantined: it leaves the open runs
// (its tasks, timers and leases go stale), every write to it fails with
// api.ErrDataCorrupt, its readers get that error instead of a shorter or
// rolled-back past, and list and describe show it with WorkflowInfo.Corrupt
// saying what was found. Every other run is served as before.
//
// Damage is recognised by history.ErrCorrupt, which the store returns for a
// record that fails its checksum or cannot be decoded (and the engine for a
// history shorter than its run state). Other store errors (I/O, a full
// disk) are not damage: they fail the call and quarantine nothing.
//
// The quarantine is durable: a record in the index space ("q"/workflow/run)
// names each quarantined run, so it stays quarantined after a restart even
// when what was damaged is not read again at Open. Writing that record is
// best effort (the store may be what is failing); the run is quarantined in
// memory either way, and the damage is found again after a restart.

// corruptRun is one quarantined run.
type corruptRun struct {
	ref    history.RunRef // RunID "" when the damaged record is the workflow id's current-run pointer
	reason string
	since  time.Time
	// current: the run is (or may be) its workflow id's current run, so a
	// call naming only the workflow id is refused too.
	current bool
	// state is the run's last known good state (nil when the state record
	// is what was damaged), for list and describe only.
	state *machine.RunState
}

// quarantineRecord is what the store keeps about a quarantined run.
type quarantineRecord struct {
	Reason  string
	Since   time.Time
	Current bool
}

// quarantine is the set of quarantined runs.
type quarantine struct {
	n    atomic.Int64 // len(runs): the fast path of every check
	mu   sync.RWMutex
	runs map[string]map[string]*corruptRun // workflow id → run id → run
}

func indexQuarantineKey(r history.RunRef) []byte {
	return history.Key().Str("q").Str(r.WorkflowID).Str(r.RunID).Bytes()
}

// lookup returns the quarantined run named by (workflowID, runID); runID ""
// names the workflow id's current run.
func (q *quarantine) lookup(workflowID, runID string) *corruptRun {
	if q.n.Load() == 0 {
		return nil
	}
	q.mu.RLock()
	defer q.mu.RUnlock()
	runs := q.runs[workflowID]
	if runID != "" {
		return runs[runID]
	}
	for _, c := range runs {
		if c.current {
			return c
		}
	}
	return nil
}

// add records c unless its run is quarantined already; it reports whether
// c was added.
func (q *quarantine) add(c *corruptRun) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.runs == nil {
		q.runs = map[string]map[string]*corruptRun{}
	}
	runs := q.runs[c.ref.WorkflowID]
	if runs == nil {
		runs = map[string]*corruptRun{}
		q.runs[c.ref.WorkflowID] = runs
	}
	if old := runs[c.ref.RunID]; old != nil {
		// An entry is never changed once added (others read it without
		// the lock: failParent, info): what c adds goes into a copy.
		if (c.current && !old.current) || (old.state == nil && c.state != nil) {
			cp := *old
			cp.current = cp.current || c.current
			if cp.state == nil {
				cp.state = c.state
			}
			runs[c.ref.RunID] = &cp
		}
		return false
	}
	runs[c.ref.RunID] = c
	q.n.Add(1)
	return true
}

// list returns the quarantined runs in (workflow id, run id) order.
func (q *quarantine) list() []*corruptRun {
	q.mu.RLock()
	defer q.mu.RUnlock()
	var out []*corruptRun
	for _, runs := range q.runs {
		for _, c := range runs {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].ref, out[j].ref
		return a.WorkflowID < b.WorkflowID || (a.WorkflowID == b.WorkflowID && a.RunID < b.RunID)
	})
	return out
}

// err is the error every write to the run, and every read of its past,
// returns.
func (c *corruptRun) err() error {
	if c.ref.RunID == "" {
		return fmt.Errorf("%w (%w): workflow %q is quarantined: %s", api.ErrDataCorrupt, history.ErrCorrupt, c.ref.WorkflowID, c.reason)
	}
	return fmt.Errorf("%w (%w): workflow %q run %q is quarantined: %s", api.ErrDataCorrupt, history.ErrCorrupt,
		c.ref.WorkflowID, c.ref.RunID, c.reason)
}

// info is the run's summary as listed and described.
func (c *corruptRun) info() api.WorkflowInfo {
	var info api.WorkflowInfo
	if c.state != nil {
		info = *summary(c.state)
	}
	info.WorkflowID, info.RunID, info.Corrupt = c.ref.WorkflowID, c.ref.RunID, c.reason
	return info
}

// runDamage marks an error caused by damaged stored data of one run. The
// engine quarantines the run once the call has released its locks
// (settle), and the caller gets api.ErrDataCorrupt.
type runDamage struct {
	ref     history.RunRef
	current bool
	err     error
}

func (d *runDamage) Error() string { return d.err.Error() }
func (d *runDamage) Unwrap() error { return d.err }

// damaged marks err, when it reports damaged data (history.ErrCorrupt), as
// damage of run ref; other errors are returned as they are.
func damaged(ref history.RunRef, current bool, err error) error {
	var d *runDamage
	if err == nil || !errors.Is(err, history.ErrCorrupt) || errors.As(err, &d) {
		return err
	}
	return &runDamage{ref: ref, current: current, err: err}
}

// settle quarantines the run that err marks as damaged, if any, and
// returns the error the caller gets. Call it without holding the run's
// lock.
func (e *Engine) settle(err error) error {
	var d *runDamage
	if !errors.As(err, &d) {
		return err
	}
	return e.quarantine(d.ref, d.current, d.err.Error()).err()
}

// quarantine takes the run's lock and quarantines it (see
// quarantineLocked).
func (e *Engine) quarantine(ref history.RunRef, current bool, reason string) *corruptRun {
	unlock := e.lock(ref.WorkflowID)
	defer unlock()
	return e.quarantineLocked(ref, current, reason)
}

// quarantineLocked quarantines a run: it leaves the open runs (its queued
// tasks, timers and leases go stale), waiters on it wake up, and its
// quarantine record is written. Call it with the run's lock held. It
// returns the run's quarantine entry (the earlier one if it was
// quarantined already).
func (e *Engine) quarantineLocked(ref history.RunRef, current bool, reason string) *corruptRun {
	c := &corruptRun{ref: ref, reason: reason, since: e.now(), current: current}
	e.mu.Lock()
	if entry := e.open[ref.WorkflowID]; entry != nil && entry.ref == ref {
		c.state, c.current = entry.state, true
		delete(e.open, ref.WorkflowID)
		close(entry.changed) // GetResult and GetHistory waiters look again and meet the quarantine
		entry.changed = make(chan struct{})
	}
	e.mu.Unlock()
	e.limits.sync(ref, nil) // its leases go stale: so do their slots
	if !e.corrupt.add(c) {
		return e.corrupt.lookup(ref.WorkflowID, ref.RunID)
	}
	e.log.Error().Str("workflow", ref.WorkflowID).Str("run", ref.RunID).Str("reason", reason).
		Msg("DATA CORRUPT: run quarantined; its writes are refused and every other run is served (see docs/reliability.md, Operations)")
	e.persistQuarantine(c)
	if e.running.Load() {
		e.failParentLater(c)
	}
	return c
}

// failParentLater tells the open parent of a quarantined child, in the
// background, that the child failed: a parent must not wait forever for a
// child that will never run again. The child's parent comes from its last
// known state, else from its WorkflowStarted event.
func (e *Engine) failParentLater(c *corruptRun) {
	if c.ref.RunID == "" {
		return
	}
	e.background(func() {
		if err := e.failParent(context.Background(), c); err != nil && !errors.Is(err, api.ErrUnavailable) {
			e.log.Warn().Err(err).Str("workflow", c.ref.WorkflowID).Str("run", c.ref.RunID).
				Msg("the parent of a quarantined child was not told that it failed")
		}
	})
}

func (e *Engine) failParent(ctx context.Context, c *corruptRun) error {
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	var p machine.ParentRef
	if c.state != nil {
		if c.state.Parent == nil {
			return nil
		}
		p = *c.state.Parent
	} else {
		evs, err := e.store.ReadEvents(ctx, c.ref, 1, 1)
		if err != nil || len(evs) != 1 {
			return nil // nothing names a parent that can be found
		}
		ws, ok := evs[0].Attrs.(*history.WorkflowStarted)
		if !ok || ws.ParentWorkflowID == "" {
			return nil
		}
		p = machine.ParentRef{WorkflowID: ws.ParentWorkflowID, RunID: ws.ParentRunID, InitiatedEventID: ws.ParentInitiatedEventID}
	}
	failed := &machine.RunState{WorkflowID: c.ref.WorkflowID, RunID: c.ref.RunID, Status: api.StatusFailed,
		Failure: &history.Failure{Type: "DataCorrupt", Message: "the child run is quarantined: " + c.reason, NonRetryable: true}}
	return e.transact(ctx, []string{p.WorkflowID}, func(x *txn) error {
		pe := e.openRun(p.WorkflowID)
		if pe == nil || pe.ref.RunID != p.RunID {
			return nil
		}
		if ch, ok := pe.state.Children[p.InitiatedEventID]; !ok || ch.RunID != c.ref.RunID {
			return nil
		}
		tr := x.edit(pe)
		out, err := e.m.ChildClosed(tr.st, p.InitiatedEventID, failed, x.now)
		if err != nil {
			return err
		}
		return x.apply(ctx, tr, out)
	})
}

// persistQuarantine writes c's quarantine record, best effort.
func (e *Engine) persistQuarantine(c *corruptRun) {
	b, err := api.MarshalMsgpack(&quarantineRecord{Reason: c.reason, Since: c.since, Current: c.current})
	if err == nil {
		err = e.commitFenced(context.Background(), &history.Batch{Puts: []history.Record{
			{Space: history.SpaceIndex, Key: indexQuarantineKey(c.ref), Value: b}}}, map[string]bool{c.ref.WorkflowID: true})
	}
	if err != nil {
		e.log.Warn().Err(err).Str("workflow", c.ref.WorkflowID).Str("run", c.ref.RunID).
			Msg("quarantine record not written; the damage will be found again after a restart")
	}
}

// loadQuarantine reads the quarantine records at Open. The last known
// state of each run is read for list and describe when it still decodes.
func (e *Engine) loadQuarantine(ctx context.Context) error {
	return e.scanIndex(ctx, history.Key().Str("q").Bytes(), func(r history.Record, bad error) error {
		kr := history.ReadKey(r.Key)
		_ = kr.Str()
		ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
		if kr.Err() != nil {
			e.log.Error().Hex("key", r.Key).Msg("quarantine record with a damaged key skipped")
			return nil
		}
		c := &corruptRun{ref: ref, reason: "quarantine record damaged", current: true}
		var rec quarantineRecord
		if bad == nil && decodeMsgpack(r.Value, &rec) == nil {
			c.reason, c.since, c.current = rec.Reason, rec.Since, rec.Current
		}
		if ref.RunID != "" {
			if b, err := e.store.Get(ctx, history.SpaceRunState, stateKey(ref)); err == nil {
				if st, err := decodeState(b); err == nil {
					c.state = st
				}
			}
		}
		e.corrupt.add(c)
		return nil
	})
}

// scanIndex walks the index records under prefix (see scanRecords).
func (e *Engine) scanIndex(ctx context.Context, prefix []byte, fn func(r history.Record, bad error) error) error {
	return scanRecords(ctx, e.store, history.SpaceIndex, history.ScanOptions{Prefix: prefix}, 0, func(r history.Record, bad error) (bool, error) {
		return true, fn(r, bad)
	})
}

// scanPage is how many records scanRecords asks for at a time.
const scanPage = 1000

// scanRecords walks the records opts selects (opts.Limit is ignored;
// page, if positive, is the page size), calling fn for each until it
// returns false or an error. A record the store reports damaged — a
// *history.CorruptError naming its key, which ends the store's scan — is
// passed to fn with that error (its Value nil), and the walk goes on after
// it: the records before it in the failed page are read again one by one,
// so none is skipped. Any other store error ends the walk.
func scanRecords(ctx context.Context, store history.Store, space history.Space, opts history.ScanOptions, page int,
	fn func(r history.Record, bad error) (bool, error)) error {
	if page <= 0 {
		page = scanPage
	}
	beyond := func(k, after []byte) bool { // k comes after `after` in the scan's order
		if after == nil {
			return true
		}
		if opts.Reverse {
			return bytes.Compare(k, after) < 0
		}
		return bytes.Compare(k, after) > 0
	}
	after := opts.After
	stepping := false // reading one record at a time up to a damaged one
	for {
		o := opts
		o.After, o.Limit = after, page
		if stepping {
			o.Limit = 1
		}
		recs, err := store.Scan(ctx, space, o)
		var ce *history.CorruptError
		if errors.As(err, &ce) && ce.Key != nil && bytes.HasPrefix(ce.Key, opts.Prefix) && beyond(ce.Key, after) {
			if !stepping {
				stepping = true // the records before it come back one by one
				continue
			}
			more, ferr := fn(history.Record{Space: space, Key: bytes.Clone(ce.Key)}, err)
			if ferr != nil || !more {
				return ferr
			}
			after, stepping = bytes.Clone(ce.Key), false
			continue
		}
		if err != nil {
			return storeErr(err)
		}
		for _, r := range recs {
			after = r.Key
			more, ferr := fn(r, nil)
			if ferr != nil || !more {
				return ferr
			}
		}
		if len(recs) < o.Limit {
			return nil
		}
	}
}

// CorruptRuns returns how many runs are quarantined.
func (e *Engine) CorruptRuns() int { return int(e.corrupt.n.Load()) }

// countCorrupt counts the quarantined runs the filters keep: the runs
// listCorrupt lists.
func (e *Engine) countCorrupt(req *api.ListWorkflowsRequest) int64 {
	if e.corrupt.n.Load() == 0 {
		return 0
	}
	var n int64
	for _, c := range e.corrupt.list() {
		if info := c.info(); listMatches(&info, req) {
			n++
		}
	}
	return n
}

// listCorrupt serves ListWorkflows with Corrupt set: the quarantined runs
// in (workflow id, run id) order, paged by the last key.
func (e *Engine) listCorrupt(req *api.ListWorkflowsRequest) *api.ListWorkflowsResponse {
	size := req.PageSize
	if size <= 0 {
		size = 100
	}
	resp := &api.ListWorkflowsResponse{}
	for _, c := range e.corrupt.list() {
		key := history.Key().Str(c.ref.WorkflowID).Str(c.ref.RunID).Bytes()
		if req.NextPageToken != nil && bytes.Compare(key, req.NextPageToken) <= 0 {
			continue
		}
		info := c.info()
		if !listMatches(&info, req) {
			continue
		}
		if len(resp.Workflows) == size {
			resp.NextPageToken = history.Key().Str(resp.Workflows[size-1].WorkflowID).Str(resp.Workflows[size-1].RunID).Bytes()
			return resp
		}
		resp.Workflows = append(resp.Workflows, info)
	}
	return resp
}
