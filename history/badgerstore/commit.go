package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/third_party/badger"

	"github.com/cairnflow/cairn/history"
)

// Commit applies the batch atomically and durably; see history.Store.
//
// Group commit: Commit validates and encodes the batch in the caller's
// goroutine, queues it and waits. One committer goroutine takes every
// queued batch at once (lingering briefly when fewer are queued than last
// time, see Options.CommitLinger), checks each against the database plus the
// batches accepted before it in the same group, writes all accepted
// batches in one Badger transaction (one round of fsyncs) and then answers
// each caller with its own outcome. A batch that fails its checks is
// answered with ErrConflict and adds nothing to the group. A group that
// does not fit in one transaction, or exceeds Options.MaxBatchBytes, is
// committed in several, in order; a failed transaction fails exactly the
// batches in it.
//
// Cancellation: if ctx ends while the batch is still queued, Commit returns
// ctx.Err() and the batch is never written. If the committer has already
// taken it, Commit waits for the outcome and returns it (nil when it was
// committed), so a nil error always means durable and ctx.Err() always
// means not written.
func (s *Store) Commit(ctx context.Context, b *history.Batch) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.exit()
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := s.prepare(b)
	if err != nil {
		return err
	}
	s.queue.push(r)
	if s.hooks.enqueued != nil {
		s.hooks.enqueued(r)
	}
	return s.wait(ctx, r)
}

// wait returns r's outcome, or ctx.Err() if ctx ends before the committer
// took r.
func (s *Store) wait(ctx context.Context, r *request) error {
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	if s.queue.cancel(r) {
		return ctx.Err()
	}
	return <-r.done
}

// commitLoop is the committer goroutine. It runs until Close stops the
// queue.
func (s *Store) commitLoop() {
	defer close(s.loopDone)
	var last int           // batches in the previous group
	var took time.Duration // how long committing it took
	for {
		// Lingering longer than a commit takes would cost more than
		// the commit it may save.
		reqs, ok := s.queue.take(last, min(s.opts.CommitLinger, took))
		if !ok {
			return
		}
		if s.hooks.taken != nil {
			s.hooks.taken(reqs)
		}
		start := time.Now()
		s.commitGroup(reqs)
		last, took = len(reqs), time.Since(start)
	}
}

// commitGroup commits reqs in as few transactions as fit, in order, and
// answers every one of them.
func (s *Store) commitGroup(reqs []*request) {
	// A full disk: refuse the group before Badger writes anything.
	if err := s.space.check(); err != nil {
		for _, r := range reqs {
			r.finish(err)
		}
		s.queue.markReplies()
		return
	}
	g := group{s: s, heads: make(map[string]int64)}
	defer g.dropView()
	for _, r := range reqs {
		g.admit(r)
		if g.bytes >= s.opts.MaxBatchBytes {
			g.flush()
		}
	}
	g.flush()
}

// group is the Badger transaction the committer is building. The writes
// of every member are in txn, and the view later requests are checked
// against is txn itself (it reads its own pending writes) with, for run
// heads, the members' new heads and then the committed heads cache.
type group struct {
	s       *Store
	txn     *badger.Txn // nil until the first admit after a flush
	members []*request
	heads   map[string]int64 // last event id per head key written by members
	bytes   int64
	replied bool // a caller was answered (see reply)
	// view reads the committed last events of runs no member wrote: an
	// iterator on txn would copy and sort every pending write of the group
	// each time. The committer is the only writer and runs one group at a
	// time, so a read-only transaction opened during the group sees every
	// earlier commit; what the members wrote is in heads.
	view *badger.Txn
}

// admit checks r against the group's view and adds its writes, or answers
// r with why it cannot be committed.
func (g *group) admit(r *request) {
	for {
		if g.txn == nil {
			if err := g.begin(); err != nil {
				g.reply(r, err)
				return
			}
		}
		if err := g.check(r); err != nil {
			g.reply(r, err)
			return
		}
		err := g.apply(g.txn, r)
		if err == nil {
			g.members = append(g.members, r)
			g.bytes += r.size
			for _, a := range r.appends {
				g.heads[string(a.head)] = a.last
			}
			for _, d := range r.deletes {
				g.heads[string(d.head)] = 0
			}
			return
		}
		// Part of r may be in txn: drop the txn. Alone, r cannot be
		// committed; otherwise commit the members without it and try r
		// again in a fresh transaction (checking it again, since the
		// view may have changed if that commit failed).
		if len(g.members) == 0 {
			g.txn.Discard()
			g.txn = nil
			g.reply(r, applyError(err))
			return
		}
		g.rewrite()
		g.flush()
	}
}

// begin opens the group's transaction with the commit number it will have
// once durable (see seqKey).
func (g *group) begin() error {
	g.txn = g.s.db.NewTransaction(true)
	if err := g.txn.Set(seqKey, seal(seqKey, encodeSeq(g.s.seq+1))); err != nil {
		g.txn.Discard()
		g.txn = nil
		return applyError(err)
	}
	return nil
}

// check verifies r's appends and conditions against the group's view.
func (g *group) check(r *request) error {
	for _, a := range r.appends {
		last, err := g.lastEventID(a)
		if err != nil {
			return err
		}
		if last+1 != a.expectedNext {
			return fmt.Errorf("%w: workflow %q run %q: expected next event %d, but the history ends at %d",
				history.ErrConflict, a.run.WorkflowID, a.run.RunID, a.expectedNext, last)
		}
	}
	for _, c := range r.conds {
		if err := checkCondition(g.txn, c); err != nil {
			return err
		}
	}
	for i := range r.deletes {
		d := &r.deletes[i]
		last, err := g.lastEventID(appendCheck{run: d.run, head: d.head})
		if err != nil {
			return err
		}
		d.last = last
	}
	return nil
}

