// Package matching holds the engine's in-memory ready-task queues and matches
// pushed items with long-polling consumers.
//
// Each named queue is a FIFO of items plus a FIFO of waiting pollers. A push
// is handed directly to the longest-waiting poller if there is one; otherwise
// it is appended. Waiting is done on channels only: there is no polling loop.
// Queues that hold neither items nor waiters are removed from the internal
// map, so many short-lived (e.g. sticky) queue names do not accumulate.
package matching

import (
	"context"
	"slices"
	"sync"
)

// Queues is a set of named FIFO queues of T with long-poll consumers. The
// zero value is not usable; create one with NewQueues. All methods are safe
// for concurrent use.
type Queues[T any] struct {
	mu     sync.Mutex
	queues map[string]*queue[T]
	closed bool

	// onWait, if set (tests and benchmarks only), is called with mu held
	// each time a poller starts waiting.
	onWait func(queue string)
	// onGiveBack, if set (tests only), is called with mu held each time an
	// item handed to a cancelled poller is given back.
	onGiveBack func()
	// reclaim, if set (SetReclaim), is offered every item given back.
	reclaim func(T) bool
}

// SetReclaim makes f see every item a poller could not take (see Poll):
// when f returns true it has taken the item over and it is not queued
// again. f is called with the queues' lock held: it must be quick and must
// not call back into q.
func (q *Queues[T]) SetReclaim(f func(T) bool) {
	q.mu.Lock()
	q.reclaim = f
	q.mu.Unlock()
}

// GiveBack returns an item a caller polled but cannot take, as Poll does
// itself when its context ends just as an item arrives: it goes to the
// reclaim function, or to the next waiting poller, or to the front of the
// queue.
func (q *Queues[T]) GiveBack(queue string, item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.giveBackLocked(queue, item)
}

// NewQueues returns an empty, open set of queues.
func NewQueues[T any]() *Queues[T] {
	return &Queues[T]{queues: make(map[string]*queue[T])}
}

type queue[T any] struct {
	items []T
	head  int // items[head:] are queued, oldest first

	// Doubly linked FIFO of waiting pollers, oldest at first.
	first, last *waiter[T]
	nwait       int
}

type result[T any] struct {
	item T
	ok   bool
}

type waiter[T any] struct {
	// ch receives exactly one result, sent with Queues.mu held at the moment
	// the waiter is unlinked (handed an item, or Close). Buffered so the
	// sender never blocks.
	ch         chan result[T]
	prev, next *waiter[T]
	linked     bool
	tag        string // the poller's name (PollTagged), for OfferBuilt
}

func (q *queue[T]) empty() bool { return len(q.items) == q.head && q.nwait == 0 }

func (q *queue[T]) pushBack(item T) { q.items = append(q.items, item) }

func (q *queue[T]) pushFront(item T) {
	if q.head > 0 {
		q.head--
		q.items[q.head] = item
		return
	}
	q.items = append(q.items, item)
	copy(q.items[1:], q.items)
	q.items[0] = item
}

func (q *queue[T]) popFront() T {
	var zero T
	item := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.items):
		q.items, q.head = q.items[:0], 0
	case q.head >= 64 && q.head*2 >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return item
}

func (q *queue[T]) link(w *waiter[T]) {
	w.prev, w.next, w.linked = q.last, nil, true
	if q.last != nil {
		q.last.next = w
	} else {
		q.first = w
	}
	q.last = w
	q.nwait++
}

func (q *queue[T]) unlink(w *waiter[T]) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.first = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.last = w.prev
	}
	w.prev, w.next, w.linked = nil, nil, false
	q.nwait--
}

// offerLocked hands item to the oldest waiter of q, or queues it (at the
// front if front is true, otherwise at the back).
func (q *queue[T]) offerLocked(item T, front bool) {
	if w := q.first; w != nil {
		q.unlink(w)
		w.ch <- result[T]{item: item, ok: true}
		return
	}
	if front {
		q.pushFront(item)
	} else {
		q.pushBack(item)
	}
}

// Push adds item to the named queue. If a poller is waiting on that queue the
// item is handed directly to the one that has waited longest; otherwise it is
// appended to the queue. Push after Close still queues the item, but no Poll
// will return it.
func (q *Queues[T]) Push(queue string, item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qq := q.get(queue)
	qq.offerLocked(item, false)
	q.release(queue, qq)
}

// Offer hands item to the poller that has waited longest on the named queue
// and reports true; when no poller waits it queues nothing and reports
// false.
func (q *Queues[T]) Offer(queue string, item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	qq := q.queues[queue]
	if q.closed || qq == nil || qq.first == nil {
		return false
	}
	qq.offerLocked(item, false)
	q.release(queue, qq)
	return true
}

