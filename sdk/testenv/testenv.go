// Package testenv runs workflows in tests: an in-memory engine, a worker
// and a fake clock that skips ahead whenever every run waits on time, so a
// workflow that sleeps a day tests in milliseconds.
//
//	env := testenv.New(t, testenv.Options{})
//	env.RegisterWorkflow(PayInvoice)
//	env.RegisterActivity(SendPayment, activities.Options{Effect: activities.SideEffect})
//	env.Start()
//	var r Receipt
//	err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: "inv-1"}, PayInvoice, inv, &r)
//
// The clock skips only while the engine is quiescent: every open run
// waits on time (a timer, a retry backoff) and no task is queued or
// running. With NoTimeSkipping the clock stands still and the test moves it
// (env.Clock.Advance, then env.Engine.Settle to wait for what fell due).
//
// Several workers can share an env: NewWorker and RunWorker add one (new
// code, a second process), StopWorker stops the env's own worker as a
// process exit would, so that another takes over its runs:
//
//	env.StopWorker()
//	w2 := env.NewWorker(worker.Options{Identity: "second"})
//	w2.RegisterWorkflow(PayInvoice)
//	env.RunWorker(w2)
//
// The engine runs on an in-memory Badger store. To run it on another store
// (the suites run on PostgreSQL too), give one as Options.Engine.Store, and
// with it Options.Engine.Shards when the engine must serve its shards under
// leases (a shared Postgres store): New then acquires every shard the
// Shards hold a lease for. The env does not close a store it was given.
//
// It is the one package under sdk that embeds the engine; import it from
// tests only (a worker binary never links Badger).
package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/clock"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// DefaultTaskQueue is the queue used when Options.TaskQueue is empty.
const DefaultTaskQueue = "test"

// Options configure an Env.
type Options struct {
	// TaskQueue defaults to DefaultTaskQueue.
	TaskQueue string
	// Start is the fake clock's start (default 2026-01-01T00:00:00Z).
	Start time.Time
	// Worker tweaks the worker's options (TaskQueue is set for you).
	Worker worker.Options
	// Engine tweaks the engine's options. Clock is set for you. Store
	// defaults to an in-memory Badger store the env opens and closes; a
	// Store given is used as it is and left open (the caller closes it,
	// after the test's cleanup stopped the env). With Shards (a store
	// shared under leases, such as Postgres), New acquires every shard
	// Shards holds a lease for (engine.Engine.Acquire) before it returns.
	Engine engine.Options
	// NoTimeSkipping keeps the clock still unless the test moves it.
	NoTimeSkipping bool
}

// Env is a self-contained Cairn for one test.
type Env struct {
	t      testing.TB
	opts   Options
	Clock  *clock.Fake
	Engine *engine.Engine
	Client client.Client
	// Worker is the env's own worker, run by Start and stopped by
	// StopWorker or the test's cleanup.
	Worker *worker.Worker
	store  *badgerstore.Store // the env's own store (nil when given one)

	mu         sync.Mutex
	stopWorker func() // stops Worker (nil before Start)
	stopSkip   func() // stops the time skipper
	extra      []func()
}

// New builds the environment; register workflows and activities, then
// Start it. Everything is torn down by t.Cleanup.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.TaskQueue == "" {
		opts.TaskQueue = DefaultTaskQueue
	}
	if opts.Start.IsZero() {
		opts.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	env := &Env{t: t, opts: opts, Clock: clock.NewFake(opts.Start)}
	eo := opts.Engine
	if eo.Store == nil {
		st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
		if err != nil {
			t.Fatalf("testenv: open store: %v", err)
		}
		env.store, eo.Store = st, st
	}
	eo.Clock = env.Clock
	eng, err := engine.Open(eo)
	if err != nil {
		env.closeStore()
		t.Fatalf("testenv: open engine: %v", err)
	}
	if eo.Shards != nil {
		if err := eng.Acquire(context.Background(), heldShards(eo.Shards)); err != nil {
			_ = eng.Close()
			env.closeStore()
			t.Fatalf("testenv: acquire the shards: %v", err)
		}
	}
	env.Engine = eng
	env.Client = client.NewLocal(eng, client.Options{})
	t.Cleanup(env.stop)
	env.Worker = env.NewWorker(opts.Worker)
	return env
}

// heldShards lists the shards s holds a lease for.
func heldShards(s engine.Shards) []int {
	var held []int
	for sh := range s.Count() {
		if _, ok := s.Lease(sh); ok {
			held = append(held, sh)
		}
	}
	return held
}

