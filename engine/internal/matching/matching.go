// Package matching holds the engine's in-memory ready-task queues and matches
// pushed items with long-polling consumers.
//
// Each named queue is a FIFO of items plus a FIFO of waiting pollers. A push
// is handed directly to the longest-waiting poller if there is one; otherwise
// it is appended. With a Gate (SetGate) a queue keeps a FIFO per fairness
// key and kind, serves the keys in turn (round-robin) and hands over only
// the items the gate admits (the engine's activity limits); Kick wakes a
// queue when an item held back may pass. Waiting is done on channels only: there is no polling loop.
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
	// gate, if set (SetGate), makes the queues fair between keys and holds
	// items back.
	gate *Gate[T]
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

// Gate makes a set of queues fair between keys and lets a caller hold
// items back (concurrency and rate limits). Without one (the default),
// every queue is one FIFO.
type Gate[T any] struct {
	// Key names the fairness key of an item and its kind (the activity
	// type): the queue serves its keys in turn, round-robin, and each
	// key's items of every kind oldest first.
	Key func(T) (key, kind string)
	// Admit says whether item may be handed to a poller now; when it
	// reports true it has reserved whatever the item takes (a slot).
	// Items of one key and kind are assumed to be admitted alike: when the
	// oldest is not, the others wait behind it. Called with the queues'
	// lock held: it must be quick and must not call back into q.
	Admit func(queue string, item T) bool
	// Unadmit gives back what Admit reserved for an item that no poller
	// took after all (see GiveBack). Called with the queues' lock held.
	Unadmit func(queue string, item T)
}

// SetGate installs g (before any concurrent use of q). Wake a queue whose
// items Admit refused once they may pass (Kick).
func (q *Queues[T]) SetGate(g Gate[T]) {
	q.mu.Lock()
	q.gate = &g
	q.mu.Unlock()
}

// Kick hands the items of the named queue that may pass the gate now to
// its waiting pollers (after a slot was freed, or a rate limit refilled).
func (q *Queues[T]) Kick(queue string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qq := q.queues[queue]; qq != nil && !q.closed {
		q.matchLocked(queue, qq)
		q.release(queue, qq)
	}
}

// queue is one named queue: its items, by fairness key and kind (a single
// key and kind without a gate), and its waiting pollers.
type queue[T any] struct {
	ring  []*fairKey[T] // the keys with items, in turn order
	keys  map[string]*fairKey[T]
	next  int // ring[next] is served first next time
	n     int // items queued
	seq   int64
	front int64 // seq of items put back at the front: below every other

	// Doubly linked FIFO of waiting pollers, oldest at first.
	first, last *waiter[T]
	nwait       int
}

// fairKey is the items of one fairness key, a FIFO per kind.
type fairKey[T any] struct {
	name  string
	kinds []*fifo[T]
}

type fifo[T any] struct {
	kind  string
	items []entry[T]
	head  int // items[head:] are queued, oldest first
}