// OfferBuilt is Offer for an item that depends on who takes it: when a
// poller waits, build is called with its tag (under the queues' lock, so
// it must be quick and must not call back into q) and, if it reports true,
// its item is handed to that poller.
func (q *Queues[T]) OfferBuilt(queue string, build func(tag string) (T, bool)) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	qq := q.queues[queue]
	if q.closed || qq == nil || qq.first == nil {
		return false
	}
	item, ok := build(qq.first.tag)
	if !ok {
		return false
	}
	qq.offerLocked(item, false)
	q.release(queue, qq)
	return true
}

// get returns the named queue, creating it. Callers must hold mu and must
// call q.release afterwards if the queue may have become empty.
func (q *Queues[T]) get(name string) *queue[T] {
	qq := q.queues[name]
	if qq == nil {
		qq = &queue[T]{}
		q.queues[name] = qq
	}
	return qq
}

// release drops the named queue from the map if it is empty.
func (q *Queues[T]) release(name string, qq *queue[T]) {
	if qq.empty() {
		delete(q.queues, name)
	}
}

// Poll removes and returns the oldest item of the named queue. If the queue
// is empty it waits until an item is pushed, ctx is done, or Close is called;
// in the last two cases it returns the zero T and false.
//
// Poll never loses an item: if an item is handed to this poller at the same
// moment ctx ends, and ctx is already done when Poll is about to return it,
// the item is given back — to the next waiting poller, or to the front of the
// queue — and Poll reports false. Hence Poll with a ctx that is already done
// never consumes an item. (An item returned with true is the caller's
// responsibility, even if ctx ends immediately afterwards.)
func (q *Queues[T]) Poll(ctx context.Context, queue string) (T, bool) {
	return q.PollTagged(ctx, queue, "")
}

// PollTagged is Poll for a poller named tag: OfferBuilt builds the item it
// hands this poller knowing the name.
func (q *Queues[T]) PollTagged(ctx context.Context, queue, tag string) (T, bool) {
	var zero T
	if ctx.Err() != nil {
		return zero, false
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return zero, false
	}
	qq := q.get(queue)
	if len(qq.items) > qq.head {
		item := qq.popFront()
		q.release(queue, qq)
		q.mu.Unlock()
		return item, true
	}
	w := &waiter[T]{ch: make(chan result[T], 1), tag: tag}
	qq.link(w)
	if q.onWait != nil {
		q.onWait(queue)
	}
	q.mu.Unlock()

	select {
	case r := <-w.ch:
		if !r.ok || ctx.Err() == nil {
			return r.item, r.ok
		}
		// Handed an item but ctx ended meanwhile: give it back.
		q.mu.Lock()
		q.giveBackLocked(queue, r.item)
		q.mu.Unlock()
		return zero, false
	case <-ctx.Done():
		q.mu.Lock()
		defer q.mu.Unlock()
		if w.linked {
			// Not yet matched: withdraw.
			qq := q.queues[queue] // still present: it holds w
			qq.unlink(w)
			q.release(queue, qq)
			return zero, false
		}
		// Matched concurrently; the result is already buffered in w.ch
		// because it was sent under mu before w was unlinked.
		if r := <-w.ch; r.ok {
			q.giveBackLocked(queue, r.item)
		}
		return zero, false
	}
}

// giveBackLocked returns an item that was handed to a poller that could not
// take it: to the next waiter if any, else to the front of the queue.
func (q *Queues[T]) giveBackLocked(name string, item T) {
	if q.onGiveBack != nil {
		q.onGiveBack()
	}
	if q.reclaim != nil && q.reclaim(item) {
		return
	}
	qq := q.get(name)
	qq.offerLocked(item, true)
	q.release(name, qq)
}

// Len returns the number of items queued (not yet handed to a poller) in the
// named queue.
func (q *Queues[T]) Len(queue string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qq := q.queues[queue]; qq != nil {
		return len(qq.items) - qq.head
	}
	return 0
}

// Items returns a copy of the items queued (not yet handed to a poller) in
// the named queue, oldest first.
func (q *Queues[T]) Items(queue string) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qq := q.queues[queue]; qq != nil {
		return slices.Clone(qq.items[qq.head:])
	}
	return nil
}

// Waiting returns the number of pollers currently waiting on the named queue.
func (q *Queues[T]) Waiting(queue string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qq := q.queues[queue]; qq != nil {
		return qq.nwait
	}
	return 0
}

// Close wakes every waiting poller with false; later Polls return false at
// once. Queued items are retained but can no longer be polled. Close is
// idempotent.
func (q *Queues[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	q.closed = true
	for name, qq := range q.queues {
		for w := qq.first; w != nil; w = qq.first {
			qq.unlink(w)
			w.ch <- result[T]{}
		}
		q.release(name, qq)
	}
}

// numQueues reports how many queues are in the map (tests only).
func (q *Queues[T]) numQueues() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queues)
}

// Names returns the queues that have items or waiting pollers, sorted.
func (q *Queues[T]) Names() []string {
	q.mu.Lock()
	names := make([]string, 0, len(q.queues))
	for n := range q.queues {
		names = append(names, n)
	}
	q.mu.Unlock()
	slices.Sort(names)
	return names
}
