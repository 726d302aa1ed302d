package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/third_party/badger"

	"github.com/cairnflow/cairn/history"
)

var bg = context.Background()

var t0 = time.Unix(1_700_000_000, 0).UTC()

func signal(id int64, name string) history.Event {
	return history.Event{ID: id, Time: t0, Attrs: &history.SignalReceived{Name: name}}
}

func appendTo(run history.RunRef, next int64, name string) *history.Batch {
	return &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: next, Events: []history.Event{signal(next, name)}}}}
}

func putBatch(conds []history.Condition, puts []history.Record, dels ...history.RecordKey) *history.Batch {
	return &history.Batch{Conditions: conds, Puts: puts, Deletes: dels}
}

// runGroup commits batches as one group, directly on the committer's code
// path, and returns each batch's outcome. The store's own committer stays
// idle meanwhile (nothing is queued), so this goroutine is the only writer.
func runGroup(t *testing.T, s *Store, batches ...*history.Batch) []error {
	t.Helper()
	reqs := make([]*request, len(batches))
	for i, b := range batches {
		r, err := s.prepare(b)
		if err != nil {
			t.Fatalf("prepare batch %d: %v", i, err)
		}
		reqs[i] = r
	}
	s.commitGroup(reqs)
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		select {
		case errs[i] = <-r.done:
		default:
			t.Fatalf("batch %d was not answered", i)
		}
	}
	return errs
}

// wantOutcomes compares each outcome with want (nil, or a sentinel).
func wantOutcomes(t *testing.T, got []error, want ...error) {
	t.Helper()
	for i := range want {
		if (want[i] == nil) != (got[i] == nil) || !errors.Is(got[i], want[i]) {
			t.Errorf("batch %d: got %v, want %v", i, got[i], want[i])
		}
	}
}

