package pgstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnflow/cairn/history"
)

// gate counts the calls running inside the store so that Close can refuse
// new ones and wait for the running ones before it closes the pool.
type gate struct {
	mu     sync.Mutex
	idle   sync.Cond // signalled when active drops to 0 after close
	active int
	closed atomic.Bool
}

func (g *gate) init() { g.idle.L = &g.mu }

// enter admits a call, or returns history.ErrClosed. Every successful enter
// must be paired with exit.
func (g *gate) enter() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() {
		return history.ErrClosed
	}
	g.active++
	return nil
}

func (g *gate) exit() {
	g.mu.Lock()
	g.active--
	if g.active == 0 && g.closed.Load() {
		g.idle.Broadcast()
	}
	g.mu.Unlock()
}

// close refuses new calls and waits until the running ones have exited.
func (g *gate) close() {
	g.mu.Lock()
	g.closed.Store(true)
	for g.active > 0 {
		g.idle.Wait()
	}
	g.mu.Unlock()
}

// isClosed lets long iterations stop early once Close has begun.
func (g *gate) isClosed() bool { return g.closed.Load() }

// reqState is where a request is; it moves queued → taken or queued →
// canceled, never back. Guarded by queue.mu.
type reqState uint8

const (
	stateQueued reqState = iota
	stateTaken
	stateCanceled
)

// queue holds the requests waiting for the committer.
type queue struct {
	mu      sync.Mutex
	ready   sync.Cond // signalled on push, closing and stop
	items   []*request
	pushed  uint64 // requests pushed so far
	mark    uint64 // pushed when the committer last began answering a group
	closing bool   // Close has begun: take no longer lingers
	stopped bool
}

func (q *queue) init() { q.ready.L = &q.mu }

func (q *queue) push(r *request) {
	q.mu.Lock()
	r.state = stateQueued
	q.items = append(q.items, r)
	q.pushed++
	q.mu.Unlock()
	q.ready.Signal()
}

// cancel withdraws a request that the committer has not taken yet. It
// reports false when the request is already being committed: its outcome
// will arrive on r.done.
func (q *queue) cancel(r *request) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if r.state != stateQueued {
		return false
	}
	r.state = stateCanceled
	return true
}

// markReplies notes that the committer begins answering a group.
func (q *queue) markReplies() {
	q.mu.Lock()
	q.mark = q.pushed
	q.mu.Unlock()
}

// take takes every queued request (skipping canceled ones). With block it
// first waits for one; it reports false once the queue is stopped and
// empty.
//
// take also lingers, up to linger, until back requests have been pushed
// since markReplies: back is the size of the previous group, whose
// writers usually come back just after the committer took the next group.
// A lone writer (back 1) never waits: its own request is the one awaited.
func (q *queue) take(block bool, back int, linger time.Duration) ([]*request, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for block && len(q.items) == 0 && !q.stopped {
		q.ready.Wait()
	}
	if want := q.mark + uint64(back); block && q.pushed < want && linger > 0 {
		q.await(want, linger)
	}
	if len(q.items) == 0 {
		return nil, !q.stopped
	}
	group := make([]*request, 0, len(q.items))
	for _, r := range q.items {
		if r.state == stateQueued {
			r.state = stateTaken
			group = append(group, r)
		}
	}
	clear(q.items)
	q.items = q.items[:0]
	return group, true
}

// await waits, with q.mu held, until n requests have been pushed, d has
// passed or Close has begun.
func (q *queue) await(n uint64, d time.Duration) {
	expired := false
	t := time.AfterFunc(d, func() {
		q.mu.Lock()
		expired = true
		q.mu.Unlock()
		q.ready.Broadcast()
	})
	for q.pushed < n && !expired && !q.closing {
		q.ready.Wait()
	}
	t.Stop()
}

// close ends lingering: Close is waiting for the queued batches.
func (q *queue) close() {
	q.mu.Lock()
	q.closing = true
	q.mu.Unlock()
	q.ready.Broadcast()
}

// stop makes take return false once the queue is empty.
func (q *queue) stop() {
	q.mu.Lock()
	q.closing = true
	q.stopped = true
	q.mu.Unlock()
	q.ready.Broadcast()
}