type entry[T any] struct {
	item T
	seq  int64
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

func (q *queue[T]) empty() bool { return q.n == 0 && q.nwait == 0 }

// fifoOf returns the FIFO of key and kind, made on first use.
func (q *queue[T]) fifoOf(key, kind string) *fifo[T] {
	if len(q.ring) == 1 && q.ring[0].name == key && len(q.ring[0].kinds) == 1 && q.ring[0].kinds[0].kind == kind {
		return q.ring[0].kinds[0] // one key, one kind: every queue without a gate
	}
	fk := q.keys[key]
	if fk == nil {
		if q.keys == nil {
			q.keys = map[string]*fairKey[T]{}
		}
		fk = &fairKey[T]{name: key}
		q.keys[key] = fk
		q.ring = append(q.ring, fk)
	}
	for _, f := range fk.kinds {
		if f.kind == kind {
			return f
		}
	}
	f := &fifo[T]{kind: kind}
	fk.kinds = append(fk.kinds, f)
	return f
}

func (q *Queues[T]) keyOf(item T) (string, string) {
	if q.gate == nil || q.gate.Key == nil {
		return "", ""
	}
	return q.gate.Key(item)
}

func (q *Queues[T]) pushBack(qq *queue[T], item T) {
	key, kind := q.keyOf(item)
	f := qq.fifoOf(key, kind)
	qq.seq++
	f.items = append(f.items, entry[T]{item: item, seq: qq.seq})
	qq.n++
}

func (q *Queues[T]) pushFront(qq *queue[T], item T) {
	key, kind := q.keyOf(item)
	f := qq.fifoOf(key, kind)
	qq.front--
	e := entry[T]{item: item, seq: qq.front}
	qq.n++
	if f.head > 0 {
		f.head--
		f.items[f.head] = e
		return
	}
	f.items = append(f.items, e)
	copy(f.items[1:], f.items)
	f.items[0] = e
}

func (f *fifo[T]) len() int { return len(f.items) - f.head }

func (f *fifo[T]) popFront() T {
	var zero entry[T]
	item := f.items[f.head].item
	f.items[f.head] = zero
	f.head++
	switch {
	case f.head == len(f.items):
		f.items, f.head = f.items[:0], 0
	case f.head >= 64 && f.head*2 >= len(f.items):
		n := copy(f.items, f.items[f.head:])
		clear(f.items[n:])
		f.items, f.head = f.items[:n], 0
	}
	return item
}

// popLocked takes the next item a poller may have: the keys in turn, and
// within a key the oldest item the gate admits (by kind). It reports false
// when no item may pass.
func (q *Queues[T]) popLocked(name string, qq *queue[T]) (T, bool) {
	var zero T
	for i := range len(qq.ring) {
		idx := (qq.next + i) % len(qq.ring)
		fk := qq.ring[idx]
		f := q.admitted(name, fk)
		if f == nil {
			continue
		}
		item := f.popFront()
		qq.n--
		qq.next = idx + 1
		if f.len() == 0 {
			fk.kinds = slices.DeleteFunc(fk.kinds, func(x *fifo[T]) bool { return x == f })
			if len(fk.kinds) == 0 {
				delete(qq.keys, fk.name)
				qq.ring = slices.Delete(qq.ring, idx, idx+1)
				qq.next = idx
			}
		}
		if qq.next >= len(qq.ring) {
			qq.next = 0
		}
		return item, true
	}
	return zero, false
}

// admitted returns the FIFO of fk whose oldest item the gate admits,
// trying the kinds oldest first, or nil.
func (q *Queues[T]) admitted(name string, fk *fairKey[T]) *fifo[T] {
	if len(fk.kinds) == 1 {
		f := fk.kinds[0]
		if q.admit(name, f.items[f.head].item) {
			return f
		}
		return nil
	}
	var buf [8]*fifo[T]
	kinds := append(buf[:0], fk.kinds...)
	slices.SortFunc(kinds, func(a, b *fifo[T]) int {
		return cmpInt64(a.items[a.head].seq, b.items[b.head].seq)
	})
	for _, f := range kinds {
		if q.admit(name, f.items[f.head].item) {
			return f
		}
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (q *Queues[T]) admit(name string, item T) bool {
	return q.gate == nil || q.gate.Admit == nil || q.gate.Admit(name, item)
}

// matchLocked hands the queue's items that may pass to its waiting
// pollers, longest waiting first.
func (q *Queues[T]) matchLocked(name string, qq *queue[T]) {
	for qq.first != nil && qq.n > 0 {
		item, ok := q.popLocked(name, qq)
		if !ok {
			return
		}
		w := qq.first
		qq.unlink(w)
		w.ch <- result[T]{item: item, ok: true}
	}
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

// Push adds item to the named queue. If a poller is waiting on that queue
// and the item may pass the gate it is handed to the one that has waited
// longest; otherwise it is queued. Push after Close still queues the item,
// but no Poll will return it.
func (q *Queues[T]) Push(queue string, item T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	qq := q.get(queue)
	q.pushBack(qq, item)
	if !q.closed {
		q.matchLocked(queue, qq)
	}
	q.release(queue, qq)
}

// Offer hands item to the poller that has waited longest on the named queue
// and reports true; when no poller waits (or the gate holds the item back)
// it queues nothing and reports false.
func (q *Queues[T]) Offer(queue string, item T) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	qq := q.queues[queue]
	if q.closed || qq == nil || qq.first == nil || !q.admit(queue, item) {
		return false
	}
	q.handLocked(queue, qq, item)
	return true
}

// handLocked hands item to the oldest waiter of qq (there is one).
func (q *Queues[T]) handLocked(name string, qq *queue[T], item T) {
	w := qq.first
	qq.unlink(w)
	w.ch <- result[T]{item: item, ok: true}
	q.release(name, qq)
}

// OfferBuilt is Offer for an item that depends on who takes it: when a
// poller waits, build is called with its tag (under the queues' lock, so
// it must be quick and must not call back into q) and, if it reports true,
// its item is handed to that poller. The gate is not consulted: build
// admits its item itself.
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
	q.handLocked(queue, qq, item)
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
	if item, ok := q.popLocked(queue, qq); ok {
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
	if q.gate != nil && q.gate.Unadmit != nil {
		q.gate.Unadmit(name, item)
	}
	qq := q.get(name)
	q.pushFront(qq, item)
	if !q.closed {
		q.matchLocked(name, qq)
	}
	q.release(name, qq)
}

// Len returns the number of items queued (not yet handed to a poller) in the
// named queue.
func (q *Queues[T]) Len(queue string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if qq := q.queues[queue]; qq != nil {
		return qq.n
	}
	return 0
}

// Items returns a copy of the items queued (not yet handed to a poller) in
// the named queue: each key's items in turn order, each kind oldest first.
func (q *Queues[T]) Items(queue string) []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	qq := q.queues[queue]
	if qq == nil {
		return nil
	}
	out := make([]T, 0, qq.n)
	for _, fk := range qq.ring {
		for _, f := range fk.kinds {
			for _, e := range f.items[f.head:] {
				out = append(out, e.item)
			}
		}
	}
	return out
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
