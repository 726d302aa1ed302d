package historytest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// testConcurrentWriters runs three kinds of writers at once: many writers
// each appending to its own run, writers racing to extend one shared run,
// and writers racing for one record with an absent-condition. Every caller
// must get its own outcome: exactly one winner per event id and per lock,
// and what the store holds is what the winners were told.
func testConcurrentWriters(t *testing.T, h Harness) {
	s := open(t, h)
	writers, appends := concurrentWriters()
	var wg sync.WaitGroup
	errs := make(chan error, writers+64)
	report := func(err error) {
		if err != nil {
			errs <- err
		}
	}

	for w := range writers {
		wg.Go(func() { report(ownRunWriter(s, w, appends)) })
	}
	race := newRunRace(history.RunRef{WorkflowID: "wf-shared", RunID: "r1"}, int64(appends*2))
	for w := range 8 {
		wg.Go(func() { report(race.writer(s, w)) })
	}
	lock := newLockRace()
	for w := range 16 {
		wg.Go(func() { report(lock.writer(s, w)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	for w := range writers {
		run := ownRun(w)
		wantEvents(t, fmt.Sprint(run), readAll(t, s, run), Events(1, appends))
	}
	race.verify(t, s)
	lock.verify(t, s)
}

func ownRun(w int) history.RunRef {
	return history.RunRef{WorkflowID: fmt.Sprintf("wf-own-%d", w), RunID: "r1"}
}

// ownRunWriter appends n events, one per commit, to its own run.
func ownRunWriter(s history.Store, w, n int) error {
	run := ownRun(w)
	for id := int64(1); id <= int64(n); id++ {
		if err := s.Commit(ctx, appendBatch(run, Event(id))); err != nil {
			return fmt.Errorf("writer %d, event %d: %w", w, id, err)
		}
	}
	return nil
}

// runRace is a set of writers racing to append to one run until it holds
// target events. Each attempt carries a unique tag in its signal name.
type runRace struct {
	run    history.RunRef
	target int64

	mu     sync.Mutex
	won    map[int64]string    // event id → tag of the attempt told it won
	lost   map[string]struct{} // tags of attempts told ErrConflict
	losses int
}

func newRunRace(run history.RunRef, target int64) *runRace {
	return &runRace{run: run, target: target, won: map[int64]string{}, lost: map[string]struct{}{}}
}

func (r *runRace) writer(s history.Store, w int) error {
	for attempt := 0; ; attempt++ {
		last, err := s.LastEventID(ctx, r.run)
		if err != nil {
			return err
		}
		if last >= r.target {
			return nil
		}
		tag := fmt.Sprintf("w%d-a%d", w, attempt)
		ev := history.Event{ID: last + 1, Time: baseTime, Attrs: &history.SignalReceived{Name: tag}}
		err = s.Commit(ctx, appendBatch(r.run, ev))
		if err != nil && !errors.Is(err, history.ErrConflict) {
			return fmt.Errorf("racer %d: %w", w, err)
		}
		if err := r.record(ev.ID, tag, err == nil); err != nil {
			return err
		}
	}
}

func (r *runRace) record(id int64, tag string, won bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !won {
		r.lost[tag] = struct{}{}
		r.losses++
		return nil
	}
	if prev, dup := r.won[id]; dup {
		return fmt.Errorf("event %d was won by both %s and %s", id, prev, tag)
	}
	r.won[id] = tag
	return nil
}

func (r *runRace) verify(t *testing.T, s history.Store) {
	t.Helper()
	evs := readAll(t, s, r.run)
	if int64(len(evs)) != r.target || len(r.won) != len(evs) {
		t.Fatalf("shared run: %d events stored, %d wins reported, want %d", len(evs), len(r.won), r.target)
	}
	for _, ev := range evs {
		tag := ev.Attrs.(*history.SignalReceived).Name
		if r.won[ev.ID] != tag {
			t.Fatalf("shared run: event %d holds %s, but %s was told it won", ev.ID, tag, r.won[ev.ID])
		}
		if _, lost := r.lost[tag]; lost {
			t.Fatalf("shared run: event %d holds %s, which was told it lost", ev.ID, tag)
		}
	}
	t.Logf("shared run: %d events, %d conflicts", len(evs), r.losses)
}

// lockRace is a set of writers racing to create one record.
type lockRace struct {
	mu      sync.Mutex
	winners []int
}

var lockKey = history.Key().Str("lock").Bytes()

func newLockRace() *lockRace { return &lockRace{} }

func (l *lockRace) writer(s history.Store, w int) error {
	err := s.Commit(ctx, &history.Batch{
		Conditions: []history.Condition{{Space: history.SpaceLedger, Key: lockKey}},
		Puts:       []history.Record{{Space: history.SpaceLedger, Key: lockKey, Value: []byte(fmt.Sprint(w))}},
	})
	if errors.Is(err, history.ErrConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock writer %d: %w", w, err)
	}
	l.mu.Lock()
	l.winners = append(l.winners, w)
	l.mu.Unlock()
	return nil
}

func (l *lockRace) verify(t *testing.T, s history.Store) {
	t.Helper()
	if len(l.winners) != 1 {
		t.Fatalf("lock: %d writers were told they won, want 1", len(l.winners))
	}
	wantValue(t, s, history.SpaceLedger, lockKey, []byte(fmt.Sprint(l.winners[0])))
}

func testContextCanceled(t *testing.T, h Harness) {
	s := open(t, h)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	run := history.RunRef{WorkflowID: "wf-ctx", RunID: "r1"}
	err := s.Commit(cctx, &history.Batch{
		Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: Events(1, 1)}},
		Puts:    []history.Record{put(history.SpaceMeta, "k", "v")},
	})
	wantErr(t, "Commit with a canceled context", err, context.Canceled)
	wantNoRun(t, s, run)
	wantAbsent(t, s, history.SpaceMeta, []byte("k"))
	_, err = s.ReadEvents(cctx, run, 1, 0)
	wantErr(t, "ReadEvents with a canceled context", err, context.Canceled)
	var iterErr error
	for _, err := range s.Events(cctx, run, 1) {
		iterErr = err
		break
	}
	wantErr(t, "Events with a canceled context", iterErr, context.Canceled)
}

func testClose(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-close", RunID: "r1"}
	appendN(t, s, run, 1, 2)
	wantNoErr(t, "Close", s.Close())
	wantNoErr(t, "second Close", s.Close())

	wantErr(t, "Commit after Close", s.Commit(ctx, appendBatch(run, Event(3))), history.ErrClosed)
	_, err := s.ReadEvents(ctx, run, 1, 0)
	wantErr(t, "ReadEvents after Close", err, history.ErrClosed)
	_, err = collect(s, run, 1)
	wantErr(t, "Events after Close", err, history.ErrClosed)
	_, err = s.LastEventID(ctx, run)
	wantErr(t, "LastEventID after Close", err, history.ErrClosed)
	_, err = s.Get(ctx, history.SpaceMeta, []byte("k"))
	wantErr(t, "Get after Close", err, history.ErrClosed)
	_, err = s.Scan(ctx, history.SpaceMeta, history.ScanOptions{})
	wantErr(t, "Scan after Close", err, history.ErrClosed)
}

// testCloseWhileCommitting closes the store under concurrent writers: each
// commit either succeeds (and, for a durable store, survives a reopen) or
// fails with ErrClosed.
func testCloseWhileCommitting(t *testing.T, h Harness) {
	s := open(t, h)
	const writers = 16
	acked := make([]int64, writers) // events acknowledged per writer
	started := make(chan struct{}, writers)
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			run := ownRun(w)
			for id := int64(1); ; id++ {
				err := s.Commit(ctx, appendBatch(run, Event(id)))
				if id == 1 {
					started <- struct{}{}
				}
				if errors.Is(err, history.ErrClosed) {
					return
				}
				if err != nil {
					errs <- fmt.Errorf("writer %d: %w", w, err)
					return
				}
				acked[w] = id
			}
		})
	}
	for range writers {
		<-started
	}
	wantNoErr(t, "Close", s.Close())
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if h.Reopen == nil {
		return
	}
	s = reopen(t, h, s)
	for w := range writers {
		wantLast(t, s, ownRun(w), acked[w])
	}
}

