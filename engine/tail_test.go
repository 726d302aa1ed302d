package engine

import (
	"testing"

	"github.com/cairnflow/cairn/history"
)

func evs(from, to int64) []history.Event {
	var out []history.Event
	for id := from; id <= to; id++ {
		out = append(out, history.Event{ID: id, Attrs: &history.TimerFired{TimerID: "t"}})
	}
	return out
}

func TestEventTail(t *testing.T) {
	var tl eventTail
	tl.extend(1, evs(1, 3))
	tl.extend(4, evs(4, 5))
	if got, ok := tl.get(1, 6); !ok || len(got) != 5 || got[0].ID != 1 || got[4].ID != 5 {
		t.Fatalf("whole young history: %v %v", got, ok)
	}
	if _, ok := tl.get(2, 7); ok {
		t.Fatal("a range past the cached end must miss")
	}
	tl.dispatched(6) // young: everything is kept
	if _, ok := tl.get(1, 6); !ok {
		t.Fatal("a young run keeps its whole history")
	}
	tl.extend(6, evs(6, 100))
	tl.dispatched(101) // old: only what a sticky worker needs next is kept
	if _, ok := tl.get(1, 101); ok {
		t.Fatal("an old run's full history must come from the store")
	}
	tl.extend(101, evs(101, 102))
	if got, ok := tl.get(101, 103); !ok || len(got) != 2 {
		t.Fatalf("sticky range after trimming: %v %v", got, ok)
	}
	tl.extend(200, evs(200, 201)) // a gap: the tail no longer knows
	if _, ok := tl.get(101, 202); ok {
		t.Fatal("after a gap nothing may be served")
	}
	// A copy, not a view: later appends do not change what was returned.
	var t2 eventTail
	t2.extend(1, evs(1, 2))
	got, _ := t2.get(1, 3)
	t2.extend(3, evs(3, 3))
	if len(got) != 2 {
		t.Fatal("get must return a copy")
	}
}
