package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

// expireLease waits, by polling the database's clock, until shard's lease
// is no longer held.
func expireLease(t *testing.T, s *Store, shard int) {
	t.Helper()
	until(t, fmt.Sprintf("shard %d expires", shard), func() bool {
		leases, _, err := s.Leases(bg)
		if err != nil {
			t.Fatal(err)
		}
		return !leases[shard].Held
	})
}

// TestAcquireRace: owners racing for a free shard: exactly one wins, and
// every loser is told who.
func TestAcquireRace(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	for shard := range 4 {
		const racers = 8
		start := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		var won []Lease
		var lost []*LeaseHeldError
		for r := range racers {
			wg.Go(func() {
				<-start
				l, err := s.AcquireShard(bg, shard, fmt.Sprint("owner-", r), time.Minute)
				mu.Lock()
				defer mu.Unlock()
				var held *LeaseHeldError
				switch {
				case err == nil:
					won = append(won, l)
				case errors.As(err, &held) && errors.Is(err, ErrLeaseHeld):
					lost = append(lost, held)
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(won) != 1 || len(lost) != racers-1 {
			t.Fatalf("shard %d: %d won, %d lost", shard, len(won), len(lost))
		}
		for _, h := range lost {
			if h.Owner != won[0].Owner || h.Epoch != won[0].Epoch || !h.Expires.Equal(won[0].Expires) {
				t.Fatalf("shard %d: refusal names %+v, the winner is %+v", shard, h, won[0])
			}
		}
		if won[0].Epoch != 1 || won[0].Shard != shard {
			t.Fatalf("first lease of shard %d: %+v", shard, won[0])
		}
	}
}

// TestLeaseExpiresByDatabaseClock: a lease's expiry is the database's now
// plus the ttl; once the database's clock passes it, another owner
// acquires the shard with the next epoch, and the first owner cannot
// renew.
func TestLeaseExpiresByDatabaseClock(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	_, before, err := s.Leases(bg)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.AcquireShard(bg, 5, "a", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	_, after, err := s.Leases(bg)
	if err != nil {
		t.Fatal(err)
	}
	if a.Expires.Before(before.Add(time.Millisecond)) || a.Expires.After(after.Add(time.Millisecond)) {
		t.Fatalf("expiry %s is not the database's now + 1ms (now was %s … %s)", a.Expires, before, after)
	}
	expireLease(t, s, 5)
	b, err := s.AcquireShard(bg, 5, "b", time.Minute)
	if err != nil {
		t.Fatalf("acquire an expired lease: %v", err)
	}
	if b.Epoch != a.Epoch+1 {
		t.Fatalf("takeover epoch %d, want %d", b.Epoch, a.Epoch+1)
	}
	renewed, err := s.RenewLeases(bg, "a", []Lease{a}, time.Minute)
	if err != nil || len(renewed) != 0 {
		t.Fatalf("renew after a takeover: %v, %v; want nothing renewed", renewed, err)
	}
	if _, err := s.AcquireShard(bg, 5, "a", time.Minute); !errors.Is(err, ErrLeaseHeld) {
		t.Fatalf("acquire a held lease: %v", err)
	}
	leases, now, err := s.Leases(bg)
	if err != nil || !leases[5].Held || leases[5].Owner != "b" || !leases[5].Expires.After(now) {
		t.Fatalf("lease of shard 5 after the takeover: %+v (now %s), %v", leases[5], now, err)
	}
}

// TestRenewAndRelease: renewal extends only the caller's current leases;
// release frees them at once for anyone, and only them.
func TestRenewAndRelease(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	var mine []Lease
	for shard := range 3 {
		l, err := s.AcquireShard(bg, shard, "me", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		mine = append(mine, l)
	}
	stale := mine[2]
	stale.Epoch-- // an older period of shard 2
	renewed, err := s.RenewLeases(bg, "me", []Lease{mine[0], mine[1], stale}, 2*time.Minute)
	if err != nil || len(renewed) != 2 {
		t.Fatalf("renewed %+v, %v; want shards 0 and 1", renewed, err)
	}
	for i, l := range renewed {
		if l.Shard != i || l.Epoch != mine[i].Epoch || !l.Expires.After(mine[i].Expires) || l.Owner != "me" {
			t.Fatalf("renewed %+v from %+v", l, mine[i])
		}
	}
	if renewed, err := s.RenewLeases(bg, "other", mine, time.Minute); err != nil || len(renewed) != 0 {
		t.Fatalf("another owner renewed %+v, %v", renewed, err)
	}
	if err := s.ReleaseLeases(bg, "me", []Lease{mine[0], stale}); err != nil {
		t.Fatal(err)
	}
	leases, _, err := s.Leases(bg)
	if err != nil || leases[0].Held || !leases[2].Held || !leases[1].Held {
		t.Fatalf("after releasing shard 0 (and a stale lease of 2): %+v, %v", leases[:3], err)
	}
	if l, err := s.AcquireShard(bg, 0, "other", time.Minute); err != nil || l.Epoch != mine[0].Epoch+1 {
		t.Fatalf("acquire a released shard: %+v, %v", l, err)
	}
	// Acquiring again is a new period: the old epoch's fence stops holding.
	again, err := s.AcquireShard(bg, 1, "me", time.Minute)
	if err != nil || again.Epoch != mine[1].Epoch+1 {
		t.Fatalf("re-acquire: %+v, %v", again, err)
	}
	err = s.Commit(bg, &history.Batch{Fences: []history.Fence{mine[1].Fence()}})
	if !errors.Is(err, history.ErrFenced) {
		t.Fatalf("fence of the period before a re-acquisition: %v", err)
	}
}

// TestLeaseArguments: bad shards, owners and ttls are ErrInvalid.
func TestLeaseArguments(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	for name, err := range map[string]error{
		"shard -1":      second(s.AcquireShard(bg, -1, "o", time.Minute)),
		"shard too big": second(s.AcquireShard(bg, s.Shards(), "o", time.Minute)),
		"no owner":      second(s.AcquireShard(bg, 0, "", time.Minute)),
		"ttl 0":         second(s.AcquireShard(bg, 0, "o", 0)),
		"renew ttl 0":   second(s.RenewLeases(bg, "o", []Lease{{}}, 0)),
		"release":       s.ReleaseLeases(bg, "", []Lease{{}}),
	} {
		if !errors.Is(err, history.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// TestFencedCommitAfterTakeover: a server whose shard was taken over
// writes nothing: its batch fails with ErrFenced, alone or in a group,
// while the new owner's batches commit.
func TestFencedCommitAfterTakeover(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	old, err := s.AcquireShard(bg, 7, "old", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	run := runRef("wf-7")
	first := appendTo(run, 1, "by old")
	first.Fences = []history.Fence{old.Fence()}
	if err := s.Commit(bg, first); err != nil {
		t.Fatalf("commit under a current (even expired) lease: %v", err)
	}
	expireLease(t, s, 7)
	cur, err := s.AcquireShard(bg, 7, "new", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stale := appendTo(run, 2, "by old")
	stale.Puts = []history.Record{put(history.SpaceRunState, "wf-7", "old")}
	stale.Fences = []history.Fence{old.Fence()}
	if err := s.Commit(bg, stale); !errors.Is(err, history.ErrFenced) {
		t.Fatalf("commit under a lease taken over: %v, want ErrFenced", err)
	}
	wantLast(t, s, run, 1)
	wantAbsent(t, s, history.SpaceRunState, "wf-7")

	fresh := appendTo(run, 2, "by new")
	fresh.Puts = []history.Record{put(history.SpaceRunState, "wf-7", "new")}
	fresh.Fences = []history.Fence{cur.Fence()}
	other := appendTo(runRef("wf-other"), 1, "unfenced")
	wantOutcomes(t, runGroup(t, s, stale, fresh, other), history.ErrFenced, nil, nil)
	wantLast(t, s, run, 2)
	wantValue(t, s, history.SpaceRunState, "wf-7", "new")
	wantLast(t, s, runRef("wf-other"), 1)
}

// TestFenceHoldsTheLeaseRow: between a group's fence check and its
// COMMIT, an acquisition of the shard waits for the group (the lease row
// is read FOR SHARE), so the write commits under the epoch it checked; the
// acquisition then succeeds with the next epoch, and the next batch of
// the old epoch is fenced.
func TestFenceHoldsTheLeaseRow(t *testing.T) {
	opts := testOptions(t)
	opts.URL = withParam(opts.URL, "application_name", opts.Schema) // find our sessions in pg_stat_activity
	var inHook func()
	s := openHooks(t, opts, testHooks{beforeCommit: func() {
		if inHook != nil {
			inHook()
		}
	}})
	old, err := s.AcquireShard(bg, 3, "old", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	expireLease(t, s, 3)
	type result struct {
		l   Lease
		err error
	}
	acquired := make(chan result, 1)
	waited := false
	inHook = func() { // on the committer's goroutine: no t.Fatal in here
		go func() {
			l, err := s.AcquireShard(bg, 3, "new", time.Minute)
			acquired <- result{l, err}
		}()
		waited = poll(t, func() bool { return len(acquired) > 0 || lockWaiters(t, s, opts.Schema) == 1 }) && len(acquired) == 0
	}
	b := appendTo(runRef("wf-3"), 1, "x")
	b.Fences = []history.Fence{old.Fence()}
	err = s.Commit(bg, b)
	inHook = nil
	if err != nil {
		t.Fatalf("commit whose fence held: %v", err)
	}
	cur := <-acquired
	if !waited {
		t.Fatal("the acquisition did not wait for the fenced transaction's lock")
	}
	if cur.err != nil || cur.l.Epoch != old.Epoch+1 {
		t.Fatalf("the waiting acquisition: %+v, %v; want epoch %d", cur.l, cur.err, old.Epoch+1)
	}
	wantLast(t, s, runRef("wf-3"), 1)
	if err := s.Commit(bg, &history.Batch{Fences: []history.Fence{old.Fence()}}); !errors.Is(err, history.ErrFenced) {
		t.Fatalf("fence-only batch of the old epoch: %v", err)
	}
}

// lockWaiters counts the sessions of application name app waiting for a
// lock to acquire a shard.
func lockWaiters(t *testing.T, s *Store, app string) int {
	var n int
	err := s.pool.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock' AND query LIKE 'UPDATE shards SET owner%'`, app).Scan(&n)
	if err != nil {
		t.Error(err)
		return -1
	}
	return n
}

// TestFrozenCommitDoesNotHoldTheLeaseRow: a server frozen between a
// group's fence check and its COMMIT (SIGSTOP, a paused VM) holds the lease
// row FOR SHARE in a transaction left open. The database ends that session
// after IdleInTransactionTimeout, so another server can take the shard
// over instead of waiting until the frozen one wakes up; the frozen batch
// is not written, and the old epoch is fenced from then on.
func TestFrozenCommitDoesNotHoldTheLeaseRow(t *testing.T) {
	opts := testOptions(t)
	frozen := make(chan struct{})
	thaw := make(chan struct{})
	var once sync.Once
	s := openHooks(t, opts, testHooks{beforeCommit: func() {
		once.Do(func() {
			close(frozen)
			<-thaw // the process is stopped here
		})
	}})
	old, err := s.AcquireShard(bg, 3, "old", time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	expireLease(t, s, 3)
	committed := make(chan error, 1)
	go func() {
		b := appendTo(runRef("wf-3"), 1, "x")
		b.Fences = []history.Fence{old.Fence()}
		committed <- s.Commit(bg, b)
	}()
	<-frozen
	ctx, cancel := context.WithTimeout(bg, IdleInTransactionTimeout+20*time.Second)
	defer cancel()
	started := time.Now()
	cur, err := s.AcquireShard(ctx, 3, "new", time.Minute)
	close(thaw)
	if err != nil {
		t.Fatalf("taking over the shard of a server frozen mid-commit: %v after %s", err, time.Since(started).Round(time.Millisecond))
	}
	if cur.Epoch != old.Epoch+1 {
		t.Fatalf("took over with epoch %d, want %d", cur.Epoch, old.Epoch+1)
	}
	if err := <-committed; err == nil {
		t.Fatal("the frozen server's commit succeeded after the shard was taken over")
	}
	wantLast(t, s, runRef("wf-3"), 0)
	if err := s.Commit(bg, &history.Batch{Fences: []history.Fence{old.Fence()}}); !errors.Is(err, history.ErrFenced) {
		t.Fatalf("fence-only batch of the old epoch: %v", err)
	}
}
