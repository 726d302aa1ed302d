// Package worker runs workflows and activities as a long-lived process: it
// long-polls task queues, executes workflow tasks on the SDK's deterministic
// runtime with a sticky cache, runs activities under leases with automatic
// heartbeats, and shuts down gracefully.
//
//	c := client.NewLocal(eng, client.Options{}) // or client.Dial(...)
//	w, _ := worker.New(c, worker.Options{TaskQueue: "agents"})
//	w.RegisterWorkflow(PayInvoice)
//	w.RegisterActivity(SendPayment, activities.Options{Effect: activities.SideEffect, Reconcile: LookupPayment})
//	err := w.Run(ctx) // until ctx ends (or SIGINT/SIGTERM with StopOnSignals)
package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/oklog/run"
	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/clock"
	"github.com/cairnflow/cairn/internal/runpool"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// ErrInvalidOptions is wrapped by Options.Validate's errors.
var ErrInvalidOptions = errors.New("worker: invalid options")

// Options configure a Worker. TaskQueue is required; every other zero
// value takes the default in its comment.
type Options struct {
	// TaskQueue is the queue the worker polls for workflow and activity tasks.
	TaskQueue string
	// MaxConcurrentActivities bounds activities running at once (default
	// 256: agents' activities mostly wait on models and tools).
	MaxConcurrentActivities int
	// MaxConcurrentWorkflowTasks bounds workflow tasks running at once
	// (default 64; at least 2 with the sticky cache on). A workflow task
	// is short but waits for the engine's durable commit, so concurrency,
	// not CPU, sets the throughput: the engine groups the commits of
	// concurrent tasks under one fsync.
	MaxConcurrentWorkflowTasks int
	// WorkflowPollers is the number of long polls kept open on each
	// workflow task queue — the task queue and, with the sticky cache, the
	// worker's sticky queue (default 4). A poller holds an execution slot
	// while it polls, so it is capped at MaxConcurrentWorkflowTasks divided
	// by the number of queues.
	WorkflowPollers int
	// ActivityPollers is the number of long polls kept open for activity
	// tasks (default 4, at most MaxConcurrentActivities).
	ActivityPollers int
	// StickyCacheSize bounds how many runs stay cached between tasks (LRU;
	// default 1,000). A cached run gets its next task with only the new
	// events instead of being replayed from the start.
	StickyCacheSize int
	// DisableSticky turns the sticky cache off (every task replays).
	DisableSticky bool
	// Identity names the worker in history (default "host:pid").
	Identity string
	// Converter encodes and decodes payloads (default: the client's).
	Converter sdk.Converter
	// Logger receives structured logs (default: warnings and errors, as
	// JSON lines on standard error — a worker that cannot report what it
	// did must be heard).
	Logger *zerolog.Logger
	// GracefulStop bounds how long in-flight tasks may run after the worker
	// is asked to stop (default 10 s). Activities still running then are
	// canceled (their contexts end); Run waits one more second for them to
	// return and report, then returns, leaving any that ignore cancellation
	// to their leases (their heartbeats stop).
	GracefulStop time.Duration
	// HeartbeatInterval is the most often heartbeats are sent (default 1 s;
	// automatic heartbeats go out at a third of the lease).
	HeartbeatInterval time.Duration
	// DeadlockTimeout bounds how long workflow code may run without reaching
	// an SDK call (default sdk.DefaultDeadlockTimeout).
	DeadlockTimeout time.Duration
	// StopOnSignals makes Run also stop on SIGINT and SIGTERM.
	StopOnSignals bool
	// ChunkCacheBytes bounds the payload chunks (transcripts, large
	// payloads) the worker keeps in memory (default 64 MiB).
	ChunkCacheBytes int
	// Clock is the time source of leases, heartbeats and retries (default:
	// the real clock). Tests that drive the engine with a fake clock give
	// the worker the same one: a lease is an absolute time of the engine's
	// clock.
	Clock clock.Clock
}

