package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/pgstore"
)

// Store is what a node needs of the shared database: the shard leases and
// the server registry (*pgstore.Store).
type Store interface {
	Shards() int
	AcquireShard(ctx context.Context, shard int, owner string, ttl time.Duration) (pgstore.Lease, error)
	RenewLeases(ctx context.Context, owner string, leases []pgstore.Lease, ttl time.Duration) ([]pgstore.Lease, error)
	ReleaseLeases(ctx context.Context, owner string, leases []pgstore.Lease) error
	Leases(ctx context.Context) ([]pgstore.LeaseInfo, time.Time, error)
	RegisterServer(ctx context.Context, info pgstore.ServerInfo) error
	HeartbeatServer(ctx context.Context, id string, ttl time.Duration) error
	Servers(ctx context.Context) ([]pgstore.ServerInfo, error)
	RemoveServer(ctx context.Context, id string) error
}

// Engine is what a node drives: the engine it acquires and releases
// shards for (*engine.Engine).
type Engine interface {
	api.Service
	Acquire(ctx context.Context, shards []int) error
	Release(shards []int)
}

// loadTimeout bounds the loading of newly acquired shards' runs.
const loadTimeout = time.Minute

// Defaults of Options.
const (
	// DefaultLeaseTTL is how long a shard's lease lives without renewal:
	// the time a dead or frozen server's shards wait before another takes
	// them over.
	DefaultLeaseTTL = 10 * time.Second
	// DefaultMovesPerTick bounds how many shards a node gives up per tick
	// when it holds more than its share, so that a server joining does not
	// start a storm of hand-overs.
	DefaultMovesPerTick = 16
)

// Options configure a Node.
type Options struct {
	// Store is the shared database (required).
	Store Store
	// ID names this server among those sharing the database (default: the
	// host name, the process id and random bits: unique per process, so a
	// restarted server never resumes an old lease by its name).
	ID string
	// Address is where the other servers reach this server's API
	// (host:port); required when several servers share the database.
	Address string
	// Version is this server's build, shown by `cairn cluster describe`.
	Version string
	// LeaseTTL is the lease of a shard (default DefaultLeaseTTL). Leases
	// are renewed every LeaseTTL/3; a server stops serving its shards once
	// it could not renew them for LeaseTTL*9/10 by its own clock, before
	// the database lets another take them.
	LeaseTTL time.Duration
	// Tick is how often the node renews, rebalances and reads the routing
	// table (default LeaseTTL/10).
	Tick time.Duration
	// MovesPerTick bounds the shards given up per tick (default
	// DefaultMovesPerTick).
	MovesPerTick int
	// Dial opens a client to another server's API (required when several
	// servers share the database). Calls made through it carry
	// ForwardedHeader.
	Dial func(address string) (api.Service, error)
	// Logger receives the node's logs (default: discarded).
	Logger *zerolog.Logger
}

func (o *Options) fill() error {
	if o.Store == nil {
		return fmt.Errorf("%w: cluster: Options.Store is required", api.ErrInvalidArgument)
	}
	if o.ID == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.ID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.LeaseTTL < 100*time.Millisecond {
		return fmt.Errorf("%w: cluster: LeaseTTL %v is too short", api.ErrInvalidArgument, o.LeaseTTL)
	}
	if o.Tick == 0 {
		o.Tick = o.LeaseTTL / 10
	}
	if o.MovesPerTick == 0 {
		o.MovesPerTick = DefaultMovesPerTick
	}
	if o.Logger == nil {
		l := zerolog.Nop()
		o.Logger = &l
	}
	return nil
}

