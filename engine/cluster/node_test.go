package cluster

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/pgstore"
)

// fakeClock is the clock of the nodes and of their fake database.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeStore keeps the leases and registrations as pgstore does, by the
// fake clock.
type fakeStore struct {
	clk     *fakeClock
	mu      sync.Mutex
	leases  []pgstore.Lease
	servers map[string]pgstore.ServerInfo
	// locked shards' rows are held by a commit that never ends (its server
	// frozen mid-commit): an acquisition waits until its context ends.
	locked map[int]bool
}

func newFakeStore(shards int, clk *fakeClock) *fakeStore {
	st := &fakeStore{clk: clk, servers: map[string]pgstore.ServerInfo{}}
	for i := range shards {
		st.leases = append(st.leases, pgstore.Lease{Shard: i})
	}
	return st
}

func (s *fakeStore) Shards() int { return len(s.leases) }

func (s *fakeStore) AcquireShard(ctx context.Context, shard int, owner string, ttl time.Duration) (pgstore.Lease, error) {
	s.mu.Lock()
	if s.locked[shard] {
		s.mu.Unlock()
		<-ctx.Done()
		return pgstore.Lease{}, ctx.Err()
	}
	defer s.mu.Unlock()
	l := &s.leases[shard]
	now := s.clk.Now()
	if l.Owner != "" && l.Owner != owner && l.Expires.After(now) {
		return pgstore.Lease{}, &pgstore.LeaseHeldError{Shard: shard, Owner: l.Owner, Epoch: l.Epoch, Expires: l.Expires}
	}
	l.Owner, l.Epoch, l.Expires = owner, l.Epoch+1, now.Add(ttl)
	return *l, nil
}

func (s *fakeStore) RenewLeases(_ context.Context, owner string, leases []pgstore.Lease, ttl time.Duration) ([]pgstore.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pgstore.Lease
	for _, l := range leases {
		cur := &s.leases[l.Shard]
		if cur.Owner == owner && cur.Epoch == l.Epoch {
			cur.Expires = s.clk.Now().Add(ttl)
			out = append(out, *cur)
		}
	}
	return out, nil
}

func (s *fakeStore) ReleaseLeases(_ context.Context, owner string, leases []pgstore.Lease) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range leases {
		if cur := &s.leases[l.Shard]; cur.Owner == owner && cur.Epoch == l.Epoch {
			cur.Expires = s.clk.Now()
		}
	}
	return nil
}

func (s *fakeStore) Leases(context.Context) ([]pgstore.LeaseInfo, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	out := make([]pgstore.LeaseInfo, len(s.leases))
	for i, l := range s.leases {
		out[i] = pgstore.LeaseInfo{Lease: l, Held: l.Owner != "" && l.Expires.After(now)}
	}
	return out, now, nil
}

func (s *fakeStore) RegisterServer(_ context.Context, info pgstore.ServerInfo) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	info.Expires = s.clk.Now().Add(info.TTL)
	s.servers[info.ID] = info
	return nil
}

func (s *fakeStore) HeartbeatServer(_ context.Context, id string, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.servers[id]
	info.Expires = s.clk.Now().Add(ttl)
	s.servers[id] = info
	return nil
}

func (s *fakeStore) Servers(context.Context) ([]pgstore.ServerInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []pgstore.ServerInfo
	for _, info := range s.servers {
		info.Alive = info.Expires.After(s.clk.Now())
		out = append(out, info)
	}
	return out, nil
}

func (s *fakeStore) RemoveServer(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.servers, id)
	return nil
}

// fakeEngine records the shards a node has its engine serve.
type fakeEngine struct {
	api.Service // not called
	mu          sync.Mutex
	serving     map[int]bool
	loads       int // shards loaded by Acquire
	// loading, when set, is told when Acquire starts, which then waits
	// for loaded: the runs of a big shard take long to load.
	loading, loaded chan struct{}
}

func (e *fakeEngine) Acquire(ctx context.Context, shards []int) error {
	if err := ctx.Err(); err != nil {
		return err // loading reads the database under ctx
	}
	if e.loading != nil {
		e.loading <- struct{}{}
		<-e.loaded
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, sh := range shards {
		e.serving[sh] = true
		e.loads++
	}
	return nil
}

func (e *fakeEngine) Release(shards []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, sh := range shards {
		delete(e.serving, sh)
	}
}

func (e *fakeEngine) served() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int
	for sh := range e.serving {
		out = append(out, sh)
	}
	slices.Sort(out)
	return out
}