// Validate reports options that cannot work.
func (o *Options) Validate() error {
	if o.TaskQueue == "" {
		return fmt.Errorf("%w: TaskQueue is required", ErrInvalidOptions)
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"MaxConcurrentActivities", o.MaxConcurrentActivities}, {"MaxConcurrentWorkflowTasks", o.MaxConcurrentWorkflowTasks},
		{"WorkflowPollers", o.WorkflowPollers}, {"ActivityPollers", o.ActivityPollers}, {"StickyCacheSize", o.StickyCacheSize},
		{"ChunkCacheBytes", o.ChunkCacheBytes}} {
		if v.n < 0 {
			return fmt.Errorf("%w: %s must not be negative", ErrInvalidOptions, v.name)
		}
	}
	if o.GracefulStop < 0 || o.HeartbeatInterval < 0 || o.DeadlockTimeout < 0 {
		return fmt.Errorf("%w: durations must not be negative", ErrInvalidOptions)
	}
	return nil
}

func (o *Options) fillDefaults(c client.Client) {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&o.MaxConcurrentActivities, 256)
	def(&o.MaxConcurrentWorkflowTasks, 64)
	def(&o.WorkflowPollers, 4)
	def(&o.ActivityPollers, 4)
	def(&o.StickyCacheSize, 1000)
	// A poller holds an execution slot while it long-polls, so that a task
	// it receives can run at once. More pollers than slots would let the
	// task queue's pollers hold every slot while tasks wait on the sticky
	// queue: keep a slot for every poller.
	queues := 1
	if !o.DisableSticky {
		queues = 2
	}
	o.MaxConcurrentWorkflowTasks = max(o.MaxConcurrentWorkflowTasks, queues)
	o.WorkflowPollers = min(o.WorkflowPollers, o.MaxConcurrentWorkflowTasks/queues)
	o.ActivityPollers = min(o.ActivityPollers, o.MaxConcurrentActivities)
	if o.Identity == "" {
		host, _ := os.Hostname()
		o.Identity = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if o.Converter == nil {
		o.Converter = c.Converter()
	}
	if o.Logger == nil {
		l := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
		o.Logger = &l
	}
	if o.GracefulStop == 0 {
		o.GracefulStop = 10 * time.Second
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = time.Second
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
}

// Worker polls one task queue and runs what it finds.
type Worker struct {
	opts        Options
	svc         api.Service
	reg         *sdk.Registry
	reconcilers *sdk.Registry // Reconcile lookups, registered under their activity's name
	log         zerolog.Logger
	sticky      string
	cache       *lru.Cache[string, *cached]
	// chunks resolves payloads recorded by reference (transcripts, large
	// results), shared by workflow and activity tasks.
	chunks *client.ChunkCache

	wfSlots  chan struct{}
	actSlots chan struct{}
	tasks    *runpool.Pool // runs workflow tasks and activities
	// Heartbeat loops: counted so that Run returns only once they are
	// over; none starts after Run is done.
	heartbeatMu  sync.Mutex
	heartbeatEnd bool
	heartbeaters sync.WaitGroup
	running      atomic.Bool
	stats        Stats
	trouble      pollTrouble // failed polls: logged once, then summed up
	clk          clock.Clock
	// reportCtx ends once Run is over: an outcome report still
	// undelivered then is abandoned (deliver).
	reportCtx   context.Context
	stopReports context.CancelFunc
	// declarations are the registered activities as each poll declares
	// them to the engine (set by Run).
	declarations []api.ActivityDeclaration
}

// declare lists the registered activities with their class, business key
// and Reconcile lookup: the engine applies them where workflows schedule
// and dispatch these activities, so that the workers running workflows
// need not repeat them.
func (w *Worker) declare() []api.ActivityDeclaration {
	var ds []api.ActivityDeclaration
	for _, name := range w.reg.ActivityTypes() {
		def, _ := w.reg.Activity(name)
		_, hasKey, _ := def.BusinessKey(nil)
		ds = append(ds, api.ActivityDeclaration{ActivityType: name, Effect: def.Effect(), BusinessKey: hasKey, Reconcile: def.HasReconcile()})
	}
	return ds
}

// Stats counts what a worker did.
type Stats struct {
	// WorkflowTasks and ActivityTasks count the tasks taken (queries
	// excluded).
	WorkflowTasks atomic.Int64
	ActivityTasks atomic.Int64
	// FullReplays counts workflow tasks that built a run's state from its
	// whole history: a run's first task, and any task the sticky cache
	// could not continue (evicted, another worker's, a restart).
	FullReplays atomic.Int64
	// CacheHits counts workflow tasks served by a cached run with only the
	// new events.
	CacheHits atomic.Int64
	// WorkflowTaskFails counts workflow tasks that failed (panic,
	// nondeterminism, deadlock, unknown type).
	WorkflowTaskFails atomic.Int64
	// PollFailures counts polls that failed (the server unreachable,
	// restarting, refusing): each is retried after a backoff, and logged
	// as a streak (see UnreachableSummaryEvery), not one line each.
	PollFailures atomic.Int64
	// ActivityPending counts activity attempts that returned
	// activities.ErrResultPending: their outcome is reported by whoever
	// holds the task token.
	ActivityPending atomic.Int64
}

// cached is a run's Execution in the sticky cache; mu serialises its tasks.
type cached struct {
	mu   sync.Mutex
	exec *sdk.Execution
	gone bool // evicted: close whatever a task still running on it builds
}

// New returns a worker for c's service.
func New(c client.Client, opts Options) (*Worker, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: nil client", ErrInvalidOptions)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fillDefaults(c)
	w := &Worker{
		opts: opts, svc: c.Service(), reg: sdk.NewRegistry(), reconcilers: sdk.NewRegistry(),
		log:      opts.Logger.With().Str("task_queue", opts.TaskQueue).Str("worker", opts.Identity).Logger(),
		wfSlots:  make(chan struct{}, opts.MaxConcurrentWorkflowTasks),
		tasks:    runpool.New(opts.MaxConcurrentWorkflowTasks + opts.ActivityPollers),
		actSlots: make(chan struct{}, opts.MaxConcurrentActivities),
		clk:      opts.Clock,
	}
	w.chunks = client.NewChunkCache(w.svc, opts.ChunkCacheBytes)
	w.reportCtx, w.stopReports = context.WithCancel(context.Background())
	if !opts.DisableSticky {
		w.sticky = fmt.Sprintf("%s/sticky/%s/%d", opts.TaskQueue, opts.Identity, time.Now().UnixNano())
		cache, err := lru.NewWithEvict(opts.StickyCacheSize, evicted)
		if err != nil {
			return nil, fmt.Errorf("%w: sticky cache: %w", ErrInvalidOptions, err)
		}
		w.cache = cache
	}
	return w, nil
}

// Registry returns the worker's registry (shared with a Replayer in tests).
func (w *Worker) Registry() *sdk.Registry { return w.reg }

// Stats returns the worker's counters.
func (w *Worker) Stats() *Stats { return &w.stats }

// RegisterWorkflow registers a workflow function, named after the function
// unless opts names it.
func (w *Worker) RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error {
	var o sdk.RegisterOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return w.reg.RegisterWorkflow(fn, o)
}

// RegisterActivity registers an activity with its declared effect class,
// business key and Reconcile lookup.
func (w *Worker) RegisterActivity(fn any, opts ...activities.Options) error {
	var o activities.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if err := w.reg.RegisterActivity(fn, sdk.RegisterActivityOptions{Name: o.Name, Effect: o.Effect,
		BusinessKey: o.BusinessKey, HasReconcile: o.Reconcile != nil, Metered: o.Metered}); err != nil {
		return err
	}
	if o.Reconcile == nil {
		return nil
	}
	name := o.Name
	if name == "" {
		name = sdk.TypeName(fn)
	}
	if reflect.TypeOf(o.Reconcile) != reflect.TypeOf(fn) {
		return fmt.Errorf("%w: activity %s: Reconcile has type %T; it must have the activity's own signature %T",
			sdk.ErrInvalidRegistration, name, o.Reconcile, fn)
	}
	return w.reconcilers.RegisterActivity(o.Reconcile, sdk.RegisterActivityOptions{Name: name})
}

// Run polls and executes tasks until ctx ends (or, with StopOnSignals,
// SIGINT or SIGTERM arrives), then stops polling, lets in-flight tasks
// finish within GracefulStop and returns. The actors — workflow pollers,
// activity pollers, the stop trigger — are grouped with oklog/run: when one
// returns, all are interrupted.
func (w *Worker) Run(ctx context.Context) error {
	if !w.running.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: Run called twice", ErrInvalidOptions)
	}
	w.declarations = w.declare()
	pollCtx, stopPolling := context.WithCancel(context.Background())
	defer stopPolling()
	// Activities keep running during the grace period; then they are canceled.
	actCtx, cancelActivities := context.WithCancelCause(context.Background())
	defer cancelActivities(nil)
	defer w.stopReports()
	var inflight sync.WaitGroup

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	var g run.Group
	g.Add(func() error {
		<-runCtx.Done()
		return nil
	}, func(error) { stopRun() })
	if w.opts.StopOnSignals {
		g.Add(run.SignalHandler(runCtx, os.Interrupt, syscall.SIGTERM))
	}
	queues := []string{w.opts.TaskQueue}
	if w.sticky != "" {
		queues = append(queues, w.sticky)
	}
	for _, q := range queues {
		for i := 0; i < w.opts.WorkflowPollers; i++ {
			q := q
			g.Add(func() error { w.pollWorkflowTasks(pollCtx, q, &inflight); return nil }, func(error) { stopPolling() })
		}
	}
	for i := 0; i < w.opts.ActivityPollers; i++ {
		g.Add(func() error { w.pollActivityTasks(pollCtx, actCtx, &inflight); return nil }, func(error) { stopPolling() })
	}
	w.log.Info().Str("sticky_queue", w.sticky).Msg("worker started")
	err := g.Run()
	if errors.Is(err, run.ErrSignal) {
		w.log.Info().Str("reason", err.Error()).Msg("stopping on signal")
		err = nil
	}
	w.drain(&inflight, cancelActivities)
	if w.cache != nil {
		w.cache.Purge()
	}
	w.log.Info().Msg("worker stopped")
	return err
}