// Node is one server's membership in a cluster: it registers the server,
// holds and renews its shards' leases, takes over the shards of servers
// that died, gives shards up when others join, and keeps the routing table
// (who serves which shard). It is the engine's engine.Shards.
type Node struct {
	opts Options
	st   Store
	n    int
	log  zerolog.Logger

	mu   sync.Mutex
	held map[int]pgstore.Lease
	// validUntil is when this node's leases may have expired by the
	// database's clock, as far as this node can tell (its clock, from the
	// last renewal sent): past it, it serves nothing.
	validUntil time.Time
	renewedAt  time.Time
	table      routing

	eng    Engine
	now    func() time.Time // the node's clock (tests replace it)
	fenced chan int
	// lost are the shards a renewal found taken over: no longer held, not
	// yet released by the engine (the loop does it; mu guards it).
	lost    []int
	wake    chan struct{}
	stats   stats
	stop    chan struct{}
	done    chan struct{} // closed when the loop returns
	renewed chan struct{} // closed when the renewals' goroutine returns
	started atomic.Bool
	closed  atomic.Bool
}

// stats count what the node did, for metrics.
type stats struct {
	acquired, released, lost, fenced, forwarded, handedBack, pastLease atomic.Int64
}

// New returns a node (not yet running: Start).
func New(opts Options) (*Node, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	return &Node{opts: opts, st: opts.Store, n: opts.Store.Shards(), log: opts.Logger.With().Str("server", opts.ID).Logger(),
		held: map[int]pgstore.Lease{}, now: time.Now, fenced: make(chan int, 1024), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{}), renewed: make(chan struct{})}, nil
}

// ID is the server's id.
func (n *Node) ID() string { return n.opts.ID }

// Count is the cluster's shard count (engine.Shards).
func (n *Node) Count() int { return n.n }

// Of is the shard of a workflow id (engine.Shards).
func (n *Node) Of(workflowID string) int { return history.ShardOf(workflowID, n.n) }

// Lease returns the fence of a shard this node holds (engine.Shards). Past
// the time its leases may have run out by the database's clock (it could
// not renew them: the database was unreachable, or this process was
// frozen or starved), it holds none, whatever its next round will find:
// the engine answers nothing from its memory of the shard — a woken-up
// server may no longer be the owner.
func (n *Node) Lease(shard int) (history.Fence, bool) { return n.lease(shard, true) }

// lease is Lease; count says whether a refusal past the lease counts in
// the stats (the engine's checks do; the router's choice of a server
// does not, or each call would count twice).
func (n *Node) lease(shard int, count bool) (history.Fence, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l, ok := n.held[shard]
	if !ok {
		return history.Fence{}, false
	}
	if !n.now().Before(n.validUntil) {
		if count {
			n.stats.pastLease.Add(1)
		}
		return history.Fence{}, false
	}
	return l.Fence(), true
}

// Fenced is told that a commit was refused by a shard's fence
// (engine.Shards): the node checks the lease at once and gives the shard
// up if it moved on.
func (n *Node) Fenced(shard int, _ int64) {
	n.stats.fenced.Add(1)
	select {
	case n.fenced <- shard:
	default:
	}
	n.poke()
}

func (n *Node) poke() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Start registers the server and runs the node in the background until
// Close: eng is the engine it acquires shards for (opened with this node
// as its Options.Shards). The first round of acquisitions is done before
// Start returns, so a lone server serves every shard at once.
//
// Two goroutines: one heartbeats the registration and renews the leases
// (keepAlive), the other reads the table and takes, loads and gives up
// shards (round). Loading a shard's runs may take long; the renewals do
// not wait for it.
func (n *Node) Start(ctx context.Context, eng Engine) error {
	n.eng = eng
	if err := n.st.RegisterServer(ctx, pgstore.ServerInfo{ID: n.opts.ID, Address: n.opts.Address, Version: n.opts.Version,
		TTL: n.opts.LeaseTTL}); err != nil {
		return fmt.Errorf("cluster: register server %s: %w", n.opts.ID, err)
	}
	n.started.Store(true)
	go n.keepAliveLoop()
	n.round(ctx)
	go n.loop()
	return nil
}

// keepAliveLoop heartbeats and renews every tick until Close.
func (n *Node) keepAliveLoop() {
	defer close(n.renewed)
	t := time.NewTicker(n.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.LeaseTTL/2)
		n.keepAlive(ctx)
		cancel()
	}
}

