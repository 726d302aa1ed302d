// Package engine is Cairn's workflow engine: durable runs, workflow and
// activity tasks under leases, exact timers, retries, signals, children,
// the effects ledger and recovery, over a history.Store.
//
// It has two layers. The run state machine is package engine/machine: a
// pure function of a run's state, an input and the time, which returns the
// new events, the new state and what to dispatch — no I/O, no clock, no
// goroutines; everything about a run is decided there. Engine (this
// package: this file, service*.go, txn.go, ledger.go, …) is the service
// around it: it owns the store, runs each input through a machine.Machine
// on a copy of the run's state and commits the result in one store
// transaction, and keeps the ready-task queues, the waiting pollers and the
// timer heap in memory, rebuilt from the store when it opens. Limits,
// Defaults, Pricing, Price and IdempotencyKey are the machine's, named here
// for Options and the engine's callers.
//
// Use:
//
//	st, _ := badgerstore.Open(badgerstore.Options{Dir: "./cairn-data"})
//	eng, _ := engine.Open(engine.Options{Store: st})
//	defer st.Close()
//	defer eng.Close()
//	var svc api.Service = eng
package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/internal/matching"
	"github.com/cairnflow/cairn/engine/internal/timerq"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/clock"
)

// Options configure an Engine. Store is required; everything else has a
// documented default.
type Options struct {
	// Store is the durable log. The engine does not close it.
	Store history.Store
	// Shards, when set, makes the engine serve only the shards it acquires
	// (Acquire, Release) and fence every commit with their leases: several
	// engines then share one store (docs/scale-out.md). Nil: the engine
	// serves every run of the store, which it must be the only one to use.
	Shards Shards
	// Clock is the time source (default: the real clock).
	Clock clock.Clock
	// Limits bound each run (default DefaultLimits()).
	Limits Limits
	// Defaults fill unset timeouts and policies (default DefaultDefaults()).
	Defaults Defaults
	// PollTimeout bounds a long poll (default 60 s).
	PollTimeout time.Duration
	// Logger receives the engine's structured logs (default: discarded).
	Logger *zerolog.Logger
	// NewRunID generates run ids (default: 128 random bits, hex).
	NewRunID func() string
	// Pricing prices the usage activities report, per model (default:
	// none: usage is counted, its cost is 0 and the model is listed as
	// unpriced).
	Pricing Pricing
	// LeaseDriftMargin is how long after an attempt's lease deadline the
	// engine still assumes it may act (default DefaultLeaseDriftMargin):
	// it covers the clock offset between the worker and the engine, and
	// bytes sent just before the deadline still reaching the downstream
	// system. A Reconcile lookup, or the next attempt after a "did not
	// happen", is dispatched only once it has passed. See docs/effects.md.
	LeaseDriftMargin time.Duration

	// splitScheduleCommits makes a schedule start its run and commit its
	// record in two transactions even without shards, as in a cluster
	// (tests).
	splitScheduleCommits bool
	// Retention is how long a closed run is kept when its start did not
	// say (api.StartWorkflowRequest.Retention): after it, the retention
	// sweep deletes its history, state and list entries (retention.go;
	// the effects ledger is kept). Zero: kept until deleted by hand.
	// `cairn server` defaults to 30 days (docs/retention.md).
	Retention time.Duration
	// RetentionSweepInterval, when positive, runs the retention sweep
	// (SweepRetention) in the background that often, on Clock. Zero: no
	// background sweep (an embedded engine calls SweepRetention itself;
	// `cairn server` sweeps every DefaultRetentionSweepInterval).
	RetentionSweepInterval time.Duration
}

// DefaultLeaseDriftMargin is Options.LeaseDriftMargin's default.
const DefaultLeaseDriftMargin = 5 * time.Second

// Validate checks the options.
func (o *Options) Validate() error {
	if o.Store == nil {
		return fmt.Errorf("%w: engine: Options.Store is required", api.ErrInvalidArgument)
	}
	if o.LeaseDriftMargin < 0 {
		return fmt.Errorf("%w: engine: LeaseDriftMargin must not be negative", api.ErrInvalidArgument)
	}
	if o.RetentionSweepInterval < 0 {
		return fmt.Errorf("%w: engine: RetentionSweepInterval must not be negative", api.ErrInvalidArgument)
	}
	if o.PollTimeout < 0 {
		return fmt.Errorf("%w: engine: PollTimeout must not be negative", api.ErrInvalidArgument)
	}
	return o.Limits.Validate()
}

