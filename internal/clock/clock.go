// Package clock abstracts time so that code depending on "now" and on
// delayed callbacks can be driven deterministically in tests.
//
// Production code takes a Clock and uses Real(); tests use a *Fake and move
// time explicitly with Advance or Set. Nothing in this package sleeps or
// polls.
package clock

import (
	"container/heap"
	"sync"
	"time"
)

// Clock is a source of the current time and of delayed callbacks.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc arranges for f to be called once d has elapsed and returns a
	// Timer whose Stop cancels the call. For Real, f runs in its own
	// goroutine; for *Fake, f runs synchronously inside Advance or Set.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending callback created by Clock.AfterFunc.
type Timer interface {
	// Stop prevents the callback from running. It reports true if the call
	// was stopped and false if it had already run, started, or been stopped.
	Stop() bool
}

// Real returns a Clock backed by the time package (time.Now and
// time.AfterFunc).
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// Fake is a manually driven Clock for tests. The zero value is not usable;
// create one with NewFake. All methods are safe for concurrent use.
//
// Callbacks registered with AfterFunc never run on their own: they run
// synchronously, in the goroutine calling Advance or Set, in deadline order
// with ties broken by creation order. A callback registered with d <= 0 is due
// immediately and runs on the next Advance or Set (Advance(0) suffices).
// While callbacks run, Now reports the new (advanced) time, not each
// callback's own deadline. Callbacks are invoked without the Fake's lock
// held, so they may call Fake methods (typically AfterFunc or Stop).
type Fake struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	seq    uint64
	timers fakeHeap
}

// NewFake returns a Fake whose current time is start.
func NewFake(start time.Time) *Fake {
	f := &Fake{now: start}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Now returns the fake current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc registers fn to run when the fake time reaches Now()+d. See the
// Fake documentation for when and how fn is invoked.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	t := &fakeTimer{f: f, at: f.now.Add(d), seq: f.seq, fn: fn}
	heap.Push(&f.timers, t)
	f.cond.Broadcast()
	return t
}

// Advance moves the fake time forward by d and then runs every callback whose
// deadline is at or before the new time, one at a time, in deadline order
// (ties by creation order). Callbacks registered by those callbacks that are
// also due run in the same call. Advance returns once no due callback remains.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.runDueLocked()
}

// Set sets the fake time to t (which may be earlier than Now, in which case no
// callback becomes due) and runs due callbacks exactly as Advance does.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	f.now = t
	f.runDueLocked()
}

// runDueLocked runs due callbacks; it is entered with f.mu held and returns
// with it released.
func (f *Fake) runDueLocked() {
	for len(f.timers) > 0 && !f.timers[0].at.After(f.now) {
		t := heap.Pop(&f.timers).(*fakeTimer)
		f.cond.Broadcast()
		f.mu.Unlock()
		t.fn()
		f.mu.Lock()
	}
	f.mu.Unlock()
}

// NextDeadline returns the deadline of the earliest pending callback, and
// false if none is pending. A test environment can use it to skip time ahead
// when every goroutine is blocked on timers: f.Set(deadline).
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.timers[0].at, true
}

// Pending returns the number of callbacks registered and neither run nor
// stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil blocks until at least n callbacks are pending. It waits on a
// condition variable signalled by AfterFunc, so it neither sleeps nor polls.
// It is meant for tests that must wait for another goroutine to arm a timer
// before advancing time.
func (f *Fake) BlockUntil(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) < n {
		f.cond.Wait()
	}
}

// BlockUntilDueWithin blocks until a pending callback is due within d of
// the current time. Like BlockUntil it waits on AfterFunc's signal; it
// tells a short timer (a retry's backoff) from the long ones around it.
func (f *Fake) BlockUntilDueWithin(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) == 0 || f.timers[0].at.After(f.now.Add(d)) {
		f.cond.Wait()
	}
}

type fakeTimer struct {
	f     *Fake
	at    time.Time
	seq   uint64
	fn    func()
	index int // position in f.timers; -1 once popped or stopped
}

// Stop cancels the callback if it is still pending.
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.f.timers, t.index)
	t.f.cond.Broadcast()
	return true
}

type fakeHeap []*fakeTimer

func (h fakeHeap) Len() int { return len(h) }
func (h fakeHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h fakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *fakeHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	t.index = -1
	*h = old[:n-1]
	return t
}
