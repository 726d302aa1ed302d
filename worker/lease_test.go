package worker_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// The worker's side of leases, deterministically: the engine and the
// worker share testenv's fake clock (a lease is a time of the engine's
// clock), and a service wrapper between them plays the network.

// ChargeLeased schedules the "Charge" activity with a 10 s heartbeat lease.
func ChargeLeased(ctx sdk.Context, amount int) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3}})
	return sdk.ExecuteActivityByName[string](ctx, "Charge", amount).Get(ctx)
}

// net is the service as the worker reaches it: hooks run around the calls.
type net struct {
	api.Service
	mu sync.Mutex
	// afterPoll runs when a poll returns a task, before the worker gets it.
	afterPoll func(*api.ActivityTask)
	// heartbeat, when set, answers heartbeats instead of the engine.
	heartbeat func(*api.HeartbeatRequest) (*api.HeartbeatResponse, error)
	// report, when set, runs in place of delivering a report; next
	// delivers it.
	report func(method string, next func() error) error
	calls  []string
}

func (n *net) hooks() (func(*api.ActivityTask), func(*api.HeartbeatRequest) (*api.HeartbeatResponse, error), func(string, func() error) error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.afterPoll, n.heartbeat, n.report
}

func (n *net) note(call string) {
	n.mu.Lock()
	n.calls = append(n.calls, call)
	n.mu.Unlock()
}

func (n *net) PollActivityTask(ctx context.Context, req *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	resp, err := n.Service.PollActivityTask(ctx, req)
	if after, _, _ := n.hooks(); err == nil && resp.Task != nil && after != nil {
		after(resp.Task)
	}
	return resp, err
}

func (n *net) RecordActivityHeartbeat(ctx context.Context, req *api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	if _, hb, _ := n.hooks(); hb != nil {
		return hb(req)
	}
	return n.Service.RecordActivityHeartbeat(ctx, req)
}

func (n *net) deliver(method string, call func() error) error {
	n.note(method)
	if _, _, rep := n.hooks(); rep != nil {
		return rep(method, call)
	}
	return call()
}

func (n *net) CompleteActivity(ctx context.Context, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	var resp *api.CompleteActivityResponse
	err := n.deliver("CompleteActivity", func() (err error) {
		resp, err = n.Service.CompleteActivity(ctx, req)
		return err
	})
	return resp, err
}

func (n *net) FailActivity(ctx context.Context, req *api.FailActivityRequest) (*api.FailActivityResponse, error) {
	var resp *api.FailActivityResponse
	name := "FailActivity"
	if req.NotStarted {
		name = "GiveBack"
	}
	err := n.deliver(name, func() (err error) {
		resp, err = n.Service.FailActivity(ctx, req)
		return err
	})
	return resp, err
}

// leaseEnv is a testenv whose clock stands still, with a worker that
// reaches the engine through a net.
type leaseEnv struct {
	*testenv.Env
	net *net
	w   *worker.Worker
}

func newLeaseEnv(t *testing.T, register func(w *worker.Worker)) *leaseEnv {
	t.Helper()
	env := newEnv(t, testenv.Options{NoTimeSkipping: true})
	n := &net{Service: env.Engine}
	w, err := worker.New(client.NewLocal(n, client.Options{}), worker.Options{TaskQueue: env.TaskQueue(), Clock: env.Clock,
		Identity: "leased"})
	must(t, err)
	must(t, w.RegisterWorkflow(ChargeLeased))
	register(w)
	env.RunWorker(w)
	return &leaseEnv{Env: env, net: n, w: w}
}

