package historytest

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// testChunks checks the payload-chunk space: chunks are stored under their
// hash with the events that first reference them, atomically, read back
// byte for byte and verifiable, shared (a second put of the same chunk is
// harmless), and durable.
func testChunks(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "agent-1", RunID: "r1"}
	root := history.Chunk{Data: []byte("system: you pay invoices|")}
	child := history.Chunk{Parent: root.Hash(), Data: []byte("user: pay INV-9|")}
	ev := history.Event{ID: 1, Time: baseTime, Attrs: &history.WorkflowStarted{WorkflowType: "Agent", TaskQueue: "q",
		Input: history.Payload{Encoding: "msgpack", Ref: child.Hash()}}}
	chunkPut := func(c history.Chunk) history.Record {
		return history.Record{Space: history.SpaceChunk, Key: c.Hash(), Value: history.EncodeChunk(c)}
	}

	// A batch whose append conflicts writes none of its chunks.
	mustCommit(t, s, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: []history.Event{ev}}},
		Puts: []history.Record{chunkPut(root)}})
	ev2 := history.Event{ID: 2, Time: baseTime, Attrs: &history.SignalReceived{Name: "s", Input: history.Payload{Encoding: "msgpack", Ref: child.Hash()}}}
	dup := ev2
	dup.ID = 1
	err := s.Commit(ctx, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: []history.Event{dup}}},
		Puts: []history.Record{chunkPut(child)}})
	wantErr(t, "conflicting append with a chunk", err, history.ErrConflict)
	wantAbsent(t, s, history.SpaceChunk, child.Hash())

	mustCommit(t, s, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: 2, Events: []history.Event{ev2}}},
		Puts: []history.Record{chunkPut(child)}})
	// Shared: the same chunk put again by another run is fine and changes nothing.
	other := history.RunRef{WorkflowID: "agent-2", RunID: "r1"}
	mustCommit(t, s, &history.Batch{Appends: []history.Append{{Run: other, ExpectedNext: 1, Events: []history.Event{ev}}},
		Puts: []history.Record{chunkPut(child)}})

	check := func(s history.Store) {
		t.Helper()
		for _, c := range []history.Chunk{root, child} {
			v, err := s.Get(ctx, history.SpaceChunk, c.Hash())
			wantNoErr(t, "get chunk", err)
			got, err := history.DecodeChunk(c.Hash(), v)
			wantNoErr(t, "decode chunk", err)
			if !bytes.Equal(got.Data, c.Data) || !bytes.Equal(got.Parent, c.Parent) {
				t.Fatalf("chunk read back as %+v, want %+v", got, c)
			}
		}
		recs, err := s.Scan(ctx, history.SpaceChunk, history.ScanOptions{})
		wantNoErr(t, "scan chunks", err)
		if len(recs) != 2 {
			t.Fatalf("scan found %d chunks, want 2", len(recs))
		}
		evs, err := s.ReadEvents(ctx, run, 1, 0)
		wantNoErr(t, "read events", err)
		got := evs[1].Attrs.(*history.SignalReceived).Input
		if !bytes.Equal(got.Ref, child.Hash()) {
			t.Fatalf("event's reference read back as %x", got.Ref)
		}
		// The spaces are independent: a chunk key is not a ledger key.
		if _, err := s.Get(ctx, history.SpaceLedger, child.Hash()); !errors.Is(err, history.ErrNotFound) {
			t.Fatalf("chunk visible in another space: %v", err)
		}
	}
	check(s)
	if h.Reopen != nil {
		check(reopen(t, h, s))
	}
}
