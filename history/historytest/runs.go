package historytest

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// testRuns: a store that implements history.RunLister names every run
// with events exactly once, in (workflow id, run id) order bytewise —
// ids sharing prefixes or holding 0x00 and 0xFF included — pages with
// after and limit, and names no run without events (records alone, such
// as a run state, make no run).
func testRuns(t *testing.T, h Harness) {
	s := open(t, h)
	rl, ok := s.(history.RunLister)
	if !ok {
		t.Skip("the store does not implement history.RunLister")
	}
	got, err := rl.Runs(ctx, nil, 0)
	wantNoErr(t, "Runs of an empty store", err)
	if len(got) != 0 {
		t.Fatalf("Runs of an empty store: %v", got)
	}
	runs := []history.RunRef{
		{WorkflowID: "a", RunID: "b"},
		{WorkflowID: "a", RunID: "bc"},
		{WorkflowID: "a", RunID: "\x00bc"},
		{WorkflowID: "ab", RunID: "c"},
		{WorkflowID: "a\x00b", RunID: "c"},
		{WorkflowID: "a\xff", RunID: "b"},
		{WorkflowID: "\xff\xff", RunID: "\xff"},
	}
	for i, run := range runs {
		appendN(t, s, run, 1, i%3+1)
	}
	mustCommit(t, s, &history.Batch{Puts: []history.Record{put(history.SpaceRunState, "no-events", "x")}})
	slices.SortFunc(runs, compareRuns)
	got, err = rl.Runs(ctx, nil, 0)
	wantNoErr(t, "Runs", err)
	wantRuns(t, "Runs(nil, 0)", got, runs)
	for _, limit := range []int{1, 2, 3} {
		wantRuns(t, "Runs paged", pageRuns(t, rl, limit), runs)
	}
	got, err = rl.Runs(ctx, &history.RunRef{WorkflowID: "a", RunID: "bb"}, 2)
	wantNoErr(t, "Runs after a run that does not exist", err)
	wantRuns(t, "Runs after a run that does not exist", got, runs[2:4])

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rl.Runs(canceled, nil, 0)
	wantErr(t, "Runs with a canceled context", err, context.Canceled)
	_ = s.Close()
	_, err = rl.Runs(ctx, nil, 0)
	wantErr(t, "Runs after Close", err, history.ErrClosed)
}

// pageRuns lists every run, limit at a time.
func pageRuns(t *testing.T, rl history.RunLister, limit int) []history.RunRef {
	t.Helper()
	var out []history.RunRef
	var after *history.RunRef
	for {
		page, err := rl.Runs(ctx, after, limit)
		wantNoErr(t, "Runs page", err)
		if len(page) > limit {
			t.Fatalf("Runs with limit %d returned %d runs", limit, len(page))
		}
		out = append(out, page...)
		if len(page) < limit {
			return out
		}
		after = &page[len(page)-1]
	}
}

func compareRuns(a, b history.RunRef) int {
	if c := bytes.Compare([]byte(a.WorkflowID), []byte(b.WorkflowID)); c != 0 {
		return c
	}
	return bytes.Compare([]byte(a.RunID), []byte(b.RunID))
}

func wantRuns(t *testing.T, what string, got, want []history.RunRef) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got %q, want %q", what, got, want)
	}
}