func (o *Options) fillDefaults() {
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	o.Limits.FillDefaults()
	o.Defaults.FillDefaults()
	if o.PollTimeout == 0 {
		o.PollTimeout = 60 * time.Second
	}
	if o.Logger == nil {
		l := zerolog.Nop()
		o.Logger = &l
	}
	if o.NewRunID == nil {
		o.NewRunID = randomID
	}
	if o.LeaseDriftMargin == 0 {
		o.LeaseDriftMargin = DefaultLeaseDriftMargin
	}
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ErrClosed is returned (wrapping api.ErrUnavailable) after Close.
var ErrClosed = fmt.Errorf("%w: engine closed", api.ErrUnavailable)

const lockStripes = 4096

// retryDelay is how long a deadline whose transition failed waits before
// it is tried again.
const retryDelay = time.Second

// recentClosedRuns is how many closed runs' states Engine.recent keeps.
const recentClosedRuns = 4096

// Engine implements api.Service over a history.Store.
type Engine struct {
	opts  Options
	store history.Store
	clk   clock.Clock
	m     *machine.Machine
	log   zerolog.Logger

	stripes [lockStripes]sync.Mutex

	mu   sync.RWMutex
	open map[string]*runEntry // open run per workflow id
	// recent holds the state of the last closed run of recently closed
	// workflow ids (a closed run's state never changes again), so that
	// GetResult and Describe right after a run closes do not read it back
	// from the store.
	recent *lru.Cache[string, *machine.RunState]
	// chunks remembers payload chunks known to be stored (by hash).
	chunks *lru.Cache[string, struct{}]
	// streams holds the runs' live output (never written to history).
	streams *streamHub

	wftQ   *matching.Queues[wftItem]
	actQ   *matching.Queues[actItem]
	timers *timerq.Queue[timerKey]

	bootGen int64
	// limits are the activity limits and the slots held
	// (activity_limits.go); limitsMu serialises their changes.
	limits   *limiter
	limitsMu sync.Mutex
	// decls are the activity declarations of the task queues.
	decls declarations
	// bootPending: the boot generation could not be written at Open (a
	// full disk); the first commit that succeeds carries it (commit).
	bootPending atomic.Bool
	epochs      atomic.Int64
	seq         atomic.Int64

	queriesMu sync.Mutex
	queries   map[string]*pendingQuery
	pollers   pollers // who polled which queue lately (service_queues.go)

	closed atomic.Bool
	// running is set once Open has rebuilt the engine's memory.
	running atomic.Bool
	// The calls in flight (enter/leave). A plain WaitGroup cannot be used:
	// calls may start while Close waits.
	gateMu   sync.Mutex
	inflight int
	idle     chan struct{} // closed when inflight drops to 0 after Close
	bg       sync.WaitGroup
	stop     chan struct{}

	stats Stats
	// shards are the shards the engine serves (nil: every run); remote
	// reaches the runs other servers serve (SetRemote).
	shards  *shardSet
	remote  api.Service
	corrupt quarantine     // runs whose stored data is damaged (quarantine.go)
	chunkGC chunkCollector // payload chunks no run references (chunkgc.go)
	// lastChunkCollect is when a sweep last collected chunks (only the
	// sweep reads and writes it: SweepRetention runs one at a time).
	lastChunkCollect time.Time
	sweepMu          sync.Mutex // one retention sweep at a time
	watch            watch
	firing           atomic.Int64 // background transitions in progress (deadlines, parent-close policies)
	// firingCond is broadcast when firing drops to zero.
	firingMu   sync.Mutex
	firingCond *sync.Cond
	// scheds are the schedules the engine serves (schedules.go).
	scheds scheduleSet
}

// runEntry is an open run in memory. ref and parent never change; state is
// read and replaced only under the workflow id's stripe lock.
type runEntry struct {
	ref     history.RunRef
	parent  *machine.ParentRef
	state   *machine.RunState
	changed chan struct{} // closed and replaced after every transition
	tail    eventTail     // the end of the history, for dispatch
	// resync: a commit's outcome is unknown and the run could not be read
	// back yet (resync.go). Read and written under the run's lock.
	resync bool
}

type wftItem struct {
	ref   history.RunRef
	seq   int64
	query *pendingQuery
	// task, when set, was made by the transaction that scheduled it, while
	// that transaction was being made durable (see txn.handOff): the poller
	// returns it as is.
	task *api.WorkflowTask
}

type actItem struct {
	ref     history.RunRef
	schedID int64
	attempt int32
	recon   bool
	// activityType and key (its LimitKey) place it under the queue's
	// limits and fairness (activity_limits.go).
	activityType, key string
	// task, when set, was made by the transaction that scheduled the
	// attempt (a Read activity handed off while it synced; see
	// txn.handOff): the poller returns it as is.
	task *api.ActivityTask
}

// newActItem is the queue item of a's current attempt.
func newActItem(ref history.RunRef, schedID int64, a *machine.ActivityInfo) actItem {
	return actItem{ref: ref, schedID: schedID, attempt: a.Attempt, recon: a.Reconciling, activityType: a.ActivityType,
		key: a.Options.LimitKey}
}

type timerKey struct {
	ref history.RunRef
	d   machine.Deadline
}

// Open starts an engine over opts.Store, rebuilding queues and timers from
// the open runs it finds there.
func Open(opts Options) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fillDefaults()
	e := &Engine{
		opts:    opts,
		store:   opts.Store,
		clk:     opts.Clock,
		log:     *opts.Logger,
		open:    map[string]*runEntry{},
		wftQ:    matching.NewQueues[wftItem](),
		actQ:    matching.NewQueues[actItem](),
		queries: map[string]*pendingQuery{},
		stop:    make(chan struct{}),
		shards:  newShardSet(opts.Shards),
	}
	e.firingCond = sync.NewCond(&e.firingMu)
	e.scheds.firing = make(chan struct{}, maxFiring)
	e.recent, _ = lru.New[string, *machine.RunState](recentClosedRuns) // cannot fail: the size is positive
	e.chunks = newChunkCache()
	e.streams = newStreamHub()
	e.m = &machine.Machine{Limits: opts.Limits, Defaults: opts.Defaults, NewRunID: opts.NewRunID, Pricing: opts.Pricing,
		DriftMargin: opts.LeaseDriftMargin, Occurrence: e.readOccurrence}
	// A task handed off by a transaction (txn.handOff) that its poller
	// could not take is handed back through the run, as PollWorkflowTask and
	// PollActivityTask do, rather than queued again as it was built: the run
	// then gets a fresh dispatch, with its sticky fallback.
	e.wftQ.SetReclaim(func(it wftItem) bool {
		if it.task == nil {
			return false
		}
		go e.reclaim(func() { e.handBackWFT(it.task) })
		return true
	})
	e.actQ.SetReclaim(func(it actItem) bool {
		if it.task == nil {
			return false
		}
		go e.reclaim(func() { e.handBackActivity(it, it.task.LeaseEpoch) })
		return true
	})
	e.limits = newLimiter(e.clk)
	e.limits.kick = e.actQ.Kick
	e.actQ.SetGate(matching.Gate[actItem]{
		Key:     func(it actItem) (string, string) { return it.key, it.activityType },
		Admit:   e.limits.admit,
		Unadmit: func(_ string, it actItem) { e.limits.unadmit(it) },
	})
	e.timers = timerq.New(e.clk, e.onTimer)
	e.pollers.since = e.now()
	if err := e.recover(context.Background()); err != nil {
		return nil, err
	}
	if e.shards == nil { // with shards, Acquire loads each shard's schedules
		if err := e.loadSchedules(context.Background(), func(string) bool { return true }); err != nil {
			return nil, fmt.Errorf("engine: load schedules: %w", storeErr(err))
		}
	}
	e.running.Store(true)
	e.timers.Start()
	if opts.RetentionSweepInterval > 0 {
		e.bg.Add(1)
		go e.sweepLoop()
	}
	for _, c := range e.corrupt.list() {
		e.failParentLater(c) // children quarantined at Open, or before it
	}
	return e, nil
}

