package historytest

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
)

func testAppendAndRead(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-append", RunID: "r1"}
	wantNoRun(t, s, run)
	got, err := collect(s, run, 1)
	if len(got) != 0 || !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("Events of unknown run: %d events, error %v; want ErrNotFound", len(got), err)
	}

	want := appendN(t, s, run, 1, 3)
	want = append(want, appendN(t, s, run, 4, 2)...)
	wantLast(t, s, run, 5)
	wantEvents(t, "ReadEvents", readAll(t, s, run), want)
	got, err = collect(s, run, 1)
	wantNoErr(t, "Events", err)
	wantEvents(t, "Events", got, want)
	wantNoRun(t, s, history.RunRef{WorkflowID: "wf-append", RunID: "r2"})
}

// testRunIsolation: runs whose ids share prefixes, or contain 0x00, never
// see each other's events.
func testRunIsolation(t *testing.T, h Harness) {
	s := open(t, h)
	runs := []history.RunRef{
		{WorkflowID: "a", RunID: "b"},
		{WorkflowID: "a", RunID: "bc"},
		{WorkflowID: "ab", RunID: "c"},
		{WorkflowID: "a\x00b", RunID: "c"},
		{WorkflowID: "a", RunID: "\x00bc"},
		{WorkflowID: "a\xff", RunID: "b"},
	}
	for i, run := range runs {
		appendN(t, s, run, 1, i+1)
	}
	for i, run := range runs {
		wantLast(t, s, run, int64(i+1))
		wantEvents(t, fmt.Sprintf("run %q", run), readAll(t, s, run), Events(1, i+1))
	}
}

func testExpectedNextConflict(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-conflict", RunID: "r1"}
	want := appendN(t, s, run, 1, 3)
	marker := put(history.SpaceMeta, "marker", "x")
	for _, next := range []int64{1, 3, 5} {
		b := appendBatch(run, Events(next, 2)...)
		b.Puts = []history.Record{marker}
		wantErr(t, fmt.Sprintf("append with ExpectedNext %d to a history of 3", next), s.Commit(ctx, b), history.ErrConflict)
	}
	fresh := history.RunRef{WorkflowID: "wf-conflict", RunID: "r2"}
	wantErr(t, "append with ExpectedNext 2 to a new run", s.Commit(ctx, appendBatch(fresh, Events(2, 1)...)), history.ErrConflict)

	wantLast(t, s, run, 3)
	wantEvents(t, "history after conflicts", readAll(t, s, run), want)
	wantNoRun(t, s, fresh)
	wantAbsent(t, s, marker.Space, marker.Key)

	want = append(want, appendN(t, s, run, 4, 1)...)
	wantEvents(t, "history after the next append", readAll(t, s, run), want)
}

// testBatchAtomicity: a batch that fails any check writes none of its
// appends, puts and deletes; one that passes writes all of them.
func testBatchAtomicity(t *testing.T, h Harness) {
	s := open(t, h)
	runA := history.RunRef{WorkflowID: "wf-atomic", RunID: "a"}
	runB := history.RunRef{WorkflowID: "wf-atomic", RunID: "b"}
	doomed := put(history.SpaceTask, "doomed", "1")
	mustCommit(t, s, &history.Batch{Puts: []history.Record{doomed}})
	wantA := appendN(t, s, runA, 1, 2)

	batch := func(nextA int64, conds ...history.Condition) *history.Batch {
		return &history.Batch{
			Conditions: conds,
			Appends: []history.Append{
				{Run: runB, ExpectedNext: 1, Events: Events(1, 2)},
				{Run: runA, ExpectedNext: nextA, Events: Events(nextA, 2)},
			},
			Puts:    []history.Record{put(history.SpaceRunState, "p1", "v1"), put(history.SpaceLedger, "p2", "v2")},
			Deletes: []history.RecordKey{{Space: doomed.Space, Key: doomed.Key}},
		}
	}
	unchanged := func(what string) {
		t.Helper()
		wantNoRun(t, s, runB)
		wantEvents(t, what, readAll(t, s, runA), wantA)
		wantAbsent(t, s, history.SpaceRunState, []byte("p1"))
		wantAbsent(t, s, history.SpaceLedger, []byte("p2"))
		wantValue(t, s, doomed.Space, doomed.Key, doomed.Value)
	}

	err := s.Commit(ctx, batch(3, history.Condition{Space: doomed.Space, Key: doomed.Key, Exists: false}))
	wantErr(t, "batch with a failing condition", err, history.ErrConflict)
	unchanged("after a failing condition")

	err = s.Commit(ctx, batch(2))
	wantErr(t, "batch whose second append is stale", err, history.ErrConflict)
	unchanged("after a stale append")

	mustCommit(t, s, batch(3, history.Condition{Space: doomed.Space, Key: doomed.Key, Exists: true}))
	wantEvents(t, "run b", readAll(t, s, runB), Events(1, 2))
	wantEvents(t, "run a", readAll(t, s, runA), Events(1, 4))
	wantValue(t, s, history.SpaceRunState, []byte("p1"), []byte("v1"))
	wantValue(t, s, history.SpaceLedger, []byte("p2"), []byte("v2"))
	wantAbsent(t, s, doomed.Space, doomed.Key)
}

func testEmptyBatches(t *testing.T, h Harness) {
	s := open(t, h)
	mustCommit(t, s, &history.Batch{})
	key := []byte("k")
	absent := history.Condition{Space: history.SpaceMeta, Key: key}
	mustCommit(t, s, &history.Batch{Conditions: []history.Condition{absent}})
	mustCommit(t, s, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: key}}})
	wantErr(t, "condition-only batch that fails", s.Commit(ctx, &history.Batch{Conditions: []history.Condition{absent}}), history.ErrConflict)
}

