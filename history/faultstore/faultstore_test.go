package faultstore_test

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/history/historytest"
)

func newBadger(t testing.TB) *badgerstore.Store {
	t.Helper()
	s, err := badgerstore.Open(badgerstore.Options{InMemory: true, MemTableSize: 8 << 20, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConformance: without rules the wrapper is the store it wraps.
func TestConformance(t *testing.T) {
	historytest.Run(t, historytest.Harness{New: func(t testing.TB) history.Store { return faultstore.New(newBadger(t)) }})
}

var run = history.RunRef{WorkflowID: "wf", RunID: "r1"}

func appendBatch(next int64) *history.Batch {
	return &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: next, Events: []history.Event{
		{ID: next, Time: time.Unix(1, 0).UTC(), Attrs: &history.TimerFired{TimerID: "t"}}}}}}
}

func TestCommitBeforeFailsWithoutWriting(t *testing.T) {
	fs := faultstore.New(newBadger(t))
	defer fs.Close()
	ctx := context.Background()
	remove := fs.Inject(faultstore.Rule{Op: faultstore.OpCommit, Err: faultstore.ErrDiskFull, Times: 1})
	defer remove()
	if err := fs.Commit(ctx, appendBatch(1)); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commit: %v, want ENOSPC", err)
	}
	if last, _ := fs.LastEventID(ctx, run); last != 0 {
		t.Fatalf("a failed commit wrote event %d", last)
	}
	// Times: 1 — the next commit goes through.
	if err := fs.Commit(ctx, appendBatch(1)); err != nil {
		t.Fatal(err)
	}
	if fs.Failures(faultstore.OpCommit) != 1 || fs.Calls(faultstore.OpCommit) != 2 {
		t.Fatalf("counts %d/%d", fs.Failures(faultstore.OpCommit), fs.Calls(faultstore.OpCommit))
	}
}

func TestCommitAfterIsDurableButReportedFailed(t *testing.T) {
	fs := faultstore.New(newBadger(t))
	defer fs.Close()
	ctx := context.Background()
	fs.Inject(faultstore.Rule{Op: faultstore.OpCommit, Mode: faultstore.After, Err: faultstore.ErrIO, Skip: 1, Times: 1})
	if err := fs.Commit(ctx, appendBatch(1)); err != nil {
		t.Fatalf("skipped commit: %v", err)
	}
	if err := fs.Commit(ctx, appendBatch(2)); !errors.Is(err, syscall.EIO) {
		t.Fatalf("commit: %v, want EIO", err)
	}
	if last, _ := fs.LastEventID(ctx, run); last != 2 {
		t.Fatalf("last event %d: the commit reported as failed must be durable", last)
	}
	// A retry of the same batch meets its own earlier write.
	if err := fs.Commit(ctx, appendBatch(2)); !errors.Is(err, history.ErrConflict) {
		t.Fatalf("retried commit: %v, want ErrConflict", err)
	}
}

func TestCorruptNamesWhereTheCallLooked(t *testing.T) {
	fs := faultstore.New(newBadger(t))
	defer fs.Close()
	ctx := context.Background()
	if err := fs.Commit(ctx, appendBatch(1)); err != nil {
		t.Fatal(err)
	}
	key := []byte("k")
	fs.Inject(faultstore.Rule{Op: faultstore.OpGet, Match: faultstore.KeyIs(history.SpaceLedger, key), Err: faultstore.Corrupt("bit flip")})
	fs.Inject(faultstore.Rule{Op: faultstore.OpReadEvents, Match: faultstore.RunIs(run), Err: faultstore.Corrupt("zeroed page")})
	fs.Inject(faultstore.Rule{Op: faultstore.OpEvents, Match: faultstore.RunIs(run), Err: faultstore.Corrupt("zeroed page")})
	_, err := fs.Get(ctx, history.SpaceLedger, key)
	var ce *history.CorruptError
	if !errors.As(err, &ce) || ce.Space != history.SpaceLedger || string(ce.Key) != "k" {
		t.Fatalf("get: %v", err)
	}
	if _, err := fs.Get(ctx, history.SpaceLedger, []byte("other")); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("unmatched get: %v", err)
	}
	_, err = fs.ReadEvents(ctx, run, 1, 0)
	if !errors.As(err, &ce) || ce.Run != run || ce.EventID != 1 {
		t.Fatalf("read: %v", err)
	}
	for _, err := range fs.Events(ctx, run, 1) {
		if !errors.Is(err, history.ErrCorrupt) {
			t.Fatalf("events: %v", err)
		}
	}
}