// keepAlive heartbeats the server's registration and renews its leases
// when due.
func (n *Node) keepAlive(ctx context.Context) {
	if err := n.st.HeartbeatServer(ctx, n.opts.ID, n.opts.LeaseTTL); err != nil {
		n.log.Warn().Err(err).Msg("cluster: heartbeat failed")
	}
	n.renew(ctx)
}

func (n *Node) loop() {
	defer close(n.done)
	t := time.NewTicker(n.opts.Tick)
	defer t.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
		case <-n.wake:
		}
		ctx, cancel := context.WithTimeout(context.Background(), n.opts.LeaseTTL/2)
		n.round(ctx)
		cancel()
	}
}

// round is one turn of the node's loop: give up the shards whose leases
// lapsed or were taken over, read the table, settle fenced shards, then
// take or give shards towards this server's share.
func (n *Node) round(ctx context.Context) {
	n.expireIfUnrenewed(ctx)
	n.dropLost()
	infos, servers, err := n.read(ctx)
	if err != nil {
		n.log.Warn().Err(err).Msg("cluster: cannot read the leases")
		return
	}
	n.settleFenced(infos)
	alive := 0
	for _, s := range servers {
		if s.Alive {
			alive++
		}
	}
	share := (n.n + max(alive, 1) - 1) / max(alive, 1)
	n.takeShare(ctx, infos, share)
	n.giveExcess(ctx, share)
}

// read refreshes the routing table from the database.
func (n *Node) read(ctx context.Context) ([]pgstore.LeaseInfo, []pgstore.ServerInfo, error) {
	infos, _, err := n.st.Leases(ctx)
	if err != nil {
		return nil, nil, err
	}
	servers, err := n.st.Servers(ctx)
	if err != nil {
		return nil, nil, err
	}
	n.mu.Lock()
	n.table = newRouting(infos, servers)
	n.mu.Unlock()
	return infos, servers, nil
}