// lastEventID returns the last event id of a's run as the group sees it:
// written by a member, else committed (cached, or read from Badger).
func (g *group) lastEventID(a appendCheck) (int64, error) {
	if last, ok := g.heads[string(a.head)]; ok {
		return last, nil
	}
	if last, ok := g.s.heads.get(a.head); ok {
		return last, nil
	}
	if g.view == nil {
		g.view = g.s.db.NewTransaction(false)
	}
	last, err := lastEvent(g.view, a.run)
	if err == nil {
		g.s.heads.put(string(a.head), last)
	}
	return last, err
}

func checkCondition(txn *badger.Txn, c condCheck) error {
	value, found, err := getValue(txn, c.key)
	if err != nil {
		return err
	}
	switch {
	case !c.Exists && found:
		return conflictf(c, "exists")
	case c.Exists && !found:
		return conflictf(c, "does not exist")
	case c.Exists && c.Value != nil && !bytes.Equal(value, c.Value):
		return conflictf(c, "has another value")
	}
	return nil
}

func conflictf(c condCheck, what string) error {
	return fmt.Errorf("%w: condition on %s key %x: record %s", history.ErrConflict, c.Space, c.Key, what)
}

// apply adds r's writes to txn. On error part of them may be in txn.
func (g *group) apply(txn *badger.Txn, r *request) error {
	for _, w := range r.writes {
		var err error
		if w.del {
			err = txn.Delete(w.key)
		} else {
			err = txn.Set(w.key, w.value)
		}
		if err != nil {
			return err
		}
	}
	for _, d := range r.deletes {
		for id := int64(1); id <= d.last; id++ {
			if err := txn.Delete(eventKey(d.prefix, id)); err != nil {
				return err
			}
		}
	}
	return nil
}

// rewrite replaces txn with a fresh transaction holding exactly the
// members' writes (they fitted before, so they fit again).
func (g *group) rewrite() {
	g.txn.Discard()
	if err := g.begin(); err != nil {
		g.s.heads.update(g.heads, false)
		g.answer(fmt.Errorf("badgerstore: rebuild group: %w", err))
		return
	}
	for _, m := range g.members {
		if err := g.apply(g.txn, m); err != nil {
			g.fail(fmt.Errorf("badgerstore: rebuild group: %w", err))
			return
		}
	}
}

// flush commits the group's transaction and answers its members.
func (g *group) flush() {
	if g.txn == nil {
		return
	}
	if len(g.members) == 0 {
		g.txn.Discard()
		g.txn = nil
		return
	}
	err := g.s.commitTxn(g.txn)
	g.txn.Discard() // no-op after a successful Commit
	g.txn = nil
	g.dropView() // it predates this commit
	if err != nil {
		err = writeError(err)
	} else {
		g.s.seq++
		if g.s.hwm != nil {
			g.s.hwm.advance(g.s.seq)
		}
	}
	g.s.heads.update(g.heads, err == nil)
	g.answer(err)
}

// dropView ends the read-only view; the next lookup opens a fresh one.
func (g *group) dropView() {
	if g.view != nil {
		g.view.Discard()
		g.view = nil
	}
}

// fail drops the transaction and answers every member with err.
func (g *group) fail(err error) {
	g.txn.Discard()
	g.txn = nil
	g.s.heads.update(g.heads, false)
	g.answer(err)
}

func (g *group) answer(err error) {
	for _, m := range g.members {
		g.reply(m, err)
	}
	clear(g.members)
	g.members = g.members[:0]
	clear(g.heads)
	g.bytes = 0
}

// reply answers r. The first reply of a group marks the queue: the callers
// answered from here on are the ones the next take lingers for.
func (g *group) reply(r *request, err error) {
	if !g.replied {
		g.s.queue.markReplies()
		g.replied = true
	}
	r.finish(err)
}

// commitTxn commits txn (tests substitute failures through hooks.commit).
func (s *Store) commitTxn(txn *badger.Txn) error {
	if s.hooks.commit != nil {
		return s.hooks.commit(txn)
	}
	return txn.Commit()
}

// applyError maps a failure to add one batch, alone, to a transaction.
func applyError(err error) error {
	if errors.Is(err, badger.ErrTxnTooBig) {
		return fmt.Errorf("%w: the batch does not fit in one transaction", history.ErrTooLarge)
	}
	return fmt.Errorf("badgerstore: %w", err)
}

// headCache remembers committed last event ids by head key, so that most
// appends are checked without reading Badger. Only the committer uses it.
// Invariant: a cached value equals the id of the run's last committed event.
type headCache struct{ m map[string]int64 }

// maxCachedHeads bounds the cache; when full it starts over.
const maxCachedHeads = 1 << 15

func (c *headCache) get(key []byte) (int64, bool) {
	last, ok := c.m[string(key)]
	return last, ok
}

func (c *headCache) put(key string, last int64) {
	if c.m == nil || len(c.m) >= maxCachedHeads {
		c.m = make(map[string]int64)
	}
	c.m[key] = last
}

// update records a group's heads after its commit, or forgets them when
// the commit failed (Badger may or may not hold them now).
func (c *headCache) update(heads map[string]int64, committed bool) {
	for key, last := range heads {
		if committed {
			c.put(key, last)
		} else {
			delete(c.m, key)
		}
	}
}
