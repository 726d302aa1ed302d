package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

// TestDeleteRunAtHistoryLimit: a run as long as the engine lets a history
// grow (machine.Limits.MaxHistoryEvents, 51,200 events by default) can be
// deleted (Batch.DeleteRuns) with the store's default options. Its events
// were appended over many commits; deleting them all in one Badger
// transaction must not be refused as too large, or retention never
// deletes the run (the sweep retries it every minute, forever).
func TestDeleteRunAtHistoryLimit(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, Options{Dir: t.TempDir()})
	defer s.Close()
	run := history.RunRef{WorkflowID: "long-agent-workflow-id", RunID: "0193a5d2-7c1e-7b3f-9a2e-4f5c6d7e8f90"}
	const total, per = 51200, 512
	for next := int64(1); next <= total; next += per {
		evs := make([]history.Event, per)
		for i := range evs {
			evs[i] = history.Event{ID: next + int64(i), Time: time.Unix(1, 0), Attrs: &history.SignalReceived{Name: "s"}}
		}
		if err := s.Commit(ctx, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: next, Events: evs}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(ctx, &history.Batch{DeleteRuns: []history.RunRef{run}}); err != nil {
		t.Fatalf("delete a run of %d events: %v", total, err)
	}
	if last, err := s.LastEventID(ctx, run); err != nil || last != 0 {
		t.Fatalf("after the delete: last event %d, %v", last, err)
	}
}
