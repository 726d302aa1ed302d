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
// It is the one package under sdk that embeds the engine; import it from
// tests only (a worker binary never links Badger).
package testenv

import (
	"context"
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
	// Engine tweaks the engine's options (Store and Clock are set for you).
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
	Worker *worker.Worker
	store  *badgerstore.Store
	cancel context.CancelFunc
	done   chan struct{}
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
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatalf("testenv: open store: %v", err)
	}
	env.store = st
	eo := opts.Engine
	eo.Store, eo.Clock = st, env.Clock
	eng, err := engine.Open(eo)
	if err != nil {
		_ = st.Close()
		t.Fatalf("testenv: open engine: %v", err)
	}
	env.Engine = eng
	env.Client = client.NewLocal(eng, client.Options{})
	wo := opts.Worker
	wo.TaskQueue = opts.TaskQueue
	if wo.GracefulStop == 0 {
		wo.GracefulStop = 5 * time.Second
	}
	w, err := worker.New(env.Client, wo)
	if err != nil {
		t.Fatalf("testenv: worker: %v", err)
	}
	env.Worker = w
	t.Cleanup(env.stop)
	return env
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

// Start runs the worker (and the time skipper) in the background.
func (e *Env) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	e.done = make(chan struct{})
	go func() {
		defer close(e.done)
		if err := e.Worker.Run(ctx); err != nil {
			e.t.Errorf("testenv: worker: %v", err)
		}
	}()
	if !e.opts.NoTimeSkipping {
		go e.skipTime(ctx)
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
	if e.cancel != nil {
		e.cancel()
		<-e.done
	}
	_ = e.Engine.Close()
	_ = e.store.Close()
}