// testDurableAcrossReopen: every acknowledged commit is there after Close
// and reopen, and the store continues where it left off.
func testDurableAcrossReopen(t *testing.T, h Harness) {
	if h.Reopen == nil {
		t.Skip("store is not durable across reopen")
	}
	s := open(t, h)
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			if err := ownRunWriter(s, w, 20); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	putKeys(t, s, history.SpaceLedger, "keep", "drop")
	mustCommit(t, s, &history.Batch{Deletes: []history.RecordKey{{Space: history.SpaceLedger, Key: []byte("drop")}}})
	before := readAll(t, s, ownRun(0))

	s = reopen(t, h, s)
	// Events read before Close must not depend on the closed store.
	wantEvents(t, "events read before the reopen", before, Events(1, 20))
	for w := range writers {
		wantEvents(t, fmt.Sprint(ownRun(w)), readAll(t, s, ownRun(w)), Events(1, 20))
	}
	wantKeys(t, "ledger after reopen", scanKeys(t, s, history.SpaceLedger, history.ScanOptions{}), "keep")
	appendN(t, s, ownRun(0), 21, 1)
	wantErr(t, "stale append after reopen", s.Commit(ctx, appendBatch(ownRun(1), Event(20))), history.ErrConflict)
	wantLast(t, s, ownRun(0), 21)
}