// renew extends the held leases every LeaseTTL/3; a lease the database no
// longer gives this node (another took it over) is no longer held at once,
// and the loop has the engine release its shard. Leases that were not renewed in time are not renewed late:
// while they were past their validity the engine refused the shards' work
// (Lease said no), so the loop starts over with them (expireIfUnrenewed).
// It runs on the keep-alive goroutine: it never calls the engine.
func (n *Node) renew(ctx context.Context) {
	n.mu.Lock()
	lapsed := len(n.held) > 0 && !n.now().Before(n.validUntil)
	due := n.now().Sub(n.renewedAt) >= n.opts.LeaseTTL/3
	leases := make([]pgstore.Lease, 0, len(n.held))
	for _, l := range n.held {
		leases = append(leases, l)
	}
	n.mu.Unlock()
	if lapsed {
		n.poke() // the loop gives them up
		return
	}
	if !due || len(leases) == 0 {
		return
	}
	sent := n.now()
	renewed, err := n.st.RenewLeases(ctx, n.opts.ID, leases, n.opts.LeaseTTL)
	if err != nil {
		n.log.Warn().Err(err).Int("shards", len(leases)).Msg("cluster: cannot renew the leases")
		return
	}
	kept := map[int]pgstore.Lease{}
	for _, l := range renewed {
		kept[l.Shard] = l
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.now().Before(n.validUntil) {
		return // they lapsed while the renewal was on its way: the loop starts over
	}
	lost, extended := false, false
	for _, l := range leases {
		if cur, ok := n.held[l.Shard]; !ok || cur.Epoch != l.Epoch {
			continue // given up, or acquired again, meanwhile
		}
		if k, ok := kept[l.Shard]; ok {
			n.held[l.Shard] = k
			extended = true
		} else {
			delete(n.held, l.Shard)
			n.lost = append(n.lost, l.Shard)
			lost = true
		}
	}
	if extended {
		// Every lease held now was renewed after sent, or acquired after
		// it: valid until sent's 9/10 of a lease at least.
		n.renewedAt, n.validUntil = sent, sent.Add(n.opts.LeaseTTL*9/10)
	}
	if lost {
		n.poke()
	}
}

// dropLost has the engine release the shards a renewal found taken over.
func (n *Node) dropLost() {
	n.mu.Lock()
	shards := n.lost
	n.lost = nil
	n.mu.Unlock()
	n.drop(shards, "its lease was taken over")
}

// expireIfUnrenewed stops serving every shard once the leases may have run
// out: another server may be serving them by now. It releases those that
// are still this node's (nobody took them: the database was unreachable,
// or the freeze was short), so that the next acquisition, this node's or
// another's, starts a new epoch and loads their runs afresh. It reports
// whether it expired anything.
func (n *Node) expireIfUnrenewed(ctx context.Context) bool {
	n.mu.Lock()
	if len(n.held) == 0 || n.now().Before(n.validUntil) {
		n.mu.Unlock()
		return false
	}
	lost := make([]int, 0, len(n.held))
	leases := make([]pgstore.Lease, 0, len(n.held))
	for sh, l := range n.held {
		lost = append(lost, sh)
		leases = append(leases, l)
	}
	clear(n.held)
	n.mu.Unlock()
	n.drop(lost, "its lease could not be renewed before it ran out")
	if err := n.st.ReleaseLeases(ctx, n.opts.ID, leases); err != nil {
		n.log.Warn().Err(err).Msg("cluster: cannot release the expired leases; they run out by themselves")
	}
	return true
}

// settleFenced gives up the fenced shards whose lease moved on.
func (n *Node) settleFenced(infos []pgstore.LeaseInfo) {
	for {
		select {
		case sh := <-n.fenced:
			if sh < 0 || sh >= len(infos) {
				continue
			}
			n.mu.Lock()
			l, ok := n.held[sh]
			moved := ok && (infos[sh].Owner != n.opts.ID || infos[sh].Epoch != l.Epoch)
			if moved {
				delete(n.held, sh)
			}
			n.mu.Unlock()
			if moved {
				n.drop([]int{sh}, "a commit was fenced: another server holds it")
			}
		default:
			return
		}
	}
}

// drop stops serving shards this node lost (its leases are gone already).
func (n *Node) drop(shards []int, why string) {
	if len(shards) == 0 {
		return
	}
	n.eng.Release(shards)
	n.stats.lost.Add(int64(len(shards)))
	n.log.Warn().Ints("shards", shards).Msg("cluster: stopped serving shards: " + why)
}

// takeShare acquires free shards (unowned, or whose lease ran out) until
// this node holds its share.
func (n *Node) takeShare(ctx context.Context, infos []pgstore.LeaseInfo, share int) {
	n.mu.Lock()
	need := share - len(n.held)
	n.mu.Unlock()
	if need <= 0 {
		return
	}
	var got []pgstore.Lease
	sent := n.now() // before the first lease was granted: its validity counts from here
	for _, sh := range freeShards(infos) {
		if len(got) == need || ctx.Err() != nil {
			break
		}
		// One shard whose row is locked (a commit of its last owner in
		// flight) must not spend the whole round: each acquisition gets a
		// tick, and the next free shard is tried.
		actx, cancel := context.WithTimeout(ctx, n.opts.Tick)
		l, err := n.st.AcquireShard(actx, sh, n.opts.ID, n.opts.LeaseTTL)
		cancel()
		if errors.Is(err, pgstore.ErrLeaseHeld) {
			continue // another server was quicker
		}
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			n.log.Warn().Int("shard", sh).Msg("cluster: a shard's lease row is locked (its last owner's commit is in flight); trying another")
			continue
		}
		if err != nil {
			n.log.Warn().Err(err).Int("shard", sh).Msg("cluster: cannot acquire a shard")
			break
		}
		got = append(got, l)
	}
	// The runs load under a context of their own: acquisitions that took
	// most of the round must not make the load fail and the shards go, and
	// a big shard may take longer than a lease to load (the keep-alive
	// goroutine renews the leases meanwhile).
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
	defer cancel()
	n.serve(lctx, got, sent)
}