func lastID(t *testing.T, s *Store, run history.RunRef) int64 {
	t.Helper()
	id, err := s.LastEventID(bg, run)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestGroupSeesEarlierBatches: batches in one group are checked against
// the ones accepted before them in the same group.
func TestGroupSeesEarlierBatches(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	defer s.Close()
	run := history.RunRef{WorkflowID: "wf", RunID: "r"}
	sp := history.SpaceLedger
	k, gone := []byte("k"), []byte("gone")
	if errs := runGroup(t, s, putBatch(nil, []history.Record{{Space: sp, Key: gone, Value: []byte("x")}})); errs[0] != nil {
		t.Fatal(errs[0])
	}

	errs := runGroup(t, s,
		appendTo(run, 1, "first"),  // 0: wins
		appendTo(run, 1, "second"), // 1: same id: conflict
		appendTo(run, 2, "third"),  // 2: extends 0
		putBatch([]history.Condition{{Space: sp, Key: k}}, []history.Record{{Space: sp, Key: k, Value: []byte("a")}}),                      // 3: k absent: ok
		putBatch([]history.Condition{{Space: sp, Key: k}}, []history.Record{{Space: sp, Key: k, Value: []byte("b")}}),                      // 4: sees 3's put
		putBatch([]history.Condition{{Space: sp, Key: k, Exists: true, Value: []byte("a")}}, nil, history.RecordKey{Space: sp, Key: gone}), // 5
		putBatch([]history.Condition{{Space: sp, Key: gone, Exists: true}}, nil),                                                           // 6: sees 5's delete
		putBatch([]history.Condition{{Space: sp, Key: gone}}, []history.Record{{Space: sp, Key: gone, Value: []byte("again")}}),            // 7
	)
	wantOutcomes(t, errs, nil, history.ErrConflict, nil, nil, history.ErrConflict, nil, history.ErrConflict, nil)

	evs, err := s.ReadEvents(bg, run, 1, 0)
	if err != nil || len(evs) != 2 {
		t.Fatalf("ReadEvents: %d events, %v", len(evs), err)
	}
	for i, name := range []string{"first", "third"} {
		if got := evs[i].Attrs.(*history.SignalReceived).Name; got != name {
			t.Errorf("event %d is %q, want %q", i+1, got, name)
		}
	}
	for key, want := range map[string]string{"k": "a", "gone": "again"} {
		if v, err := s.Get(bg, sp, []byte(key)); err != nil || string(v) != want {
			t.Errorf("Get %s = %q, %v; want %q", key, v, err, want)
		}
	}
}

// TestGroupCommitFailureReachesEveryMember: when the shared transaction
// fails, each accepted batch gets the failure, a refused one keeps its own
// error, nothing is written, and the next group starts clean.
func TestGroupCommitFailureReachesEveryMember(t *testing.T) {
	boom := errors.New("disk on fire")
	var fail atomic.Bool
	fail.Store(true)
	s, err := open(Options{InMemory: true}, testHooks{commit: func(txn *badger.Txn) error {
		if fail.Load() {
			txn.Discard()
			return boom
		}
		return txn.Commit()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := history.RunRef{WorkflowID: "wf", RunID: "a"}
	b := history.RunRef{WorkflowID: "wf", RunID: "b"}

	errs := runGroup(t, s, appendTo(a, 1, "a1"), appendTo(a, 1, "again"), appendTo(b, 1, "b1"))
	wantOutcomes(t, errs, boom, history.ErrConflict, boom)
	if lastID(t, s, a) != 0 || lastID(t, s, b) != 0 {
		t.Fatal("a failed group commit wrote something")
	}

	fail.Store(false)
	errs = runGroup(t, s, appendTo(a, 1, "a1"), appendTo(b, 1, "b1"))
	wantOutcomes(t, errs, nil, nil)
}

// TestGroupSplitsWhenTooBig: a group larger than one Badger transaction is
// committed in several, in order; a batch too big on its own is refused
// with ErrTooLarge without disturbing the others.
func TestGroupSplitsWhenTooBig(t *testing.T) {
	var commits atomic.Int32
	s, err := open(Options{InMemory: true, MemTableSize: minMemTableSize, MaxBatchBytes: 1 << 30}, testHooks{
		commit: func(txn *badger.Txn) error { commits.Add(1); return txn.Commit() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// One transaction holds 15% of 8 MiB ≈ 1.2 MB.
	value := bytes.Repeat([]byte("v"), 400<<10) // two fit, four do not
	big := func(keys ...string) *history.Batch {
		b := &history.Batch{}
		for _, k := range keys {
			b.Puts = append(b.Puts, history.Record{Space: history.SpaceRunState, Key: []byte(k), Value: value})
		}
		return b
	}
	run := history.RunRef{WorkflowID: "wf", RunID: "r"}
	errs := runGroup(t, s,
		appendTo(run, 1, "one"),
		big("a", "b"),
		big("c", "d"),
		big("t1", "t2", "t3", "t4", "t5"), // alone over the limit
		big("e", "f"),
		appendTo(run, 1, "dup"), // conflicts with batch 0 across the splits
		appendTo(run, 2, "two"),
	)
	wantOutcomes(t, errs, nil, nil, nil, history.ErrTooLarge, nil, history.ErrConflict, nil)
	if n := commits.Load(); n != 3 {
		t.Errorf("%d transactions, want 3: {0 1} {2} {4 6}", n)
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		if v, err := s.Get(bg, history.SpaceRunState, []byte(k)); err != nil || !bytes.Equal(v, value) {
			t.Errorf("Get %s: %d bytes, %v", k, len(v), err)
		}
	}
	if _, err := s.Get(bg, history.SpaceRunState, []byte("t1")); !errors.Is(err, history.ErrNotFound) {
		t.Errorf("part of the refused batch was written: %v", err)
	}
	if got := lastID(t, s, run); got != 2 {
		t.Errorf("run ends at %d, want 2", got)
	}
}

// TestMaxBatchBytesCutsGroups: with a tiny MaxBatchBytes every batch is
// committed in its own transaction.
func TestMaxBatchBytesCutsGroups(t *testing.T) {
	var commits atomic.Int32
	s, err := open(Options{InMemory: true, MaxBatchBytes: 1}, testHooks{
		commit: func(txn *badger.Txn) error { commits.Add(1); return txn.Commit() },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var batches []*history.Batch
	for i := range 5 {
		batches = append(batches, appendTo(history.RunRef{WorkflowID: "wf", RunID: fmt.Sprint(i)}, 1, "x"))
	}
	wantOutcomes(t, runGroup(t, s, batches...), nil, nil, nil, nil, nil)
	if n := commits.Load(); n != 5 {
		t.Errorf("%d transactions, want 5", n)
	}
}

// pausable opens an in-memory store whose committer stops in its taken
// hook until release is closed, so that callers queue up behind it.
type pausable struct {
	*Store
	taken     chan int      // size of every group taken
	release   chan struct{} // close to let the committer run
	onEnqueue atomic.Pointer[func()]
	onTaken   atomic.Pointer[func()]
}

func openPausable(t *testing.T) *pausable {
	t.Helper()
	p := &pausable{taken: make(chan int, 100), release: make(chan struct{})}
	s, err := open(Options{InMemory: true}, testHooks{
		enqueued: func(*request) {
			if f := p.onEnqueue.Load(); f != nil {
				(*f)()
			}
		},
		taken: func(reqs []*request) {
			if f := p.onTaken.Load(); f != nil {
				(*f)()
			}
			p.taken <- len(reqs)
			<-p.release
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Store = s
	t.Cleanup(func() { _ = s.Close() })
	return p
}

// commitAsync starts a Commit and returns its outcome channel.
func commitAsync(ctx context.Context, s *Store, b *history.Batch) <-chan error {
	out := make(chan error, 1)
	go func() { out <- s.Commit(ctx, b) }()
	return out
}

// TestCancelWhileQueued: a caller whose context ends while its batch waits
// in the queue gets ctx.Err(), and the batch is never written.
func TestCancelWhileQueued(t *testing.T) {
	p := openPausable(t)
	blocker := history.RunRef{WorkflowID: "wf", RunID: "blocker"}
	first := commitAsync(bg, p.Store, appendTo(blocker, 1, "x"))
	<-p.taken // the committer holds the first group

	ctx, cancel := context.WithCancel(bg)
	f := func() { cancel() }
	p.onEnqueue.Store(&f)
	canceled := history.RunRef{WorkflowID: "wf", RunID: "canceled"}
	if err := p.Commit(ctx, appendTo(canceled, 1, "x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit canceled while queued = %v, want context.Canceled", err)
	}
	p.onEnqueue.Store(nil)

	close(p.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// A later commit goes through the queue the canceled batch was in.
	if err := p.Commit(bg, appendTo(blocker, 2, "y")); err != nil {
		t.Fatal(err)
	}
	if got := lastID(t, p.Store, canceled); got != 0 {
		t.Fatalf("the canceled batch was written (run at %d)", got)
	}
}

// TestCancelAfterTaken: once the committer has taken a batch, a canceled
// context no longer withdraws it; Commit reports the real outcome.
func TestCancelAfterTaken(t *testing.T) {
	p := openPausable(t)
	close(p.release)
	ctx, cancel := context.WithCancel(bg)
	f := func() { cancel() }
	p.onTaken.Store(&f)
	run := history.RunRef{WorkflowID: "wf", RunID: "r"}
	if err := p.Commit(ctx, appendTo(run, 1, "x")); err != nil {
		t.Fatalf("Commit canceled after it was taken = %v, want nil (it was committed)", err)
	}
	if ctx.Err() == nil {
		t.Fatal("the taken hook did not cancel the context")
	}
	if got := lastID(t, p.Store, run); got != 1 {
		t.Fatalf("run at %d, want 1", got)
	}
}

// TestConcurrentCommitsShareGroups: callers that queue while a group is
// being committed are committed together in the next one.
func TestConcurrentCommitsShareGroups(t *testing.T) {
	p := openPausable(t)
	first := commitAsync(bg, p.Store, appendTo(history.RunRef{WorkflowID: "wf", RunID: "first"}, 1, "x"))
	<-p.taken
	var outs []<-chan error
	queued := make(chan struct{}, 10)
	f := func() { queued <- struct{}{} }
	p.onEnqueue.Store(&f)
	for i := range 10 {
		outs = append(outs, commitAsync(bg, p.Store, appendTo(history.RunRef{WorkflowID: "wf", RunID: fmt.Sprint(i)}, 1, "x")))
	}
	for range 10 {
		<-queued
	}
	close(p.release)
	for _, out := range append(outs, first) {
		if err := <-out; err != nil {
			t.Fatal(err)
		}
	}
	if n := <-p.taken; n != 10 {
		t.Fatalf("second group had %d batches, want 10", n)
	}
}

// TestCommitErrorAfterWrite: a commit can fail after Badger applied it (a
// failed fsync). The committer must then trust Badger, not what it knew
// before, when checking the next batches.
func TestCommitErrorAfterWrite(t *testing.T) {
	var lie atomic.Bool
	lie.Store(true)
	s, err := open(Options{InMemory: true}, testHooks{commit: func(txn *badger.Txn) error {
		err := txn.Commit()
		if lie.Load() && err == nil {
			return errors.New("fsync failed")
		}
		return err
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := history.RunRef{WorkflowID: "wf", RunID: "r"}
	if errs := runGroup(t, s, appendTo(run, 1, "a")); errs[0] == nil {
		t.Fatal("the hook did not fail the commit")
	}
	lie.Store(false)
	wantOutcomes(t, runGroup(t, s, appendTo(run, 1, "b"), appendTo(run, 2, "c")), history.ErrConflict, nil)
}

// watchdog fails the test if out does not deliver within a minute: the
// behaviour under test would otherwise hang for an hour-long linger.
func watchdog[T any](t *testing.T, what string, out <-chan T) T {
	t.Helper()
	select {
	case v := <-out:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: still waiting after a minute", what)
		panic("unreachable")
	}
}

// takeAsync runs q.take in a goroutine and returns the group it takes.
func takeAsync(q *queue, want int, linger time.Duration) <-chan []*request {
	out := make(chan []*request, 1)
	go func() {
		reqs, _ := q.take(want, linger)
		out <- reqs
	}()
	return out
}

func newQueue() *queue {
	q := &queue{}
	q.init()
	return q
}

// TestLingerEndsWhenGroupRefills: after answering two callers, take waits
// for both to come back (not for the hour), and takes them with the
// straggler that was already queued.
func TestLingerEndsWhenGroupRefills(t *testing.T) {
	q := newQueue()
	q.push(&request{}) // a straggler
	q.markReplies()
	out := takeAsync(q, 2, time.Hour)
	q.push(&request{})
	q.push(&request{})
	if got := watchdog(t, "take", out); len(got) != 3 {
		t.Fatalf("took %d batches, want 3", len(got))
	}
}

// TestLingerExpires: take does not wait longer than its linger.
func TestLingerExpires(t *testing.T) {
	q := newQueue()
	q.markReplies()
	q.push(&request{})
	out := takeAsync(q, 64, time.Millisecond)
	if got := watchdog(t, "take", out); len(got) != 1 {
		t.Fatalf("took %d batches, want 1", len(got))
	}
}

// TestCloseEndsLinger: once Close begins, take stops lingering.
func TestCloseEndsLinger(t *testing.T) {
	q := newQueue()
	q.markReplies()
	q.push(&request{})
	out := takeAsync(q, 2, time.Hour)
	q.close()
	if got := watchdog(t, "take", out); len(got) != 1 {
		t.Fatalf("took %d batches, want 1", len(got))
	}
}

// TestLoneWriterDoesNotLinger: after a group of one, take does not wait.
func TestLoneWriterDoesNotLinger(t *testing.T) {
	q := newQueue()
	q.markReplies()
	q.push(&request{})
	if got := watchdog(t, "take", takeAsync(q, 1, time.Hour)); len(got) != 1 {
		t.Fatalf("took %d batches, want 1", len(got))
	}
}
