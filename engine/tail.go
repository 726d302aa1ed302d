package engine

import "github.com/cairnflow/cairn/history"

// tailKeep is the history length up to which an open run keeps all of its
// events in memory; past it, only the events its next workflow task needs
// (those since the last dispatch) are kept.
const tailKeep = 64

// eventTail is the in-memory end of an open run's history, so that
// dispatching a workflow task seldom reads the store: a young run's whole
// history, or an older run's events since its last workflow task (what a
// sticky worker needs). Accessed under the run's stripe lock. Events are
// shared with callers, which must treat them as read-only (every Service
// result is).
type eventTail struct {
	from   int64 // the id of events[0]; 0: nothing cached
	events []history.Event
}

// extend appends a committed transition's events (first is their first id).
func (t *eventTail) extend(first int64, evs []history.Event) {
	if len(evs) == 0 {
		return
	}
	if t.from == 0 || first != t.from+int64(len(t.events)) {
		if first != 1 {
			t.reset(0)
			return
		}
		t.from, t.events = 1, nil
	}
	t.events = append(t.events, evs...)
}

// reset forgets the cached events; from, if non-zero, is the id the next
// cached event must have.
func (t *eventTail) reset(from int64) { t.from, t.events = from, nil }

// get returns a copy of events [first, next) if the tail holds them all.
func (t *eventTail) get(first, next int64) ([]history.Event, bool) {
	if t.from == 0 || first < t.from || next != t.from+int64(len(t.events)) {
		return nil, false
	}
	return append([]history.Event(nil), t.events[first-t.from:]...), true
}

// dispatched trims what a later task can no longer need: with a history
// past tailKeep, events before next (the events just handed out; a sticky
// worker's next task starts at next).
func (t *eventTail) dispatched(next int64) {
	if t.from == 0 || next-1 <= tailKeep || next <= t.from {
		return
	}
	t.events = append([]history.Event(nil), t.events[next-t.from:]...)
	t.from = next
}