func testReadEventsRange(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-range", RunID: "r1"}
	all := appendN(t, s, run, 1, 10)
	cases := []struct {
		from     int64
		limit    int
		from1    int64 // first event expected
		expected int
	}{
		{0, 0, 1, 10}, {1, 0, 1, 10}, {-5, 2, 1, 2}, {4, 0, 4, 7}, {4, 3, 4, 3},
		{9, 5, 9, 2}, {10, 1, 10, 1}, {11, 0, 0, 0}, {100, 3, 0, 0}, {1, 10, 1, 10}, {1, 11, 1, 10},
	}
	for _, c := range cases {
		want := all[:0:0]
		if c.expected > 0 {
			want = all[c.from1-1 : c.from1-1+int64(c.expected)]
		}
		got, err := s.ReadEvents(ctx, run, c.from, c.limit)
		wantNoErr(t, fmt.Sprintf("ReadEvents(from %d, limit %d)", c.from, c.limit), err)
		wantEvents(t, fmt.Sprintf("ReadEvents(from %d, limit %d)", c.from, c.limit), got, want)
		if c.limit == 0 {
			got, err = collect(s, run, c.from)
			wantNoErr(t, fmt.Sprintf("Events(from %d)", c.from), err)
			wantEvents(t, fmt.Sprintf("Events(from %d)", c.from), got, want)
		}
	}
}

func testEventsIterator(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-iter", RunID: "r1"}
	want := appendN(t, s, run, 1, 5)

	n := 0
	for ev, err := range s.Events(ctx, run, 1) {
		wantNoErr(t, "Events", err)
		if n++; ev.ID != int64(n) {
			t.Fatalf("Events yielded event %d at position %d", ev.ID, n)
		}
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("loop ran %d times before break, want 3", n)
	}

	// One snapshot: events committed during the iteration are not seen.
	var got []history.Event
	for ev, err := range s.Events(ctx, run, 1) {
		wantNoErr(t, "Events", err)
		if ev.ID == 1 {
			appendN(t, s, run, 6, 3)
		}
		got = append(got, ev)
	}
	wantEvents(t, "Events during a concurrent append", got, want)
	wantLast(t, s, run, 8)
}

// testLargeHistory appends a long history in chunks and reads it back whole.
func testLargeHistory(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-large", RunID: "r1"}
	n, chunk := largeHistoryEvents(), 1000
	for from := 1; from <= n; from += chunk {
		mustCommit(t, s, appendBatch(run, Events(int64(from), min(chunk, n-from+1))...))
	}
	wantLast(t, s, run, int64(n))

	got := readAll(t, s, run)
	if len(got) != n {
		t.Fatalf("ReadEvents returned %d events, want %d", len(got), n)
	}
	for i, ev := range got {
		if i%97 == 0 || i == n-1 { // encoding every event again would dominate the test
			if !sameEvent(ev, Event(int64(i+1))) {
				t.Fatalf("event %d: got %v %+v", i+1, ev, ev.Attrs)
			}
		} else if ev.ID != int64(i+1) {
			t.Fatalf("event at position %d has id %d", i+1, ev.ID)
		}
	}
	count := 0
	for ev, err := range s.Events(ctx, run, 1) {
		wantNoErr(t, "Events", err)
		if count++; ev.ID != int64(count) {
			t.Fatalf("Events yielded event %d at position %d", ev.ID, count)
		}
	}
	if count != n {
		t.Fatalf("Events yielded %d events, want %d", count, n)
	}
	tail, err := s.ReadEvents(ctx, run, int64(n-9), 0)
	wantNoErr(t, "ReadEvents tail", err)
	wantEvents(t, "tail", tail, Events(int64(n-9), 10))
}

// testCorruption: a damaged event record is reported as ErrCorrupt naming
// the workflow, run and event; the undamaged events stay readable.
func testCorruption(t *testing.T, h Harness) {
	if h.Corrupt == nil {
		t.Skip("harness cannot corrupt records")
	}
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-corrupt", RunID: "r1"}
	want := appendN(t, s, run, 1, 5)
	h.Corrupt(t, s, run, 3)

	_, err := s.ReadEvents(ctx, run, 1, 0)
	wantCorrupt(t, "ReadEvents", err, run, 3)
	got, err := collect(s, run, 1)
	wantCorrupt(t, "Events", err, run, 3)
	wantEvents(t, "events before the damaged one", got, want[:2])

	got, err = s.ReadEvents(ctx, run, 4, 0)
	wantNoErr(t, "ReadEvents after the damaged event", err)
	wantEvents(t, "events after the damaged one", got, want[3:])
	got, err = s.ReadEvents(ctx, run, 1, 2)
	wantNoErr(t, "ReadEvents before the damaged event", err)
	wantEvents(t, "events before the damaged one", got, want[:2])
	wantLast(t, s, run, 5)
}

func wantCorrupt(t *testing.T, what string, err error, run history.RunRef, id int64) {
	t.Helper()
	wantErr(t, what, err, history.ErrCorrupt)
	var ce *history.CorruptError
	if !errors.As(err, &ce) || ce.Run != run || ce.EventID != id {
		t.Fatalf("%s: error %v does not name %v event %d", what, err, run, id)
	}
	for _, s := range []string{run.WorkflowID, run.RunID, fmt.Sprintf("event %d", id)} {
		if !strings.Contains(err.Error(), s) {
			t.Fatalf("%s: message %q does not mention %q", what, err, s)
		}
	}
}
