package sdk

import (
	"bytes"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/cairnflow/cairn/internal/runpool"
)

// The deterministic cooperative scheduler.
//
// Each workflow coroutine (the root function and each Go) is a goroutine,
// but exactly one of them runs at a time: the scheduler resumes a coroutine
// by a channel handoff and waits until it yields back. A coroutine yields
// only inside SDK blocking calls (Future.Get, channel Receive/Send,
// Selector.Select, Await, Sleep), leaving a condition the scheduler checks
// on its own goroutine — so a blocked coroutine costs no switch until it
// can make progress. A pass resumes every runnable coroutine in creation
// order; passes repeat until none can run. Nothing depends on the Go
// scheduler's choices, so replay is exact.

type coMsgKind uint8

const (
	coYielded coMsgKind = iota + 1
	coFinished
	coPanicked
)

type coMsg struct {
	kind  coMsgKind
	panic *PanicError
}

type coroutine struct {
	e      *Execution
	name   string
	resume chan struct{} // scheduler → coroutine (closed to unwind)
	out    chan coMsg    // coroutine → scheduler, capacity 1
	gid    uint64        // goroutine id, for stack dumps

	// While blocked, the coroutine continues once waitFut is ready, or
	// else once cond holds; the scheduler evaluates them.
	cond     func() bool
	waitFut  *futureState
	started  bool
	finished bool
	// abandoned is set when the coroutine did not yield in time: the
	// scheduler stops waiting for it, and it exits at its next SDK call.
	abandoned atomic.Bool
}

// coroutines runs coroutines on goroutines that outlive one (a workflow's
// code goes deep into the SDK and converters on its first steps; a fresh
// goroutine would grow its stack every time).
var coroutines = runpool.New(256)

// spawn creates a coroutine; it first runs at the scheduler's next pass.
func (e *Execution) spawn(name string, fn func()) *coroutine {
	c := &coroutine{e: e, name: name, resume: make(chan struct{}), out: make(chan coMsg, 1)}
	if e.closing.Load() {
		c.finished = true
		return c
	}
	e.corosMu.Lock()
	e.coros = append(e.coros, c)
	e.corosMu.Unlock()
	coroutines.Go(func() { c.main(fn) })
	return c
}

// coroutineAt returns the i-th coroutine. The list is guarded by corosMu,
// not by the handoff: a coroutine abandoned while running may have
// appended to it without ever synchronising with the scheduler again.
func (e *Execution) coroutineAt(i int) *coroutine {
	e.corosMu.Lock()
	defer e.corosMu.Unlock()
	if i < len(e.coros) {
		return e.coros[i]
	}
	return nil
}

func (c *coroutine) main(fn func()) {
	// Written before the first receive, which the scheduler's first send
	// waits for: the scheduler reads gid only after that.
	c.gid = currentGoroutineID()
	defer c.exit()
	<-c.resume
	if c.e.closing.Load() {
		return
	}
	fn()
}

// exit reports the coroutine's end (normal, panic, or Goexit while
// unwinding) to the scheduler.
func (c *coroutine) exit() {
	msg := coMsg{kind: coFinished}
	if r := recover(); r != nil {
		msg = coMsg{kind: coPanicked, panic: newPanicError(r, debug.Stack())}
	}
	if c.abandoned.Load() {
		// Nobody may be listening any more; never block.
		select {
		case c.out <- msg:
		default:
		}
		return
	}
	c.out <- msg
}

// yield parks the coroutine until fut is ready or cond holds (evaluated by
// the scheduler).
func (c *coroutine) yield(cond func() bool, fut *futureState) {
	if c.abandoned.Load() || c.e.closing.Load() {
		runtime.Goexit()
	}
	c.cond, c.waitFut = cond, fut
	c.out <- coMsg{kind: coYielded}
	<-c.resume
	if c.abandoned.Load() || c.e.closing.Load() {
		runtime.Goexit()
	}
}

// errQueryMutation is the panic of a workflow call that would block or
// change state from a query handler.
const errQueryMutation = "sdk: a query handler must not block or change workflow state"

// mutating returns ctx's Execution for a call that changes workflow state;
// from a query handler it panics before anything changes.
func mutating(ctx Context) (*wfContext, *Execution) {
	c := mustCtx(ctx)
	if c.e.inQuery {
		panic(errQueryMutation)
	}
	return c, c.e
}

// block parks the current coroutine until cond holds. It and awaitFuture
// are the only ways workflow code waits.
func (e *Execution) block(cond func() bool) {
	c := e.running()
	if cond() {
		return
	}
	c.yield(cond, nil)
}