// cancelGrace is how long Run still waits, after the grace period, for
// the activities it canceled to return and report.
const cancelGrace = time.Second

// drain waits for in-flight tasks up to the grace period, then cancels the
// activities still running and waits up to cancelGrace for them to return.
// Activities that ignore cancellation are abandoned: their heartbeats stop,
// and their leases hand them to another worker.
func (w *Worker) drain(inflight *sync.WaitGroup, cancelActivities context.CancelCauseFunc) {
	defer w.endHeartbeats()
	done := make(chan struct{})
	go func() {
		inflight.Wait()
		close(done)
	}()
	t := time.NewTimer(w.opts.GracefulStop)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	w.log.Warn().Msg("grace period over: canceling running activities; their leases hand them back")
	cancelActivities(errWorkerStopping)
	t.Reset(cancelGrace)
	select {
	case <-done:
	case <-t.C:
		w.log.Warn().Msg("activities ignore cancellation: abandoned to their leases")
	}
}

// trackHeartbeater counts a heartbeat loop about to start; false once Run
// is done.
func (w *Worker) trackHeartbeater() bool {
	w.heartbeatMu.Lock()
	defer w.heartbeatMu.Unlock()
	if w.heartbeatEnd {
		return false
	}
	w.heartbeaters.Add(1)
	return true
}

// endHeartbeats lets no heartbeat loop start any more and waits for those
// running (they stop with their attempt, or with the canceled activities'
// context): once Run returns, no abandoned attempt's lease is extended.
func (w *Worker) endHeartbeats() {
	w.heartbeatMu.Lock()
	w.heartbeatEnd = true
	w.heartbeatMu.Unlock()
	w.heartbeaters.Wait()
}

// backoff waits before the next poll after a failure, growing to 5 s, or
// returns false when ctx ends.
func backoff(ctx context.Context, failures int) bool {
	d := min(time.Duration(1<<min(failures, 6))*50*time.Millisecond, 5*time.Second)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// Registrar is what a worker binary's register function receives: the live
// Worker (workercli's `run`) or a Replayer (`replay`).
type Registrar interface {
	RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error
	RegisterActivity(fn any, opts ...activities.Options) error
}
