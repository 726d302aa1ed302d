package badgerstore

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

// dirBlocks is the disk space the files under dir occupy.
func dirBlocks(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		n += info.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReclaimAfterDeleteRuns: runs deleted (Batch.DeleteRuns) and the
// store reclaimed, the data directory returns near its size before the
// runs, the kept run reads back whole, and the store opens again without
// finding damage or a rollback (the integrity file, the commit sequence).
func TestReclaimAfterDeleteRuns(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	opts := Options{Dir: dir}
	s := mustOpen(t, opts)
	_ = s.Close()
	baseline := dirBlocks(t, dir)

	s = mustOpen(t, opts)
	rnd := rand.New(rand.NewPCG(1, 2))
	random := func() []byte { // incompressible, as Badger compresses its tables
		b := make([]byte, 1000)
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
		return b
	}
	data := random()
	ev := func(id int64) history.Event {
		return history.Event{ID: id, Time: time.Unix(1, 0), Attrs: &history.MarkerRecorded{Name: "m", Data: history.Payload{Encoding: "raw", Data: random()}}}
	}
	var runs []history.RunRef
	for i := range 400 {
		run := history.RunRef{WorkflowID: fmt.Sprintf("wf-%d", i), RunID: "r"}
		runs = append(runs, run)
		evs := make([]history.Event, 20)
		for j := range evs {
			evs[j] = ev(int64(j + 1))
		}
		if err := s.Commit(ctx, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: evs}},
			Puts: []history.Record{{Space: history.SpaceRunState, Key: []byte(run.WorkflowID), Value: data}}}); err != nil {
			t.Fatal(err)
		}
	}
	kept := history.RunRef{WorkflowID: "kept", RunID: "r"}
	if err := s.Commit(ctx, &history.Batch{Appends: []history.Append{{Run: kept, ExpectedNext: 1, Events: []history.Event{ev(1), ev(2)}}}}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	peak := dirBlocks(t, dir)

	s = mustOpen(t, opts)
	for _, run := range runs {
		if err := s.Commit(ctx, &history.Batch{DeleteRuns: []history.RunRef{run},
			Deletes: []history.RecordKey{{Space: history.SpaceRunState, Key: []byte(run.WorkflowID)}}}); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.Close() // the deletes leave the memtables for the tables
	s = mustOpen(t, opts)
	if err := s.Reclaim(ctx); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	after := dirBlocks(t, dir)
	t.Logf("baseline %d, peak %d, after %d bytes", baseline, peak, after)
	if peak-baseline < 4<<20 || after > baseline+(peak-baseline)/10 {
		t.Fatalf("the deleted bytes did not return: baseline %d, peak %d, after %d", baseline, peak, after)
	}

	s = mustOpen(t, opts) // the integrity checks at open pass
	defer s.Close()
	got, err := s.ReadEvents(ctx, kept, 1, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("the kept run: %d events, %v", len(got), err)
	}
	if last, err := s.LastEventID(ctx, runs[7]); err != nil || last != 0 {
		t.Fatalf("a deleted run: last event %d, %v", last, err)
	}
}