// awaitFuture parks the current coroutine until st is ready.
func (e *Execution) awaitFuture(st *futureState) {
	c := e.running()
	if st.ready {
		return
	}
	c.yield(nil, st)
}

// running returns the coroutine that is running, or explains why a
// blocking call came from elsewhere.
func (e *Execution) running() *coroutine {
	c := e.current
	if c == nil {
		if e.closing.Load() {
			runtime.Goexit()
		}
		if e.inQuery {
			panic(errQueryMutation)
		}
		panic("sdk: blocking workflow call outside a workflow coroutine (from a native goroutine?)")
	}
	return c
}

// blockForever parks the current coroutine for good (after a fatal error).
func (e *Execution) blockForever() {
	e.block(func() bool { return false })
}

// runCoroutines runs every runnable coroutine, in creation order, until all
// are blocked, the root has returned, or a fatal error occurred.
func (e *Execution) runCoroutines() {
	for e.fatal == nil && !e.rootReturned {
		progressed := false
		for i := 0; ; i++ {
			c := e.coroutineAt(i)
			if c == nil {
				break
			}
			if c.finished || (c.started && !e.evalCond(c)) {
				continue
			}
			if e.fatal != nil {
				return
			}
			progressed = true
			e.resume(c)
			if e.fatal != nil || e.rootReturned {
				break
			}
		}
		if !progressed {
			break
		}
	}
	// Drop finished coroutines, keeping creation order.
	e.corosMu.Lock()
	defer e.corosMu.Unlock()
	live := e.coros[:0]
	for _, c := range e.coros {
		if !c.finished {
			live = append(live, c)
		}
	}
	clear(e.coros[len(live):])
	e.coros = live
}

// evalCond evaluates a blocked coroutine's condition; a panic in a user
// condition (Await) becomes the task's PanicError.
func (e *Execution) evalCond(c *coroutine) (ok bool) {
	if c.waitFut != nil {
		return c.waitFut.ready
	}
	defer func() {
		if r := recover(); r != nil {
			e.setFatal(newPanicError(r, debug.Stack()))
			ok = false
		}
	}()
	return c.cond()
}

// resume hands control to c and waits until it yields, finishes, panics, or
// overstays the deadlock timeout.
func (e *Execution) resume(c *coroutine) {
	c.started = true
	c.cond, c.waitFut = nil, nil
	e.current = c
	c.resume <- struct{}{}
	if e.deadlock == nil {
		e.deadlock = time.NewTimer(e.opts.DeadlockTimeout)
	} else {
		e.deadlock.Reset(e.opts.DeadlockTimeout)
	}
	select {
	case m := <-c.out:
		e.deadlock.Stop()
		e.current = nil
		switch m.kind {
		case coFinished:
			c.finished = true
		case coPanicked:
			c.finished = true
			e.setFatal(m.panic)
		}
	case <-e.deadlock.C:
		e.current = nil
		c.abandoned.Store(true)
		c.finished = true
		e.setFatal(&DeadlockError{Coroutine: c.name, Timeout: e.opts.DeadlockTimeout, Stack: goroutineStack(c.gid)})
	}
}

// unwind ends every coroutine (Close): each blocked coroutine wakes inside
// its SDK call and exits with runtime.Goexit, running its deferred calls.
// A coroutine that does not finish within the deadlock timeout is
// abandoned.
func (e *Execution) unwind() {
	e.closing.Store(true)
	for i := 0; ; i++ {
		c := e.coroutineAt(i)
		if c == nil {
			break
		}
		if c.finished || c.abandoned.Load() {
			continue
		}
		e.current = c
		close(c.resume)
		t := time.NewTimer(e.opts.DeadlockTimeout)
		select {
		case <-c.out:
		case <-t.C:
			c.abandoned.Store(true)
		}
		t.Stop()
		c.finished = true
	}
	e.current = nil
	e.corosMu.Lock()
	e.coros = nil
	e.corosMu.Unlock()
}

// currentGoroutineID parses the running goroutine's id from its stack
// header ("goroutine 123 [running]:").
func currentGoroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		id, _ := strconv.ParseUint(string(b[:i]), 10, 64)
		return id
	}
	return 0
}

// goroutineStack returns the stack of goroutine gid, from a dump of all
// goroutines.
func goroutineStack(gid uint64) string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	prefix := []byte(fmt.Sprintf("goroutine %d [", gid))
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.HasPrefix(g, prefix) {
			return string(g)
		}
	}
	return fmt.Sprintf("goroutine %d: stack not found", gid)
}

func stackOf() []byte { return debug.Stack() }
