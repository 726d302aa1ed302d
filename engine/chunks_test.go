package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

func scheduleInput(id string, in history.Payload) api.Command {
	c := schedule(id, "Chat", history.Read, history.ActivityOptions{TaskQueue: "q"})
	c.ScheduleActivity.Input = in
	return c
}

// TestChunkReferences: a schedule that extends a stored chunk records a
// bare reference and stores only the new bytes; a reference to a chunk
// that is not stored is refused with nothing written; a restart keeps
// the chunks.
func TestChunkReferences(t *testing.T) {
	h := newHarness(t)
	h.start("agent", "Agent")
	task := h.pollWFT("q")
	unknown := history.Payload{Encoding: "t", Ref: history.ChunkHash(nil, []byte("nope")), Data: []byte("x")}
	wantErr(t, h.completeErr(task, scheduleInput("1", unknown)), api.ErrInvalidArgument)
	if n := count(h.history("agent"), history.TypeActivityScheduled); n != 0 {
		t.Fatalf("%d activities scheduled by a refused completion", n)
	}
	if recs, _ := h.store.Scan(h.ctx(), history.SpaceChunk, history.ScanOptions{}); len(recs) != 0 {
		t.Fatalf("a refused completion wrote %d chunks", len(recs))
	}

	// Turn 1: a fresh chain (small, but a chunk because the next turn extends it).
	p1 := history.Payload{Encoding: "t", Ref: nil, Data: []byte("system|user|")}
	h.advance(11 * time.Second) // the refused task times out and comes back
	task = h.pollWFT("q")
	c1 := scheduleInput("1", history.Payload{Encoding: "t", Data: bytes.Repeat([]byte("a"), 20<<10)}) // above the inline threshold
	h.complete(task, c1)
	act := h.pollActivity("q")
	if !act.Input.ByRef() {
		t.Fatalf("a 20 KiB input reached the worker inline: %d bytes", len(act.Input.Data))
	}
	tip := act.Input.Ref
	h.completeActivity(act, "ok")
	task = h.pollWFT("q")
	h.complete(task, scheduleInput("2", history.Payload{Encoding: "t", Ref: tip, Data: p1.Data}))
	act = h.pollActivity("q")
	want := history.ChunkHash(tip, p1.Data)
	if !bytes.Equal(act.Input.Ref, want) || len(act.Input.Data) != 0 {
		t.Fatalf("turn 2 input %+v, want a bare reference to %x", act.Input, want)
	}
	h.reopen()
	resp, err := h.eng.GetChunks(h.ctx(), &api.GetChunksRequest{Hashes: [][]byte{want}, Ancestors: true})
	if err != nil || len(resp.Chunks) != 2 {
		t.Fatalf("GetChunks after a restart: %+v, %v", resp, err)
	}
	if string(resp.Chunks[0].Data) != string(p1.Data) || len(resp.Chunks[1].Data) != 20<<10 || resp.Chunks[1].Parent != nil {
		t.Fatal("the chain came back different")
	}
	if _, err := h.eng.GetChunks(h.ctx(), &api.GetChunksRequest{Hashes: [][]byte{history.ChunkHash(nil, []byte("absent"))}}); err == nil {
		t.Fatal("an unknown chunk was found")
	}
}
