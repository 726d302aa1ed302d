package badgerstore

import (
	"errors"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// TestFencesRefused: one process owns a Badger directory, so there are no
// shard leases a fence could check; a batch with fences is refused as
// invalid and writes nothing, rather than committed unchecked.
func TestFencesRefused(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	defer s.Close()
	run := history.RunRef{WorkflowID: "wf-fenced", RunID: "r1"}
	b := appendTo(run, 1, "a")
	b.Puts = []history.Record{{Space: history.SpaceMeta, Key: []byte("k"), Value: []byte("v")}}
	b.Fences = []history.Fence{{Shard: 3, Epoch: 7}}
	if err := s.Commit(bg, b); !errors.Is(err, history.ErrInvalid) {
		t.Fatalf("Commit with a fence: %v, want ErrInvalid", err)
	}
	if _, err := s.Get(bg, history.SpaceMeta, []byte("k")); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("the fenced batch's put is there: %v", err)
	}
	if last, err := s.LastEventID(bg, run); err != nil || last != 0 {
		t.Fatalf("the fenced batch's append is there: last %d, %v", last, err)
	}
}
