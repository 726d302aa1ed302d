package engine

import (
	"context"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/storetest"
)

// TestConflictReadsTheRunBack: the store holds an event the engine's copy
// of the run does not know (another server of a cluster committed it while
// this one's copy went stale). The transition that finds out conflicts;
// the run is then read back, so the next one succeeds instead of
// conflicting forever (the cluster chaos test once saw a run stuck so).
func TestConflictReadsTheRunBack(t *testing.T) {
	if storetest.Postgres() {
		t.Skip("writes behind the engine's back without a fence")
	}
	h := newHarness(t)
	h.start("stale", "Flow")
	task := h.pollWFT("q")
	entry := h.eng.openRun("stale")
	behind := entry.state.Clone()
	behind.NextEventID++
	behind.Signals++
	b, err := encodeState(behind)
	if err != nil {
		t.Fatal(err)
	}
	err = h.store.Commit(context.Background(), &history.Batch{
		Appends: []history.Append{{Run: behind.Ref(), ExpectedNext: 2, Events: []history.Event{{ID: 2, Time: testStart,
			Attrs: &history.SignalReceived{Name: "from-elsewhere"}}}}},
		Puts: []history.Record{{Space: history.SpaceRunState, Key: stateKey(behind.Ref()), Value: b}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.completeErr(task); err == nil {
		t.Fatal("completing over a stale copy succeeded")
	}
	if d := h.describe("stale"); d.Info.HistoryLength != 2 {
		t.Fatalf("after the conflict the engine still has %d events, the store 2", d.Info.HistoryLength)
	}
	h.signal("stale", "again", `1`) // the next transition starts from the truth
	if n := h.historyLen("stale"); n != 3 {
		t.Fatalf("history has %d events, want 3", n)
	}
}
