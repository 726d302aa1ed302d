package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cairnflow/cairn/history"
)

// TestGroupOneTransaction: a group of batches on different runs and
// records is one Postgres transaction.
func TestGroupOneTransaction(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	var batches []*history.Batch
	for i := range 20 {
		b := appendTo(runRef(fmt.Sprint("wf-", i)), 1, "start")
		b.Puts = []history.Record{put(history.SpaceRunState, fmt.Sprint("state-", i), "v")}
		batches = append(batches, b)
	}
	before := s.Stats()
	wantOutcomes(t, runGroup(t, s, batches...), make([]error, 20)...)
	st := s.Stats()
	if st.Commits-before.Commits != 1 || st.Rounds-before.Rounds != 1 || st.Batches-before.Batches != 20 {
		t.Fatalf("20 batches took %d commits in %d rounds (%d batches counted), want 1 in 1",
			st.Commits-before.Commits, st.Rounds-before.Rounds, st.Batches-before.Batches)
	}
	// BEGIN, create runs, events, puts, COMMIT.
	if n := st.Statements - before.Statements; n != 5 {
		t.Fatalf("the group took %d statements, want 5", n)
	}
	for i := range 20 {
		wantLast(t, s, runRef(fmt.Sprint("wf-", i)), 1)
		wantValue(t, s, history.SpaceRunState, fmt.Sprint("state-", i), "v")
	}
}

// TestGroupFailsOnlyTheGuilty: in a group, a stale append, an append to a
// run that exists as if it were new, and a failing fence fail alone; the
// others commit, and the failed ones write nothing.
func TestGroupFailsOnlyTheGuilty(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	old, taken := runRef("wf-old"), runRef("wf-taken")
	for _, r := range []history.RunRef{old, taken} {
		if err := s.Commit(bg, appendTo(r, 1, "start")); err != nil {
			t.Fatal(err)
		}
	}
	lease, err := s.AcquireShard(bg, 2, "me", 60e9)
	if err != nil {
		t.Fatal(err)
	}
	mark := func(b *history.Batch, key string) *history.Batch {
		b.Puts = append(b.Puts, put(history.SpaceMeta, key, "x"))
		return b
	}
	stale := mark(appendTo(old, 1, "again"), "stale") // the run ends at 1
	asNew := mark(appendTo(taken, 1, "again"), "as-new")
	fenced := mark(&history.Batch{Fences: []history.Fence{{Shard: 2, Epoch: lease.Epoch - 1}}}, "fenced")
	good1 := mark(appendTo(old, 2, "next"), "good1")
	good2 := mark(appendTo(runRef("wf-new"), 1, "start"), "good2")
	good3 := mark(&history.Batch{Fences: []history.Fence{lease.Fence()}}, "good3")

	before := s.Stats()
	errs := runGroup(t, s, good1, stale, good2, asNew, fenced, good3)
	wantOutcomes(t, errs, nil, history.ErrConflict, nil, history.ErrConflict, history.ErrFenced, nil)
	for _, k := range []string{"stale", "as-new", "fenced"} {
		wantAbsent(t, s, history.SpaceMeta, k)
	}
	for _, k := range []string{"good1", "good2", "good3"} {
		wantValue(t, s, history.SpaceMeta, k, "x")
	}
	wantLast(t, s, old, 2)
	wantLast(t, s, taken, 1)
	st := s.Stats()
	if c, r := st.Commits-before.Commits, st.Rounds-before.Rounds; c != 1 || r != 2 {
		t.Fatalf("commits %d, rounds %d; want one commit after one failed round", c, r)
	}
	if st.Conflicts-before.Conflicts != 2 || st.Fenced-before.Fenced != 1 {
		t.Fatalf("stats count %d conflicts and %d fenced, want 2 and 1", st.Conflicts-before.Conflicts, st.Fenced-before.Fenced)
	}
}

// TestGroupMergesRecordWrites: writes of several batches to one key apply
// in queue order (the last wins), puts and deletes alike.
func TestGroupMergesRecordWrites(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	sp := history.SpaceTask
	if err := s.Commit(bg, &history.Batch{Puts: []history.Record{put(sp, "d1", "old"), put(sp, "d2", "old")}}); err != nil {
		t.Fatal(err)
	}
	del := func(k string) []history.RecordKey { return []history.RecordKey{{Space: sp, Key: []byte(k)}} }
	errs := runGroup(t, s,
		&history.Batch{Puts: []history.Record{put(sp, "k", "1"), put(sp, "d2", "back")}, Deletes: del("d1")},
		&history.Batch{Puts: []history.Record{put(sp, "k", "2"), put(sp, "d1", "back")}, Deletes: del("d2")},
		&history.Batch{Puts: []history.Record{put(sp, "k", "3")}},
		&history.Batch{Deletes: del("d2")},
	)
	wantOutcomes(t, errs, nil, nil, nil, nil)
	wantValue(t, s, sp, "k", "3")
	wantValue(t, s, sp, "d1", "back") // deleted, then put
	wantAbsent(t, s, sp, "d2")        // put, then deleted twice
}

