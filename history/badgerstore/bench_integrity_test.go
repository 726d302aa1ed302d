package badgerstore

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// engineBatch is what one engine transition commits: an event and the run
// state, an index entry and a task.
func engineBatch(run history.RunRef, id int64) *history.Batch {
	return &history.Batch{
		Appends: []history.Append{{Run: run, ExpectedNext: id, Events: []history.Event{benchEvent(id)}}},
		Puts: []history.Record{
			{Space: history.SpaceRunState, Key: []byte(run.WorkflowID), Value: bytes.Repeat([]byte{'s'}, 600)},
			{Space: history.SpaceIndex, Key: []byte("o" + run.WorkflowID), Value: bytes.Repeat([]byte{'i'}, 100)},
			{Space: history.SpaceTask, Key: fmt.Appendf(nil, "t%s%d", run.WorkflowID, id), Value: bytes.Repeat([]byte{'t'}, 80)},
		},
	}
}

// BenchmarkCommitNoSync: the CPU of one engine-sized commit without the
// fsync (whose time would hide it), one writer.
func BenchmarkCommitNoSync(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir(), NoSync: true})
	defer s.Close()
	run := history.RunRef{WorkflowID: "wf", RunID: "r1"}
	b.ReportAllocs()
	id := int64(0)
	for b.Loop() {
		id++
		if err := s.Commit(bg, engineBatch(run, id)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkGetRecord: one 600-byte record read back.
func BenchmarkGetRecord(b *testing.B) {
	s := mustOpen(b, Options{Dir: b.TempDir(), NoSync: true})
	defer s.Close()
	run := history.RunRef{WorkflowID: "wf", RunID: "r1"}
	if err := s.Commit(bg, engineBatch(run, 1)); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(bg, history.SpaceRunState, []byte("wf")); err != nil {
			b.Fatal(err)
		}
	}
}