// Point 1: a task whose lease ended while it sat in the poll response (a
// frozen worker) is given back unstarted, never run. Meanwhile the engine
// saw the lease end and paused the run; the give-back proves the attempt
// did nothing, so the pause resolves itself, and the next attempt runs —
// once, and only after the drift margin.
func TestTaskWhoseLeaseEndedInThePollIsGivenBack(t *testing.T) {
	ctx := testCtx(t)
	var charged atomic.Int32
	e := newLeaseEnv(t, func(w *worker.Worker) {
		must(t, w.RegisterActivity(func(context.Context, int) (string, error) {
			charged.Add(1)
			return "charged", nil
		}, activities.Options{Name: "Charge", Effect: activities.SideEffect}))
	})
	var once sync.Once
	e.net.afterPoll = func(task *api.ActivityTask) {
		once.Do(func() {
			// The process "freezes" with the response in hand: the clock
			// moves past the lease before the worker looks at it.
			e.Clock.Advance(11 * time.Second)
			e.Engine.Settle()
		})
	}
	gaveBack := make(chan struct{})
	e.net.report = func(method string, next func() error) error {
		err := next()
		if method == "GiveBack" {
			close(gaveBack)
		}
		return err
	}
	run := start(t, ctx, e.Client, e.TaskQueue(), "frozen-in-poll", ChargeLeased, 42)
	wait(t, ctx, gaveBack, "the give-back")
	e.Engine.Settle()
	if n := charged.Load(); n != 0 {
		t.Fatalf("the expired task ran (%d times)", n)
	}
	e.Clock.Advance(engine.DefaultLeaseDriftMargin)
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "charged" {
		t.Fatalf("result %q, %v", got, err)
	}
	evs, err := e.Client.GetHistory(ctx, "frozen-in-poll", "")
	must(t, err)
	var resolved *history.ActivityResolved
	for _, ev := range evs {
		if r, ok := ev.Attrs.(*history.ActivityResolved); ok {
			resolved = r
		}
	}
	if charged.Load() != 1 || count(evs, history.TypeActivityCompleted) != 1 || resolved == nil ||
		resolved.Resolution != history.ResolvedNotHappened || resolved.By != "leased" {
		t.Fatalf("want the pause resolved by the give-back and one charge (%d):\n%v", charged.Load(), evs)
	}
}

// Point 1: a heartbeating activity whose lease end passes without a
// renewal (the server unreachable) has its context canceled, with cause
// activities.ErrLeaseLost, exactly then — not earlier, and not only
// once the server answers again.
func TestUnconfirmedLeaseCancelsTheActivity(t *testing.T) {
	ctx := testCtx(t)
	started, stopped := make(chan struct{}), make(chan error, 1)
	e := newLeaseEnv(t, func(w *worker.Worker) {
		must(t, w.RegisterActivity(func(ctx context.Context, _ int) (string, error) {
			close(started)
			<-ctx.Done()
			stopped <- context.Cause(ctx)
			return "", ctx.Err()
		}, activities.Options{Name: "Charge", Effect: activities.SideEffect}))
	})
	e.net.heartbeat = func(*api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
		return nil, api.Errorf(api.ErrUnavailable, "the server is restarting")
	}
	start(t, ctx, e.Client, e.TaskQueue(), "unreachable", ChargeLeased, 42)
	wait(t, ctx, started, "the activity to start")
	e.Clock.Advance(10*time.Second - time.Millisecond)
	select {
	case err := <-stopped:
		t.Fatalf("canceled before the lease end: %v", err)
	default:
	}
	e.Clock.Advance(time.Millisecond)
	select {
	case err := <-stopped:
		if !errors.Is(err, activities.ErrLeaseLost) {
			t.Fatalf("cause %v, want activities.ErrLeaseLost", err)
		}
	case <-ctx.Done():
		t.Fatal("the activity still runs after its lease ended unconfirmed")
	}
}