// testNode is a node on st, not running its loop: the test runs its
// rounds.
func testNode(t *testing.T, st *fakeStore, clk *fakeClock, id string) (*Node, *fakeEngine) {
	t.Helper()
	n, err := New(Options{Store: st, ID: id, Address: id + ":7233", LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eng := &fakeEngine{serving: map[int]bool{}}
	n.now, n.eng = clk.Now, eng
	return n, eng
}

// TestWokenOwnerServesNothingFromMemory: a node that could not renew its
// leases for 9/10 of their length — its process was frozen, or starved,
// or the database unreachable — holds no lease any more as far as its
// engine is concerned, before its next round has read anything: another
// server may have taken the shards over meanwhile, and the engine must
// not answer from its memory of them (a heartbeat accepted, an attempt
// called stale). Its next round starts over: the shards nobody took are
// acquired again under new epochs and their runs loaded afresh.
func TestWokenOwnerServesNothingFromMemory(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	st := newFakeStore(4, clk)
	a, engA := testNode(t, st, clk, "a")
	if err := st.RegisterServer(ctx, pgstore.ServerInfo{ID: "a", TTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	a.round(ctx)
	first, ok := a.Lease(0)
	if !ok || len(engA.served()) != 4 {
		t.Fatalf("a alone holds %v, serves %v; want every shard", a.Held(), engA.served())
	}
	clk.advance(2 * time.Second) // within 9/10 of the lease: still held
	if _, ok := a.Lease(0); !ok {
		t.Fatal("the lease is refused 2 s into a 3 s lease")
	}
	clk.advance(time.Second) // a was frozen: no round renewed the leases
	if f, ok := a.Lease(0); ok {
		t.Fatalf("a holds shard 0 (epoch %d) 3 s into a 3 s lease it never renewed", f.Epoch)
	}
	if n := a.Stats().RefusedPastLease; n != 1 {
		t.Fatalf("RefusedPastLease %d, want 1", n)
	}
	// Nobody took them: a's next round acquires them again, with new
	// epochs, and its engine loads them afresh.
	a.round(ctx)
	again, ok := a.Lease(0)
	if !ok || again.Epoch <= first.Epoch || len(engA.served()) != 4 || engA.loads != 8 {
		t.Fatalf("after the lapse: lease %+v %v (first epoch %d), serving %v after %d loads; want every shard again, new epochs, loaded twice",
			again, ok, first.Epoch, engA.served(), engA.loads)
	}

	// Frozen past the lease while b takes every shard over: when a wakes
	// up it refuses the shards at once, and its round gives them up.
	clk.advance(3 * time.Second)
	b, engB := testNode(t, st, clk, "b")
	if err := st.RegisterServer(ctx, pgstore.ServerInfo{ID: "b", TTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	b.round(ctx)
	if len(engB.served()) != 4 {
		t.Fatalf("b took over %v, want every shard", engB.served())
	}
	for sh := range 4 {
		if _, ok := a.Lease(sh); ok {
			t.Fatalf("a, woken up, still holds shard %d that b took over", sh)
		}
	}
	lost := a.Stats().Lost
	a.round(ctx)
	if got := engA.served(); len(got) != 0 || a.Stats().Lost != lost+4 {
		t.Fatalf("a serves %v after its round, lost %d more; want nothing served, 4 lost", got, a.Stats().Lost-lost)
	}
}

// TestLockedShardDoesNotStallTheRound: a shard whose lease row is locked
// (its last owner froze mid-commit) costs an acquisition a tick, not the
// round: the node takes the other free shards and serves them, and gives
// nothing up for want of time.
func TestLockedShardDoesNotStallTheRound(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	st := newFakeStore(4, clk)
	st.locked = map[int]bool{2: true}
	a, eng := testNode(t, st, clk, "a")
	if err := st.RegisterServer(context.Background(), pgstore.ServerInfo{ID: "a", TTL: 3 * time.Second}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), a.opts.LeaseTTL/2) // as the loop gives a round
	defer cancel()
	a.round(ctx)
	if got := eng.served(); !slices.Equal(got, []int{0, 1, 3}) {
		t.Fatalf("a serves %v with shard 2 locked, want [0 1 3]", got)
	}
}

// TestLongLoadKeepsItsLeases: loading the runs of newly acquired shards
// may take longer than the lease (a big database); the node renews its
// leases meanwhile, so that they are still held when the load is done —
// not lost to the lapse that would make it give them up and load them
// again, forever.
func TestLongLoadKeepsItsLeases(t *testing.T) {
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	st := newFakeStore(2, clk)
	n, err := New(Options{Store: st, ID: "a", Address: "a:7233", LeaseTTL: 3 * time.Second, Tick: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	n.now = clk.Now
	eng := &fakeEngine{serving: map[int]bool{}, loading: make(chan struct{}, 1), loaded: make(chan struct{})}
	started := make(chan error, 1)
	go func() { started <- n.Start(context.Background(), eng) }()
	var finish sync.Once
	load := func() { finish.Do(func() { close(eng.loaded) }) }
	t.Cleanup(func() {
		load()
		<-started
		_ = n.Close()
	})
	<-eng.loading
	// Six seconds of a three-second lease go by while the runs load; the
	// node renews the leases every second of them.
	for range 6 {
		clk.advance(time.Second)
		want := clk.Now().Add(2 * time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for {
			st.mu.Lock()
			renewed := st.leases[0].Expires.After(want)
			st.mu.Unlock()
			if renewed {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the leases were not renewed while the runs loaded (at %s)", clk.Now().Format(time.TimeOnly))
			}
			runtime.Gosched()
		}
	}
	load()
	deadline := time.Now().Add(10 * time.Second)
	for len(eng.served()) != 2 && time.Now().Before(deadline) {
		runtime.Gosched() // Start returns once the load is done
	}
	if _, ok := n.Lease(0); !ok || len(eng.served()) != 2 {
		t.Fatalf("after the load: lease held %v, serving %v; want both shards served under their first leases", ok, eng.served())
	}
}