// serve starts serving newly acquired shards: the engine loads their runs.
// sent is when the first of their acquisitions was sent.
func (n *Node) serve(ctx context.Context, got []pgstore.Lease, sent time.Time) {
	if len(got) == 0 {
		return
	}
	// A shard taken over and acquired again since is released by the
	// engine first (its runs as they were are forgotten), and not later.
	n.dropLost()
	shards := make([]int, len(got))
	n.mu.Lock()
	for i, l := range got {
		n.held[l.Shard] = l
		shards[i] = l.Shard
	}
	if n.renewedAt.IsZero() || len(n.held) == len(got) {
		// The first shards held: their leases (the oldest granted just
		// after sent) are renewed from now on. Shards added to others
		// already held expire later than those, which set the validity.
		n.renewedAt, n.validUntil = sent, sent.Add(n.opts.LeaseTTL*9/10)
	}
	n.mu.Unlock()
	if err := n.eng.Acquire(ctx, shards); err != nil {
		n.log.Error().Err(err).Ints("shards", shards).Msg("cluster: cannot load acquired shards; giving them up")
		n.giveUp(ctx, shards)
		return
	}
	n.stats.acquired.Add(int64(len(shards)))
	n.log.Info().Ints("shards", shards).Msg("cluster: serving shards")
}

// giveExcess gives up shards beyond this node's share, a few per tick.
func (n *Node) giveExcess(ctx context.Context, share int) {
	n.mu.Lock()
	excess := min(len(n.held)-share, n.opts.MovesPerTick)
	var shards []int
	for sh := range n.held {
		if len(shards) >= excess {
			break
		}
		shards = append(shards, sh)
	}
	n.mu.Unlock()
	if len(shards) > 0 {
		n.giveUp(ctx, shards)
		n.log.Info().Ints("shards", shards).Int("share", share).Msg("cluster: gave shards up for other servers")
	}
}

// giveUp stops serving shards and releases their leases, so that another
// server can take them at once.
func (n *Node) giveUp(ctx context.Context, shards []int) {
	n.mu.Lock()
	leases := make([]pgstore.Lease, 0, len(shards))
	for _, sh := range shards {
		if l, ok := n.held[sh]; ok {
			leases = append(leases, l)
			delete(n.held, sh)
		}
	}
	n.mu.Unlock()
	n.eng.Release(shards) // Lease now says no: no new commit; the ones in flight finish
	// Released even when the caller's context is spent: otherwise the
	// shards stay held, served by nobody, until their leases run out.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), n.opts.LeaseTTL/2)
	defer cancel()
	if err := n.st.ReleaseLeases(ctx, n.opts.ID, leases); err != nil {
		n.log.Warn().Err(err).Msg("cluster: cannot release leases; they will run out")
	}
	n.stats.released.Add(int64(len(leases)))
}

// Close gives every shard up (so that the others take them over at once,
// not after the lease), removes the server from the registry and stops.
func (n *Node) Close() error {
	if n.closed.Swap(true) {
		return nil
	}
	close(n.stop)
	if n.started.Load() { // Start returned: both goroutines run
		<-n.renewed
		<-n.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.mu.Lock()
	shards := make([]int, 0, len(n.held))
	for sh := range n.held {
		shards = append(shards, sh)
	}
	n.mu.Unlock()
	if n.eng != nil {
		n.giveUp(ctx, shards)
	}
	return n.st.RemoveServer(ctx, n.opts.ID)
}

// Held lists the shards this node serves.
func (n *Node) Held() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]int, 0, len(n.held))
	for sh := range n.held {
		out = append(out, sh)
	}
	return out
}

// SetAddress sets where the other servers reach this one, once it is
// known (the API's listener may pick its port); before Start.
func (n *Node) SetAddress(address string) error {
	if n.started.Load() {
		return fmt.Errorf("%w: cluster: SetAddress after Start", api.ErrInvalidArgument)
	}
	n.opts.Address = address
	return nil
}