// closeStore closes the env's own store, if it opened one.
func (e *Env) closeStore() {
	if e.store != nil {
		_ = e.store.Close()
	}
}

// NewWorker returns another worker on the env's engine, with opts
// (TaskQueue defaults to the env's, GracefulStop to 5 s, Clock to the
// env's fake clock). Register on it
// and run it with RunWorker: several workers on one env model a fleet, a
// restart, or a deploy of new code.
func (e *Env) NewWorker(opts worker.Options) *worker.Worker {
	e.t.Helper()
	if opts.TaskQueue == "" {
		opts.TaskQueue = e.opts.TaskQueue
	}
	if opts.GracefulStop == 0 {
		opts.GracefulStop = 5 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = e.Clock // leases are times of the engine's clock
	}
	w, err := worker.New(e.Client, opts)
	if err != nil {
		e.t.Fatalf("testenv: worker: %v", err)
	}
	return w
}

// RunWorker runs w in the background until the returned stop is called
// (or the test ends). stop cancels Run's context, waits for Run to return
// and reports its error; it is idempotent.
func (e *Env) RunWorker(w *worker.Worker) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			e.t.Errorf("testenv: worker: %v", err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	e.mu.Lock()
	e.extra = append(e.extra, stop)
	e.mu.Unlock()
	return stop
}

// RegisterWorkflow registers a workflow on the env's worker, failing the
// test on a bad registration.
func (e *Env) RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) {
	e.t.Helper()
	if err := e.Worker.RegisterWorkflow(fn, opts...); err != nil {
		e.t.Fatalf("testenv: %v", err)
	}
}

// RegisterActivity registers an activity on the env's worker, failing the
// test on a bad registration.
func (e *Env) RegisterActivity(fn any, opts ...activities.Options) {
	e.t.Helper()
	if err := e.Worker.RegisterActivity(fn, opts...); err != nil {
		e.t.Fatalf("testenv: %v", err)
	}
}

// TaskQueue returns the env's task queue.
func (e *Env) TaskQueue() string { return e.opts.TaskQueue }

// Start runs the env's worker (and the time skipper) in the background.
func (e *Env) Start() {
	stopWorker := e.RunWorker(e.Worker)
	stopSkip := func() {}
	if !e.opts.NoTimeSkipping {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.skipTime(ctx)
		}()
		var once sync.Once
		stopSkip = func() {
			once.Do(func() {
				cancel()
				<-done
			})
		}
	}
	e.mu.Lock()
	e.stopWorker, e.stopSkip = stopWorker, stopSkip
	e.mu.Unlock()
}

// StopWorker stops the env's worker as a process exit would (Run's
// context canceled: polls stop, in-flight tasks finish within the grace
// period) and waits for Run to return. The engine, the client and the
// time skipper keep running, so another worker (NewWorker, RunWorker) can
// take over the runs. It is a no-op before Start or after a first call.
//
// A run the stopped worker had cached gets its next workflow task on that
// worker's sticky queue, where it waits for the engine's sticky timeout
// (engine.Defaults.StickyTimeout, 2 s by default) before it falls back to
// the task queue. The time skipper does not skip that wait (a queued task
// is work): advance env.Clock past it.
func (e *Env) StopWorker() {
	e.mu.Lock()
	stop := e.stopWorker
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// ExecuteWorkflow starts a workflow on the env's task queue and waits for
// its result.
func (e *Env) ExecuteWorkflow(ctx context.Context, opts client.StartOptions, workflow any, input any, valuePtr any) error {
	if opts.TaskQueue == "" {
		opts.TaskQueue = e.opts.TaskQueue
	}
	_, err := e.Client.ExecuteWorkflow(ctx, opts, workflow, input, valuePtr)
	return err
}

// skipTime advances the fake clock to the next deadline whenever the
// engine is quiescent: every open run waits on time and nothing else runs.
func (e *Env) skipTime(ctx context.Context) {
	for {
		changed := e.Engine.Changed()
		e.Engine.Settle()
		if e.Engine.Quiescent() {
			if at, ok := e.Clock.NextDeadline(); ok {
				e.Engine.Unwatch()
				e.Clock.Set(maxTime(at, e.Clock.Now()))
				continue
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
		}
		e.Engine.Unwatch()
		if ctx.Err() != nil {
			return
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func (e *Env) stop() {
	e.mu.Lock()
	stops := append([]func(){}, e.extra...)
	stopSkip := e.stopSkip
	e.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	if stopSkip != nil {
		stopSkip()
	}
	_ = e.Engine.Close()
	e.closeStore()
}
