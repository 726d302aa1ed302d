package engine

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
)

// watch is the engine-wide change signal used by test environments that
// skip time: a channel closed and replaced after every transition, kept
// only while someone watches.
type watch struct {
	watchers atomic.Int32
	mu       sync.Mutex
	ch       chan struct{}
}

func (w *watch) notify() {
	if w.watchers.Load() == 0 {
		return
	}
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	w.mu.Unlock()
}

// Changed returns a channel that is closed at the engine's next transition.
// Call Unwatch when done watching. It is meant for test environments that
// advance a fake clock when nothing else can happen.
func (e *Engine) Changed() <-chan struct{} {
	e.watch.watchers.Add(1)
	e.watch.mu.Lock()
	defer e.watch.mu.Unlock()
	if e.watch.ch == nil {
		e.watch.ch = make(chan struct{})
	}
	return e.watch.ch
}

// Unwatch undoes one Changed call's registration.
func (e *Engine) Unwatch() { e.watch.watchers.Add(-1) }

// Settle waits until every deadline due at the clock's current time has
// been applied (committed), for tests that advance a fake clock. It does not
// sleep: it waits on the timer queue and on the transitions in progress.
func (e *Engine) Settle() {
	for {
		e.timers.Sync()
		e.firingMu.Lock()
		for e.firing.Load() > 0 {
			e.firingCond.Wait()
		}
		e.firingMu.Unlock()
		if !e.timers.Due() {
			return
		}
	}
}

func (e *Engine) fireDone() {
	if e.firing.Add(-1) == 0 {
		e.firingMu.Lock()
		e.firingCond.Broadcast()
		e.firingMu.Unlock()
	}
}

// Quiescent reports whether nothing can happen without time passing: no
// open run has a workflow task or an activity attempt scheduled or running,
// no timer's transition is being applied, and open runs exist. A test
// environment may then advance its fake clock to the next deadline.
func (e *Engine) Quiescent() bool {
	if e.firing.Load() > 0 {
		return false
	}
	e.mu.RLock()
	entries := make([]*runEntry, 0, len(e.open))
	for _, r := range e.open {
		entries = append(entries, r)
	}
	e.mu.RUnlock()
	if len(entries) == 0 {
		return false
	}
	for _, r := range entries {
		unlock := e.lock(r.ref.WorkflowID)
		busy := runBusy(r.state)
		unlock()
		if busy {
			return false
		}
	}
	return true
}

// runBusy: the run has work that needs no time to pass.
func runBusy(st *machine.RunState) bool {
	if !st.Status.Open() {
		return false
	}
	if (st.WFT.Scheduled && st.WFT.BackoffUntil.IsZero()) || st.WFT.Started {
		return true
	}
	for _, a := range st.Activities {
		if a.State == api.ActivityStateScheduled || a.State == api.ActivityStateStarted {
			return true
		}
	}
	return false
}

// TaskQueues returns the task queues that have ready tasks or waiting
// pollers right now, without workers' sticky queues (for metrics).
func (e *Engine) TaskQueues() []string {
	seen := map[string]bool{}
	var out []string
	for _, names := range [][]string{e.wftQ.Names(), e.actQ.Names()} {
		for _, n := range names {
			if !seen[n] && !strings.Contains(n, "/sticky/") {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}