// Close stops the engine: pollers return empty, new calls fail with
// ErrClosed, and Close waits for calls in flight to finish their commits.
// It does not close the store. Close is idempotent.
func (e *Engine) Close() error {
	e.gateMu.Lock()
	if e.closed.Load() {
		e.gateMu.Unlock()
		return nil
	}
	e.closed.Store(true)
	idle := make(chan struct{})
	if e.inflight == 0 {
		close(idle)
	} else {
		e.idle = idle
	}
	e.gateMu.Unlock()
	close(e.stop)
	e.wftQ.Close()
	e.actQ.Close()
	e.timers.Stop()
	<-idle
	e.bg.Wait()
	return nil
}

// enter marks a call in flight; it fails after Close.
func (e *Engine) enter() error {
	e.gateMu.Lock()
	defer e.gateMu.Unlock()
	if e.closed.Load() {
		return ErrClosed
	}
	e.inflight++
	return nil
}

func (e *Engine) leave() {
	e.gateMu.Lock()
	e.inflight--
	if e.inflight == 0 && e.idle != nil {
		close(e.idle)
		e.idle = nil
	}
	e.gateMu.Unlock()
}

// nextEpoch returns a lease or task epoch unique across restarts.
func (e *Engine) nextEpoch() int64 { return e.bootGen<<32 | e.epochs.Add(1) }

