// Package runpool runs functions on goroutines that outlive one function.
//
// A new goroutine starts with a small stack and grows it, by copying,
// each time the work goes deeper than before; work that goes deep on
// every call (the engine's call path, msgpack encoding, a workflow's first
// steps) pays for that growth every time. Measured under cairn bench,
// stack growth was 9% of the server's CPU and 18% of the worker's with a
// goroutine per call. A pool goroutine keeps its grown stack for the next
// function.
package runpool

import "sync/atomic"

// Pool hands functions to idle goroutines, starting new ones when none is
// idle. The zero value is not usable; call New.
type Pool struct {
	work    chan func()
	idle    atomic.Int32
	started atomic.Int32 // goroutines started (tests)
	maxIdle int32
}

// New returns a pool that keeps at most maxIdle goroutines waiting for
// work; a goroutine that finds that many already waiting exits.
func New(maxIdle int) *Pool {
	return &Pool{work: make(chan func()), maxIdle: int32(maxIdle)}
}

// Go runs f on an idle pool goroutine, or on a new one. Like a go
// statement, it does not wait for f.
func (p *Pool) Go(f func()) {
	select {
	case p.work <- f:
	default:
		p.started.Add(1)
		go p.loop(f)
	}
}

// Idle reports how many goroutines wait for work (tests).
func (p *Pool) Idle() int { return int(p.idle.Load()) }

func (p *Pool) loop(f func()) {
	for {
		f()
		if p.idle.Add(1) > p.maxIdle {
			p.idle.Add(-1)
			return
		}
		f = <-p.work
		p.idle.Add(-1)
	}
}