// Point 5: a report that cannot be delivered (the server restarting) is
// retried until the engine acknowledges it; when the first attempt was
// recorded but its reply lost, the repeat is acknowledged with the same
// outcome and records nothing twice.
func TestReportRetriedUntilAcknowledged(t *testing.T) {
	ctx := testCtx(t)
	e := newLeaseEnv(t, func(w *worker.Worker) {
		must(t, w.RegisterActivity(func(context.Context, int) (string, error) { return "charged", nil },
			activities.Options{Name: "Charge", Effect: activities.SideEffect}))
	})
	failed := make(chan struct{}, 8)
	acked := make(chan error, 8)
	var n atomic.Int32
	e.net.report = func(method string, next func() error) error {
		switch n.Add(1) {
		case 1, 2: // the server is down
			failed <- struct{}{}
			return api.Errorf(api.ErrUnavailable, "connection refused")
		case 3: // recorded, but the reply is lost
			if err := next(); err != nil {
				return err
			}
			failed <- struct{}{}
			return api.Errorf(api.ErrUnavailable, "connection reset")
		}
		err := next()
		acked <- err
		return err
	}
	run := start(t, ctx, e.Client, e.TaskQueue(), "retried-report", ChargeLeased, 42)
	for range 3 {
		select {
		case <-failed:
			// The worker waits (under a second) before it delivers again.
			e.Clock.BlockUntilDueWithin(time.Second)
		case <-ctx.Done():
			t.Fatal("no report")
		}
		e.Clock.Advance(5 * time.Second) // the longest backoff between deliveries
	}
	select {
	case err := <-acked:
		if err != nil {
			t.Fatalf("the repeated report: %v, want it acknowledged", err)
		}
	case <-ctx.Done():
		t.Fatal("the report was not delivered again")
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "charged" {
		t.Fatalf("result %q, %v", got, err)
	}
	evs, err := e.Client.GetHistory(ctx, "retried-report", "")
	must(t, err)
	if count(evs, history.TypeActivityCompleted) != 1 || count(evs, history.TypeActivityDuplicateDetected) != 0 ||
		count(evs, history.TypeActivityLateReport) != 0 || count(evs, history.TypeActivityStarted) != 1 {
		t.Fatalf("want one attempt, one completion and no alarm:\n%v", evs)
	}
	if n.Load() != 4 {
		t.Fatalf("%d deliveries, want 4 (two refused, one whose reply was lost, one acknowledged)", n.Load())
	}
}

// Point 8: the last heartbeat details an attempt recorded travel with its
// failure (the throttle held them back), and the next attempt resumes from
// them.
func TestHeartbeatDetailsFlushedWithTheOutcome(t *testing.T) {
	ctx := testCtx(t)
	resumed := make(chan Progress, 2)
	failed := make(chan struct{})
	e := newLeaseEnv(t, func(w *worker.Worker) {
		must(t, w.RegisterActivity(func(ctx context.Context, _ int) (string, error) {
			info := activities.GetInfo(ctx)
			if info.Attempt > 1 {
				var p Progress
				_ = sdk.DefaultConverter().FromPayload(info.HeartbeatDetails, &p)
				resumed <- p
				return "resumed", nil
			}
			activities.RecordHeartbeat(ctx, Progress{Done: 1, Of: 10}) // sent at once
			activities.RecordHeartbeat(ctx, Progress{Done: 7, Of: 10}) // held by the throttle
			defer close(failed)
			return "", errors.New("the crawler crashed")
		}, activities.Options{Name: "Charge"}))
	})
	reported := make(chan struct{})
	var once sync.Once
	e.net.report = func(method string, next func() error) error {
		err := next()
		if method == "FailActivity" {
			once.Do(func() { close(reported) })
		}
		return err
	}
	run := start(t, ctx, e.Client, e.TaskQueue(), "resume", ChargeLeased, 42)
	wait(t, ctx, failed, "the first attempt to fail")
	wait(t, ctx, reported, "its failure to be reported")
	e.Clock.Advance(time.Second) // the retry backoff
	var p Progress
	select {
	case p = <-resumed:
	case <-ctx.Done():
		t.Fatal("no second attempt")
	}
	if p != (Progress{Done: 7, Of: 10}) {
		t.Fatalf("the next attempt resumed from %+v, want the last recorded progress {7 10}", p)
	}
	must(t, run.Get(ctx, nil))
}
