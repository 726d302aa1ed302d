package httpapi

import "sync/atomic"

// maxIdleRunners bounds the goroutines kept waiting for session calls.
const maxIdleRunners = 128

// runners runs session calls on goroutines that outlive one call. A new
// goroutine per call grows its stack through the engine's call path every
// time (stack copying was 9% of the server's CPU under load); a runner
// keeps its grown stack for the next call.
type runners struct {
	work chan func()
	idle atomic.Int32
}

func newRunners() *runners { return &runners{work: make(chan func())} }

// run hands f to an idle runner, or starts one.
func (r *runners) run(f func()) {
	select {
	case r.work <- f:
	default:
		go r.loop(f)
	}
}

// loop runs f, then waits for more work unless enough runners already wait.
func (r *runners) loop(f func()) {
	for {
		f()
		if r.idle.Add(1) > maxIdleRunners {
			r.idle.Add(-1)
			return
		}
		f = <-r.work
		r.idle.Add(-1)
	}
}