// TestFormGroup: a batch with conditions commits alone; a batch appending
// to a run already in the group waits for the next one; the limits hold.
func TestFormGroup(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	prep := func(b *history.Batch) *request {
		r, err := s.prepare(b)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a1 := prep(appendTo(runRef("a"), 1, "x"))
	a2 := prep(appendTo(runRef("a"), 2, "x"))
	b1 := prep(appendTo(runRef("b"), 1, "x"))
	cond := prep(&history.Batch{Conditions: []history.Condition{{Space: history.SpaceMeta, Key: []byte("k")}}})
	group, rest := s.formGroup([]*request{a1, cond, a2, b1})
	if len(group) != 2 || group[0] != a1 || group[1] != b1 || len(rest) != 2 || rest[0] != cond || rest[1] != a2 {
		t.Fatalf("group %v, rest %v", group, rest)
	}
	group, rest = s.formGroup(rest)
	if len(group) != 1 || group[0] != cond || len(rest) != 1 || rest[0] != a2 {
		t.Fatalf("the conditional batch is not alone: group %v, rest %v", group, rest)
	}
	s.opts.MaxGroupBatches = 2
	group, rest = s.formGroup([]*request{a1, b1, prep(appendTo(runRef("c"), 1, "x"))})
	if len(group) != 2 || len(rest) != 1 {
		t.Fatalf("MaxGroupBatches 2: group of %d, %d left", len(group), len(rest))
	}
}

// TestSameRunQueuedTwice: two batches extending one run, queued together,
// both commit (the second in the next transaction), in order.
func TestSameRunQueuedTwice(t *testing.T) {
	var taken sync.Once
	var holding atomic.Bool
	release := make(chan struct{})
	s := openHooks(t, testOptions(t), testHooks{beforeRound: func() {
		taken.Do(func() { // hold the first round until both are queued
			holding.Store(true)
			<-release
		})
	}})
	run := runRef("wf-twice")
	errs := make(chan error, 3)
	go func() { errs <- s.Commit(bg, appendTo(runRef("wf-first"), 1, "x")) }() // holds the committer
	until(t, "the committer holds the first batch", func() bool { return holding.Load() })
	go func() { errs <- s.Commit(bg, appendTo(run, 1, "one")) }()
	until(t, "first queued", func() bool { return queued(s) == 1 })
	go func() { errs <- s.Commit(bg, appendTo(run, 2, "two")) }()
	until(t, "second queued", func() bool { return queued(s) == 2 })
	close(release)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.ReadEvents(bg, run, 1, 0)
	if err != nil || len(evs) != 2 || evs[1].Attrs.(*history.SignalReceived).Name != "two" {
		t.Fatalf("history %v, %v", evs, err)
	}
}

// queued returns how many requests wait in s's queue.
func queued(s *Store) int {
	s.queue.mu.Lock()
	defer s.queue.mu.Unlock()
	return len(s.queue.items)
}

// TestCommitCoalesces: concurrent writers share transactions.
func TestCommitCoalesces(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	const writers, each = 32, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			run := runRef(fmt.Sprint("wf-", w))
			for id := int64(1); id <= each; id++ {
				b := appendTo(run, id, "x")
				b.Puts = []history.Record{put(history.SpaceRunState, run.WorkflowID, fmt.Sprint(id))}
				if err := s.Commit(bg, b); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("%d batches in %d commits, %d statements", st.Batches, st.Commits, st.Statements)
	if st.Batches != writers*each || st.Commits*2 > st.Batches {
		t.Fatalf("%d batches took %d commits: the committer did not group them", st.Batches, st.Commits)
	}
}

// TestGroupSplitsOnUnattributedFailure: a failure no check names (here a
// duplicate event row under a run whose head row was lost) makes the
// group commit its batches one by one: only the batch it comes from
// fails.
func TestGroupSplitsOnUnattributedFailure(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	lost := runRef("wf-lost-head")
	if err := s.Commit(bg, appendTo(lost, 1, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(bg, "DELETE FROM runs WHERE workflow_id = $1", []byte(lost.WorkflowID)); err != nil {
		t.Fatal(err)
	}
	good := appendTo(runRef("wf-good"), 1, "x")
	errs := runGroup(t, s, good, appendTo(lost, 1, "again"))
	wantOutcomes(t, errs, nil, history.ErrConflict)
	wantLast(t, s, runRef("wf-good"), 1)
	wantLast(t, s, lost, 0)
}

// TestBatchLimits: a batch over MaxBatchBytes is ErrTooLarge; keys, ids
// and fences out of range are ErrInvalid; nothing is written.
func TestBatchLimits(t *testing.T) {
	opts := testOptions(t)
	opts.MaxBatchBytes = 4096
	s := mustOpen(t, opts)
	big := history.Record{Space: history.SpaceMeta, Key: []byte("big"), Value: bytes.Repeat([]byte("x"), 5000)}
	if err := s.Commit(bg, &history.Batch{Puts: []history.Record{big}}); !errors.Is(err, history.ErrTooLarge) {
		t.Fatalf("a batch over MaxBatchBytes: %v", err)
	}
	long := bytes.Repeat([]byte("k"), MaxKeyLen+1)
	cases := map[string]*history.Batch{
		"long key":       {Puts: []history.Record{{Space: history.SpaceMeta, Key: long}}},
		"long ids":       appendTo(history.RunRef{WorkflowID: string(long), RunID: "r"}, 1, "x"),
		"fence shard -1": {Fences: []history.Fence{{Shard: -1}}},
		"fence too high": {Fences: []history.Fence{{Shard: s.Shards()}}},
	}
	for name, b := range cases {
		b.Puts = append(b.Puts, put(history.SpaceMeta, "marker", "x"))
		if err := s.Commit(bg, b); !errors.Is(err, history.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
	wantAbsent(t, s, history.SpaceMeta, "marker")
	wantAbsent(t, s, history.SpaceMeta, "big")
}

// TestCanceledWhileQueued: a caller whose context ends while its batch
// waits in the queue gets ctx.Err(), and the batch is never written.
func TestCanceledWhileQueued(t *testing.T) {
	var once sync.Once
	var holding atomic.Bool
	release := make(chan struct{})
	s := openHooks(t, testOptions(t), testHooks{beforeRound: func() {
		once.Do(func() {
			holding.Store(true)
			<-release
		})
	}})
	first := make(chan error, 1)
	go func() { first <- s.Commit(bg, appendTo(runRef("wf-first"), 1, "x")) }()
	until(t, "the committer holds the first batch", holding.Load)
	ctx, cancel := context.WithCancel(bg)
	queuedErr := make(chan error, 1)
	go func() { queuedErr <- s.Commit(ctx, appendTo(runRef("wf-canceled"), 1, "x")) }()
	until(t, "queued", func() bool { return queued(s) == 1 })
	cancel()
	if err := <-queuedErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit canceled while queued: %v", err)
	}
	close(release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(bg, appendTo(runRef("wf-after"), 1, "x")); err != nil { // the committer went past it
		t.Fatal(err)
	}
	wantLast(t, s, runRef("wf-canceled"), 0)
}

// TestSerializationFailureRetried: a conditional batch (serializable)
// whose COMMIT fails with a serialization failure runs again, and then
// sees what the other transaction wrote.
func TestSerializationFailureRetried(t *testing.T) {
	var inHook func()
	s := openHooks(t, testOptions(t), testHooks{beforeCommit: func() {
		if f := inHook; f != nil {
			inHook = nil
			f()
		}
	}})
	sp := history.SpaceLedger
	if err := s.Commit(bg, &history.Batch{Puts: []history.Record{put(sp, "k", "0")}}); err != nil {
		t.Fatal(err)
	}
	// Between the batch's checks and its COMMIT, another serializable
	// transaction reads what the batch writes (k) and writes what it read
	// (c): a cycle, so the second to commit fails.
	inHook = func() {
		other := func() error {
			tx, err := s.pool.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.Serializable})
			if err != nil {
				return err
			}
			defer func() { _ = tx.Rollback(bg) }()
			if _, err := tx.Exec(bg, "SELECT value FROM records WHERE space = $1 AND key = 'k'", int16(sp)); err != nil {
				return err
			}
			if _, err := tx.Exec(bg, "INSERT INTO records (space, key, value) VALUES ($1, 'c', $2)", int16(sp),
				history.SealRecord(history.RecordID(sp, []byte("c")), []byte("other"))); err != nil {
				return err
			}
			return tx.Commit(bg)
		}
		if err := other(); err != nil {
			t.Errorf("the other transaction: %v", err)
		}
	}
	before := s.Stats()
	err := s.Commit(bg, &history.Batch{
		Conditions: []history.Condition{{Space: sp, Key: []byte("c")}}, // c absent
		Puts:       []history.Record{put(sp, "k", "1")},
	})
	if !errors.Is(err, history.ErrConflict) {
		t.Fatalf("Commit: %v, want ErrConflict (c exists once the batch runs again)", err)
	}
	if st := s.Stats(); st.Retries-before.Retries != 1 {
		t.Fatalf("%d retries, want 1", st.Retries-before.Retries)
	}
	wantValue(t, s, sp, "k", "0")
	wantValue(t, s, sp, "c", "other")
}
