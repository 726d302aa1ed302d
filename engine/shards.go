package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/vmihailenco/msgpack/v5"
)

// Shards tells an engine which runs it serves when several engines share
// one store (docs/scale-out.md). Runs are partitioned into a fixed number
// of shards by workflow id; each shard is held by one server at a time
// under a lease with an epoch, and every commit of a shard carries that
// epoch as a history.Fence, so an engine whose lease moved on can write
// nothing (the store refuses the batch with history.ErrFenced).
//
// The engine serves a shard between Acquire and Release (or a fenced
// commit): it loads the shard's open runs at Acquire and forgets them at
// Release. Calls for a workflow id of a shard it does not serve fail with
// api.ErrNotOwner, which a cluster router forwards to the owner.
type Shards interface {
	// Count is the fixed number of shards.
	Count() int
	// Of returns the shard of a workflow id, in [0, Count()).
	Of(workflowID string) int
	// Lease returns the fence this engine holds the shard under, or false
	// when it does not hold the shard (any more), or its lease may have run
	// out: the engine then neither writes nor answers for the shard's runs.
	Lease(shard int) (history.Fence, bool)
	// Fenced is called (once per refused commit, from the committing
	// goroutine) when the store refused a commit because the shard's lease
	// moved on: the engine has stopped serving the shard.
	Fenced(shard int, epoch int64)
}

// shardSet is what an engine serves: the state of each shard. A nil set
// (no Options.Shards) serves every run.
type shardSet struct {
	of    Shards
	state []atomic.Int32 // shardNone, shardLoading, shardServed
	// loaded is closed when the loading under way ends (mu guards it).
	mu     sync.Mutex
	loaded chan struct{}
}

// The states of a shard in an engine.
const (
	shardNone    = 0 // not served: calls fail with api.ErrNotOwner
	shardLoading = 1 // Acquire is loading its runs: transitions wait
	shardServed  = 2
)

func newShardSet(s Shards) *shardSet {
	if s == nil {
		return nil
	}
	return &shardSet{of: s, state: make([]atomic.Int32, s.Count())}
}

// served reports whether a shard is served.
func (s *shardSet) served(shard int) bool { return s.state[shard].Load() == shardServed }