func stripe(workflowID string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(workflowID))
	return int(h.Sum32() % lockStripes)
}

// lock takes the stripe locks of the given workflow ids in a fixed order,
// so that transitions spanning several runs never deadlock.
func (e *Engine) lock(ids ...string) func() {
	idx := make([]int, 0, len(ids))
	for _, id := range ids {
		idx = append(idx, stripe(id))
	}
	sort.Ints(idx)
	held := idx[:0]
	for i, s := range idx {
		if i > 0 && s == idx[i-1] {
			continue
		}
		e.stripes[s].Lock()
		held = append(held, s)
	}
	return func() {
		for i := len(held) - 1; i >= 0; i-- {
			e.stripes[held[i]].Unlock()
		}
	}
}

// reclaim runs a hand-back unless the engine is closing.
func (e *Engine) reclaim(handBack func()) {
	if e.enter() != nil {
		return
	}
	defer e.leave()
	handBack()
}

// openRun returns the open run of a workflow id (nil if none). Call with
// the workflow id's lock held.
func (e *Engine) openRun(workflowID string) *runEntry {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.open[workflowID]
}

// parentOf returns the immutable parent of the open run of workflowID.
func (e *Engine) parentOf(workflowID string) *machine.ParentRef {
	if r := e.openRun(workflowID); r != nil {
		return r.parent
	}
	return nil
}

// loadState returns a run's state: from memory when it is open, else from
// the store. Call with the workflow id's lock held. runID "" means the
// current run.
func (e *Engine) loadState(ctx context.Context, workflowID, runID string) (*machine.RunState, *runEntry, error) {
	if err := e.shards.check(workflowID); err != nil {
		return nil, nil, err
	}
	if c := e.corrupt.lookup(workflowID, runID); c != nil {
		return nil, nil, c.err()
	}
	if r := e.openRun(workflowID); r != nil && (runID == "" || runID == r.ref.RunID) {
		return r.state, r, nil
	} else if r == nil {
		if st, ok := e.recent.Get(workflowID); ok && (runID == "" || runID == st.RunID) {
			return st, nil, nil
		}
	}
	return e.storedState(ctx, workflowID, runID)
}

// storedState reads a run's state from the store (the current run's when
// runID is empty), whichever server serves it: a committed state, with
// the events it counts.
func (e *Engine) storedState(ctx context.Context, workflowID, runID string) (*machine.RunState, *runEntry, error) {
	if runID == "" {
		cur, err := e.store.Get(ctx, history.SpaceCurrentRun, curKey(workflowID))
		if errors.Is(err, history.ErrNotFound) {
			return nil, nil, api.Errorf(api.ErrNotFound, "workflow %q", workflowID)
		}
		if err != nil {
			return nil, nil, damaged(history.RunRef{WorkflowID: workflowID}, true, storeErr(err))
		}
		runID = string(cur)
		if c := e.corrupt.lookup(workflowID, runID); c != nil {
			return nil, nil, c.err()
		}
	}
	ref := history.RunRef{WorkflowID: workflowID, RunID: runID}
	data, err := e.store.Get(ctx, history.SpaceRunState, stateKey(ref))
	if errors.Is(err, history.ErrNotFound) {
		return nil, nil, api.Errorf(api.ErrNotFound, "workflow %q run %q", workflowID, runID)
	}
	if err == nil {
		var st *machine.RunState
		if st, err = decodeState(data); err == nil {
			return st, nil, nil
		}
	}
	return nil, nil, damaged(ref, runID == "" || e.isCurrentRun(ctx, ref), storeErr(err))
}

// isCurrentRun reports whether the store names ref as its workflow id's
// current run (true when that cannot be read: the safe answer for a run
// about to be quarantined).
func (e *Engine) isCurrentRun(ctx context.Context, ref history.RunRef) bool {
	cur, err := e.store.Get(ctx, history.SpaceCurrentRun, curKey(ref.WorkflowID))
	return err != nil || string(cur) == ref.RunID
}

// storeErr maps a store failure onto the api's errors.
func storeErr(err error) error {
	switch {
	case errors.Is(err, api.ErrNotOwner):
		return err
	case errors.Is(err, history.ErrClosed):
		return fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, history.ErrTooLarge):
		return fmt.Errorf("%w: %w", api.ErrLimitExceeded, err)
	case errors.Is(err, history.ErrNoSpace):
		return fmt.Errorf("%w: disk full: %w", api.ErrResourceExhausted, err)
	}
	return fmt.Errorf("%w: %w", api.ErrInternal, err)
}

func (e *Engine) now() time.Time { return e.clk.Now().UTC() }
