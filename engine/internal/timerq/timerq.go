// Package timerq is the engine's timer queue: a min-heap of (deadline, key)
// entries served by a single goroutine.
//
// There is no polling tick. Exactly one clock.AfterFunc is armed, for the
// earliest deadline; it is re-armed (the old one stopped) when an earlier
// entry is added. When it fires it wakes the queue's goroutine, which pops
// and fires every entry whose deadline is at or before clk.Now() and then
// re-arms for the next one. Firing is therefore as exact as the underlying
// clock's timers (sub-millisecond with the real clock).
package timerq

import (
	"container/heap"
	"sync"
	"time"

	"github.com/cairnflow/cairn/internal/clock"
)

// Entry is one scheduled timer: Key is passed to the fire callback once the
// clock reaches At.
type Entry[K comparable] struct {
	// At is the deadline.
	At time.Time
	// Key identifies the timer to the engine.
	Key K
}

// Queue is a timer heap that calls a fire function for each entry when its
// deadline passes. Create one with New; its methods are safe for concurrent
// use.
type Queue[K comparable] struct {
	clk  clock.Clock
	fire func(K)

	mu      sync.Mutex
	h       entryHeap[K]
	seq     uint64
	timer   clock.Timer // armed clock timer, nil if none
	armed   bool        // timer is armed and has not fired yet
	armedAt time.Time   // deadline timer is armed for, if armed
	gen     uint64      // incremented on every arm; identifies timer
	started bool
	stopped bool

	busy bool       // the goroutine is inside a fire call
	idle *sync.Cond // broadcast when busy clears or the heap's top changes

	wake chan struct{} // capacity 1: coalesced wake-up signal
	quit chan struct{}
	done chan struct{}
}

// New returns a Queue that calls fire for each due entry. fire is called from
// the queue's goroutine, one call at a time, in deadline order (entries with
// equal deadlines in the order they were added). fire must not call Stop.
// The queue does nothing until Start.
func New[K comparable](clk clock.Clock, fire func(K)) *Queue[K] {
	q := &Queue[K]{
		clk:  clk,
		fire: fire,
		wake: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
	q.idle = sync.NewCond(&q.mu)
	return q
}

// Due reports whether an entry is due at the clock's current time.
func (q *Queue[K]) Due() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return !q.stopped && len(q.h) > 0 && !q.h[0].At.After(q.clk.Now())
}

// Sync waits until every entry due at the clock's current time has been
// handed to fire and the fire calls have returned, and the clock has a
// timer armed for the next entry. Tests use it after advancing a fake
// clock; it does not sleep. (A test that skips time reads the clock's next
// deadline right after Sync: returning after the fire calls but before the
// queue re-armed for the next entry left it nothing to skip to, and it
// waited forever.)
func (q *Queue[K]) Sync() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.started && !q.stopped && (q.busy || (len(q.h) > 0 && (!q.h[0].At.After(q.clk.Now()) || !q.armed))) {
		q.signal()
		q.idle.Wait()
	}
}

// Add schedules key to be fired at at. Duplicate keys and deadlines are
// allowed; the engine validates timers when they fire. An entry whose
// deadline has already passed fires promptly. Entries added after Stop are
// kept but never fired.
func (q *Queue[K]) Add(at time.Time, key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	heap.Push(&q.h, &item[K]{Entry: Entry[K]{At: at, Key: key}, seq: q.seq})
	if q.stopped {
		return
	}
	if !q.armed || at.Before(q.armedAt) {
		q.armLocked(at)
	}
}

// armLocked schedules a wake-up of the goroutine at the deadline at,
// replacing any armed clock timer. A deadline already passed signals the
// goroutine directly instead of arming a timer.
func (q *Queue[K]) armLocked(at time.Time) {
	if q.timer != nil {
		q.timer.Stop() // if its callback already started, gen makes it inert
		q.timer = nil
	}
	q.gen++
	q.armed = false
	d := at.Sub(q.clk.Now())
	if d <= 0 {
		q.signal()
		return
	}
	gen := q.gen
	q.armed, q.armedAt = true, at
	q.timer = q.clk.AfterFunc(d, func() {
		q.mu.Lock()
		if q.gen == gen {
			q.armed, q.timer = false, nil
		}
		q.mu.Unlock()
		q.signal()
	})
}

// signal wakes the goroutine; repeated signals coalesce.
func (q *Queue[K]) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// Len returns the number of entries not yet fired.
func (q *Queue[K]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.h)
}

// Start launches the queue's goroutine. Entries added before Start whose
// deadlines have passed fire immediately. Start after Start or Stop is a
// no-op.
func (q *Queue[K]) Start() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.stopped {
		return
	}
	q.started = true
	go q.run()
}

// Stop stops the queue: the armed clock timer is cancelled, no further
// entries fire, and Stop waits for the goroutine to exit (including a fire
// call in progress). Stop is idempotent and may be called without Start.
func (q *Queue[K]) Stop() {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		<-q.doneIfStarted()
		return
	}
	q.stopped = true
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
	q.armed = false
	started := q.started
	q.mu.Unlock()
	close(q.quit)
	if started {
		<-q.done
	}
	q.mu.Lock()
	q.idle.Broadcast()
	q.mu.Unlock()
}

// doneIfStarted returns a channel closed once the goroutine has exited (or
// already closed if it was never started). Called after stopped is set.
func (q *Queue[K]) doneIfStarted() <-chan struct{} {
	q.mu.Lock()
	started := q.started
	q.mu.Unlock()
	if started {
		return q.done
	}
	c := make(chan struct{})
	close(c)
	return c
}

func (q *Queue[K]) run() {
	defer close(q.done)
	for {
		select {
		case <-q.quit:
			return
		case <-q.wake:
		}
		for {
			key, ok := q.popDue()
			if !ok {
				break
			}
			select {
			case <-q.quit:
				return
			default:
			}
			q.fire(key)
			q.mu.Lock()
			q.busy = false
			q.idle.Broadcast()
			q.mu.Unlock()
		}
		q.mu.Lock()
		q.idle.Broadcast()
		q.mu.Unlock()
	}
}

// popDue removes and returns the earliest entry if it is due. Otherwise it
// arms a wake-up for the earliest entry (if any, and if none is armed for an
// earlier or equal deadline) and reports false.
func (q *Queue[K]) popDue() (K, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var zero K
	if q.stopped || len(q.h) == 0 {
		return zero, false
	}
	top := q.h[0]
	// Now is read per entry so entries that fall due while earlier ones are
	// being fired go out in the same pass.
	if !top.At.After(q.clk.Now()) {
		heap.Pop(&q.h)
		q.busy = true
		return top.Key, true
	}
	if !q.armed || top.At.Before(q.armedAt) {
		q.armLocked(top.At)
	}
	return zero, false
}

type item[K comparable] struct {
	Entry[K]
	seq uint64
}

type entryHeap[K comparable] []*item[K]

func (h entryHeap[K]) Len() int { return len(h) }
func (h entryHeap[K]) Less(i, j int) bool {
	if !h[i].At.Equal(h[j].At) {
		return h[i].At.Before(h[j].At)
	}
	return h[i].seq < h[j].seq
}
func (h entryHeap[K]) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *entryHeap[K]) Push(x any)   { *h = append(*h, x.(*item[K])) }
func (h *entryHeap[K]) Pop() any {
	old := *h
	n := len(old)
	it := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return it
}