// wait waits while a shard of ids is being loaded (Acquire), so that a
// transition (a timer come due, a call) does not fail for a run about to
// be served. Call it before taking run locks: loading takes them.
func (s *shardSet) wait(ctx context.Context, ids []string) error {
	if s == nil {
		return nil
	}
	for _, id := range ids {
		for s.state[s.of.Of(id)].Load() == shardLoading {
			s.mu.Lock()
			ch := s.loaded
			s.mu.Unlock()
			if ch == nil {
				break
			}
			select {
			case <-ch:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// shard returns the shard of a workflow id (0 without shards).
func (s *shardSet) shard(workflowID string) int {
	if s == nil {
		return 0
	}
	return s.of.Of(workflowID)
}

// check returns api.ErrNotOwner unless every id's shard is served and its
// lease still held (Shards.Lease): a server whose lease may have run out
// — it could not renew it, or it was frozen and has just woken up —
// answers nothing from its memory of the shard's runs, which another
// server may be moving on by now.
func (s *shardSet) check(ids ...string) error {
	if s == nil {
		return nil
	}
	for _, id := range ids {
		sh := s.of.Of(id)
		if !s.served(sh) {
			return notOwner(id, sh)
		}
		if _, ok := s.of.Lease(sh); !ok {
			return notOwner(id, sh)
		}
	}
	return nil
}

func notOwner(workflowID string, shard int) error {
	return fmt.Errorf("%w: workflow %q is in shard %d", api.ErrNotOwner, workflowID, shard)
}

// fences returns the fences of the shards of the workflow ids held, or
// api.ErrNotOwner when a lease is no longer held.
func (s *shardSet) fences(held map[string]bool) ([]history.Fence, error) {
	if s == nil {
		return nil, nil
	}
	var out []history.Fence
	for id := range held {
		sh := s.of.Of(id)
		if slices.ContainsFunc(out, func(f history.Fence) bool { return f.Shard == sh }) {
			continue
		}
		f, ok := s.of.Lease(sh)
		if !ok || s.state[sh].Load() == shardNone {
			return nil, notOwner(id, sh)
		}
		out = append(out, f)
	}
	return out, nil
}

// Serves reports whether the engine serves the runs of workflowID (always,
// without Options.Shards).
func (e *Engine) Serves(workflowID string) bool { return e.shards.check(workflowID) == nil }

// Acquire starts serving shards whose leases the caller now holds
// (Shards.Lease reports them): their open runs are loaded from the store,
// their deadlines armed and their ready tasks queued, as at Open. Until
// Acquire returns, calls for their runs fail with api.ErrNotOwner.
func (e *Engine) Acquire(ctx context.Context, shards []int) error {
	if e.shards == nil {
		return fmt.Errorf("%w: engine: Acquire needs Options.Shards", api.ErrInvalidArgument)
	}
	if err := e.enter(); err != nil {
		return err
	}
	defer e.leave()
	want := map[int]bool{}
	for _, sh := range shards {
		if sh < 0 || sh >= len(e.shards.state) {
			return fmt.Errorf("%w: engine: shard %d out of range", api.ErrInvalidArgument, sh)
		}
		want[sh] = true
	}
	s := e.shards
	s.mu.Lock()
	defer s.mu.Unlock() // one Acquire at a time
	for sh := range want {
		if !s.state[sh].CompareAndSwap(shardNone, shardLoading) {
			delete(want, sh) // served already
		}
	}
	if len(want) == 0 {
		return nil
	}
	s.loaded = make(chan struct{})
	defer func() { close(s.loaded); s.loaded = nil }()
	if err := e.loadQuarantine(ctx); err != nil {
		e.dropShards(want)
		return fmt.Errorf("engine: acquire: %w", err)
	}
	err := e.scanIndex(ctx, history.Key().Str("o").Bytes(), func(r history.Record, _ error) error {
		id, ok := openIndexWorkflow(r.Key)
		if !ok || !want[e.shards.shard(id)] {
			return nil
		}
		unlock := e.lock(id)
		defer unlock()
		return e.recoverRun(ctx, r.Key)
	})
	if err == nil {
		err = e.deliverPendingNotices(ctx, want)
	}
	if err != nil {
		e.dropShards(want) // what was loaded is forgotten: a later Acquire loads it again
		return fmt.Errorf("engine: acquire: %w", err)
	}
	for sh := range want {
		s.state[sh].Store(shardServed)
	}
	e.watch.notify()
	return nil
}

// openIndexWorkflow returns the workflow id an open-run index key names.
func openIndexWorkflow(key []byte) (string, bool) {
	kr := history.ReadKey(key)
	_ = kr.Str()
	id := kr.Str()
	return id, kr.Err() == nil
}

// Release stops serving shards: calls for their runs fail with
// api.ErrNotOwner from now on, transitions in flight finish first, and
// their runs are forgotten (queued tasks and armed deadlines of theirs are
// dropped when they come up). The caller releases the leases afterwards.
func (e *Engine) Release(shards []int) {
	if e.shards == nil {
		return
	}
	drop := map[int]bool{}
	for _, sh := range shards {
		if sh >= 0 && sh < len(e.shards.state) {
			e.shards.state[sh].Store(shardNone)
			drop[sh] = true
		}
	}
	e.dropShards(drop)
}

// dropShards forgets the runs of the shards in drop, each under its lock
// (so a transition in flight finishes first), and marks them not served.
func (e *Engine) dropShards(drop map[int]bool) {
	for sh := range drop {
		e.shards.state[sh].Store(shardNone)
	}
	e.mu.RLock()
	var ids []string
	for id := range e.open {
		if drop[e.shards.shard(id)] {
			ids = append(ids, id)
		}
	}
	e.mu.RUnlock()
	for _, id := range ids {
		unlock := e.lock(id)
		e.mu.Lock()
		entry := e.open[id]
		delete(e.open, id)
		e.mu.Unlock()
		if entry != nil {
			e.limits.sync(entry.ref, nil) // the shard's new owner counts its leases
		}
		unlock()
	}
	for _, id := range e.recent.Keys() {
		if drop[e.shards.shard(id)] {
			e.recent.Remove(id)
		}
	}
	e.watch.notify()
}

// fenced handles a commit the store refused because a shard's lease moved
// on: the batch does not say which of its fences failed, so the cluster is
// told of each (it checks the leases and releases those that moved; the
// committing goroutine holds run locks, so it must not release them here).
// The caller gets api.ErrNotOwner: nothing was written.
func (e *Engine) fenced(fences []history.Fence, err error) error {
	for _, f := range fences {
		e.shards.of.Fenced(f.Shard, f.Epoch)
	}
	return fmt.Errorf("%w: %w", api.ErrNotOwner, err)
}

// commitFenced commits b fenced by the leases of the shards of the workflow
// ids it writes (held: the ids whose locks the caller holds). A refused
// fence returns api.ErrNotOwner (fenced).
func (e *Engine) commitFenced(ctx context.Context, b *history.Batch, held map[string]bool) error {
	fences, err := e.shards.fences(held)
	if err != nil {
		return err
	}
	b.Fences = fences
	err = e.commit(ctx, b)
	if errors.Is(err, history.ErrFenced) {
		return e.fenced(fences, err)
	}
	return err
}

// TokenWorkflowID returns the workflow id a task token (of a workflow task,
// an activity attempt or a query) was issued for, so that a router can send
// the task's completion to the server that serves the run. Every token is
// a msgpack array whose first element is the workflow id.
func TokenWorkflowID(token []byte) (string, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(token))
	n, err := dec.DecodeArrayLen()
	if err != nil || n < 1 {
		return "", api.Errorf(api.ErrInvalidArgument, "malformed task token")
	}
	id, err := dec.DecodeString()
	if err != nil || id == "" {
		return "", api.Errorf(api.ErrInvalidArgument, "malformed task token")
	}
	return id, nil
}
