package historytest

import (
	"fmt"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// testDeleteRuns: Batch.DeleteRuns removes every event of a run, atomically
// with the batch's record writes and with nothing of any other run (one
// whose id extends it included); the run can be started again at 1; a
// deleted run is not listed, and stays deleted across a reopen; a run
// without events deletes as nothing; a batch whose other checks fail
// deletes nothing; deleting a run twice or appending to and deleting it
// in one batch is ErrInvalid; deletes of runs committed concurrently with
// appends to other runs leave those intact.
func testDeleteRuns(t *testing.T, h Harness) {
	s := open(t, h)
	a := history.RunRef{WorkflowID: "del", RunID: "a"}
	ab := history.RunRef{WorkflowID: "del", RunID: "ab"}
	other := history.RunRef{WorkflowID: "del-other", RunID: "a"}
	appendN(t, s, a, 1, 5)
	keepAB := appendN(t, s, ab, 1, 3)
	keepOther := appendN(t, s, other, 1, 2)
	mustCommit(t, s, &history.Batch{Puts: []history.Record{put(history.SpaceRunState, "del/a", "state")}})

	// A failed condition deletes nothing.
	err := s.Commit(ctx, &history.Batch{
		Conditions: []history.Condition{{Space: history.SpaceMeta, Key: []byte("absent"), Exists: true}},
		DeleteRuns: []history.RunRef{a},
	})
	wantErr(t, "DeleteRuns with a failing condition", err, history.ErrConflict)
	wantLast(t, s, a, 5)

	wantErr(t, "DeleteRuns twice in one batch",
		s.Commit(ctx, &history.Batch{DeleteRuns: []history.RunRef{a, a}}), history.ErrInvalid)
	wantErr(t, "append and DeleteRuns of one run",
		s.Commit(ctx, &history.Batch{Appends: []history.Append{{Run: a, ExpectedNext: 6, Events: Events(6, 1)}}, DeleteRuns: []history.RunRef{a}}),
		history.ErrInvalid)
	wantErr(t, "DeleteRuns of an empty id",
		s.Commit(ctx, &history.Batch{DeleteRuns: []history.RunRef{{WorkflowID: "del"}}}), history.ErrInvalid)
	wantLast(t, s, a, 5)

	mustCommit(t, s, &history.Batch{
		DeleteRuns: []history.RunRef{a, {WorkflowID: "never", RunID: "written"}},
		Deletes:    []history.RecordKey{{Space: history.SpaceRunState, Key: []byte("del/a")}},
	})
	wantNoRun(t, s, a)
	wantAbsent(t, s, history.SpaceRunState, []byte("del/a"))
	wantEvents(t, "the run whose id extends the deleted one", readAll(t, s, ab), keepAB)
	wantEvents(t, "another workflow's run", readAll(t, s, other), keepOther)
	for ev, err := range s.Events(ctx, a, 1) {
		wantErr(t, fmt.Sprintf("Events of a deleted run (yielded event %d)", ev.ID), err, history.ErrNotFound)
		break
	}
	if rl, ok := s.(history.RunLister); ok {
		got, err := rl.Runs(ctx, nil, 0)
		wantNoErr(t, "Runs", err)
		wantRuns(t, "Runs after a delete", got, []history.RunRef{ab, other})
	}

	// Deleted in a group with other writers' appends to other runs.
	done := make(chan error, 2)
	go func() { done <- s.Commit(ctx, &history.Batch{DeleteRuns: []history.RunRef{ab}}) }()
	go func() { done <- s.Commit(ctx, appendBatch(other, Events(3, 2)...)) }()
	for range 2 {
		wantNoErr(t, "concurrent delete and append", <-done)
	}
	wantNoRun(t, s, ab)
	wantLast(t, s, other, 4)

	// A deleted run starts again at 1; an append expecting its old end conflicts.
	wantErr(t, "append after the deleted end", s.Commit(ctx, appendBatch(a, Events(6, 1)...)), history.ErrConflict)
	again := appendN(t, s, a, 1, 2)
	wantEvents(t, "the run written again", readAll(t, s, a), again)
	mustCommit(t, s, &history.Batch{DeleteRuns: []history.RunRef{a}})

	if h.Reopen != nil {
		s = reopen(t, h, s)
		wantNoRun(t, s, a)
		wantNoRun(t, s, ab)
		wantLast(t, s, other, 4)
	}
}
