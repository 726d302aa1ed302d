package worker_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// deadline bounds each test in real time; generous for -race on a loaded
// machine.
const deadline = 2 * time.Minute

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// wait blocks until ch closes or the test's deadline passes.
func wait(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		t.Fatalf("timed out waiting for %s", what)
	}
}

func start(t *testing.T, ctx context.Context, c client.Client, queue, id string, wf any, in any) client.Run {
	t.Helper()
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: queue}, wf, in)
	must(t, err)
	return run
}

// waitEvent long-polls a run's history for an event of type typ.
func waitEvent(t *testing.T, ctx context.Context, c client.Client, id string, typ history.EventType) history.Event {
	t.Helper()
	from := int64(1)
	for {
		resp, err := c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		for _, ev := range resp.Events {
			if ev.Type() == typ {
				return ev
			}
		}
		from += int64(len(resp.Events))
		if resp.Closed && from >= resp.NextEventID {
			t.Fatalf("%s closed without a %s event", id, typ)
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting for %s in %s: %v", typ, id, ctx.Err())
		}
	}
}

func count(evs []history.Event, typ history.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

func Greet(_ context.Context, name string) (string, error) { return "Hello, " + name + "!", nil }

func Hello(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
}

// RunTool runs the activity registered as "Tool" and returns its result.
func RunTool(ctx sdk.Context, in string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5}})
	return sdk.ExecuteActivityByName[string](ctx, "Tool", in).Get(ctx)
}

// ---- graceful stop ----

// gate is an activity the test holds: it reports that it started and runs
// until released.
type gate struct {
	started  chan struct{}
	release  chan struct{}
	finished chan struct{}
	once     sync.Once
	ctxErr   atomic.Value // the activity context's error when released
	attempts atomic.Int32
}

func newGate() *gate {
	return &gate{started: make(chan struct{}), release: make(chan struct{}), finished: make(chan struct{})}
}

// Hold runs the first attempt until released, ignoring its context; later
// attempts return at once.
func (g *gate) Hold(ctx context.Context, in string) (string, error) {
	n := g.attempts.Add(1)
	if n > 1 {
		return fmt.Sprintf("%s done on attempt %d", in, activities.GetInfo(ctx).Attempt), nil
	}
	defer close(g.finished)
	g.once.Do(func() { close(g.started) })
	<-g.release
	g.ctxErr.Store(fmt.Sprint(ctx.Err()))
	return in + " done after release", nil
}

func TestGracefulStopFinishesInFlightActivity(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{NoTimeSkipping: true})
	g := newGate()
	w := env.NewWorker(worker.Options{GracefulStop: deadline})
	must(t, w.RegisterWorkflow(RunTool))
	must(t, w.RegisterActivity(g.Hold, activities.Options{Name: "Tool"}))
	runCtx, stop := context.WithCancel(context.Background())
	defer stop()
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(runCtx) }()

	run := start(t, ctx, env.Client, env.TaskQueue(), "graceful", RunTool, "report")
	wait(t, ctx, g.started, "the activity to start")
	stop() // SIGTERM
	select {
	case err := <-runDone:
		t.Fatalf("Run returned (%v) with an activity in flight", err)
	default:
	}
	close(g.release)
	select {
	case err := <-runDone:
		must(t, err)
	case <-ctx.Done():
		t.Fatal("Run did not return after the in-flight activity finished")
	}
	if got := g.ctxErr.Load(); got != "<nil>" {
		t.Fatalf("the activity's context was canceled within the grace period: %v", got)
	}
	// Its result is recorded although the worker was stopping.
	ev := waitEvent(t, ctx, env.Client, "graceful", history.TypeActivityCompleted)
	var res string
	must(t, sdk.DefaultConverter().FromPayload(ev.Attrs.(*history.ActivityCompleted).Result, &res))
	if res != "report done after release" {
		t.Fatalf("recorded %q", res)
	}
	// The stopped worker polls no more: another one finishes the run.
	w2 := env.NewWorker(worker.Options{})
	must(t, w2.RegisterWorkflow(RunTool))
	must(t, w2.RegisterActivity(g.Hold, activities.Options{Name: "Tool"}))
	env.RunWorker(w2)
	env.Clock.Advance(time.Minute) // past the sticky timeout of the stopped worker's queue
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "report done after release" {
		t.Fatalf("result %q, %v", got, err)
	}
	if g.attempts.Load() != 1 {
		t.Fatalf("%d attempts", g.attempts.Load())
	}
}

func TestActivityIgnoringCancellationIsLeftToItsLease(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{NoTimeSkipping: true})
	g := newGate()
	defer func() {
		select {
		case <-g.release:
		default:
			close(g.release)
		}
	}()
	register := func(w *worker.Worker) {
		must(t, w.RegisterWorkflow(RunTool))
		must(t, w.RegisterActivity(g.Hold, activities.Options{Name: "Tool"}))
	}
	w1 := env.NewWorker(worker.Options{GracefulStop: 50 * time.Millisecond, Identity: "w1"})
	register(w1)
	stop1 := env.RunWorker(w1)

	run := start(t, ctx, env.Client, env.TaskQueue(), "stubborn", RunTool, "crawl")
	wait(t, ctx, g.started, "the activity to start")
	stop1() // returns although the activity ignores its canceled context

	// The attempt is still leased to the stopped worker; nobody reported it.
	d, err := env.Client.DescribeWorkflow(ctx, "stubborn", "")
	must(t, err)
	if len(d.PendingActivities) != 1 || d.PendingActivities[0].State != api.ActivityStateStarted || d.PendingActivities[0].Attempt != 1 {
		t.Fatalf("pending activities %+v", d.PendingActivities)
	}

	w2 := env.NewWorker(worker.Options{Identity: "w2"})
	register(w2)
	env.RunWorker(w2)
	// The lease (heartbeat timeout 10 s) expires: the activity is retried
	// after its backoff (1 s), on the second worker.
	env.Clock.Advance(11 * time.Second)
	env.Engine.Settle()
	env.Clock.Advance(2 * time.Second)
	env.Engine.Settle()
	// The result's workflow task waits on the stopped worker's sticky
	// queue until the sticky timeout.
	waitEvent(t, ctx, env.Client, "stubborn", history.TypeActivityCompleted)
	env.Clock.Advance(time.Minute)
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "crawl done on attempt 2" {
		t.Fatalf("result %q, %v", got, err)
	}
	evs, err := env.Client.GetHistory(ctx, "stubborn", "")
	must(t, err)
	if count(evs, history.TypeActivityCompleted) != 1 || evs[3].Attrs.(*history.ActivityStarted).Attempt != 2 {
		t.Fatalf("history %v", evs)
	}
	// The abandoned attempt saw its context canceled; its late result is refused.
	close(g.release)
	wait(t, ctx, g.finished, "the abandoned attempt to return")
	if got := g.ctxErr.Load(); got != context.Canceled.Error() {
		t.Fatalf("the abandoned attempt's context: %v", got)
	}
}

// ---- panics and deadlocks fail the task, not the worker ----

func Panicky(ctx sdk.Context, _ string) (string, error) {
	var m map[string]int
	//lint:ignore SA5000 the test needs a runtime panic inside workflow code
	m["boom"]++ // assignment to entry in nil map
	return "", nil
}

// blocker holds the native channel Blocker blocks on: the deadlock
// detector abandons the goroutine; the test closes the channel to let it go.
var blocker atomic.Pointer[chan struct{}]

func Blocker(ctx sdk.Context, _ string) (string, error) {
	<-*blocker.Load() // a native channel: not allowed in workflow code
	return "", nil
}

func TestPanickingWorkflowFailsTheTaskNotTheWorker(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Panicky)
	env.RegisterWorkflow(Hello)
	env.RegisterActivity(Greet)
	env.Start()

	start(t, ctx, env.Client, env.TaskQueue(), "panicky", Panicky, "x")
	ev := waitEvent(t, ctx, env.Client, "panicky", history.TypeWorkflowTaskFailed)
	if a := ev.Attrs.(*history.WorkflowTaskFailed); a.Cause != "panic" {
		t.Fatalf("task failed with cause %q", a.Cause)
	}
	d, err := env.Client.DescribeWorkflow(ctx, "panicky", "")
	must(t, err)
	if d.Info.Status != api.StatusRunning || d.WorkflowTask == nil || d.WorkflowTask.LastFailure == nil {
		t.Fatalf("describe %+v", d)
	}
	f := d.WorkflowTask.LastFailure
	if f.Type != sdk.FailureTypePanic || !strings.Contains(f.Message, "nil map") || !strings.Contains(f.Stack, "worker_test.Panicky") {
		t.Fatalf("last failure %+v", f)
	}
	// The task is retried with backoff until the code is fixed; stop it.
	must(t, env.Client.TerminateWorkflow(ctx, "panicky", "", "test over"))
	// The worker lives on.
	var got string
	if _, err := env.Client.ExecuteWorkflow(ctx, client.StartOptions{ID: "after-panic", TaskQueue: env.TaskQueue()}, Hello, "world", &got); err != nil || got != "Hello, world!" {
		t.Fatalf("hello after the panic: %q, %v", got, err)
	}
	if env.Worker.Stats().WorkflowTaskFails.Load() < 1 {
		t.Fatal("no failed workflow task counted")
	}
}

func TestDeadlockedWorkflowIsDetected(t *testing.T) {
	ctx := testCtx(t)
	ch := make(chan struct{})
	blocker.Store(&ch)
	defer close(ch)
	env := newEnv(t, testenv.Options{Worker: worker.Options{DeadlockTimeout: 250 * time.Millisecond}})
	env.RegisterWorkflow(Blocker)
	env.RegisterWorkflow(Hello)
	env.RegisterActivity(Greet)
	env.Start()

	start(t, ctx, env.Client, env.TaskQueue(), "blocked", Blocker, "x")
	ev := waitEvent(t, ctx, env.Client, "blocked", history.TypeWorkflowTaskFailed)
	a := ev.Attrs.(*history.WorkflowTaskFailed)
	if a.Cause != "blocked" || a.Failure.Type != "DeadlockError" || !strings.Contains(a.Failure.Stack, "worker_test.Blocker") {
		t.Fatalf("task failure %+v", a)
	}
	must(t, env.Client.TerminateWorkflow(ctx, "blocked", "", "test over"))
	var got string
	if _, err := env.Client.ExecuteWorkflow(ctx, client.StartOptions{ID: "after-deadlock", TaskQueue: env.TaskQueue()}, Hello, "world", &got); err != nil || got != "Hello, world!" {
		t.Fatalf("hello after the deadlock: %q, %v", got, err)
	}
}

// ---- heartbeats ----

// slowTool runs for a while without recording heartbeats.
type slowTool struct {
	runFor time.Duration
	calls  atomic.Int32
}

func (s *slowTool) Slow(ctx context.Context, in string) (string, error) {
	s.calls.Add(1)
	select {
	case <-time.After(s.runFor): // the work
		return in + " finished", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// RunSlow gives the activity a heartbeat timeout far shorter than its run
// time, and a single attempt: only heartbeats can keep it alive.
func RunSlow(ctx sdk.Context, hb time.Duration) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: hb,
		RetryPolicy: &sdk.RetryPolicy{MaximumAttempts: 1}})
	return sdk.ExecuteActivityByName[string](ctx, "Slow", "job").Get(ctx)
}

// realEngine is an in-memory engine on the real clock.
func realEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	must(t, err)
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	return eng
}

// runWorker runs w until the test ends.
func runWorker(t *testing.T, w *worker.Worker) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func TestAutomaticHeartbeatsKeepTheLease(t *testing.T) {
	ctx := testCtx(t)
	eng := realEngine(t)
	c := client.NewLocal(eng, client.Options{})
	tool := &slowTool{runFor: 2500 * time.Millisecond}
	w, err := worker.New(c, worker.Options{TaskQueue: "hb"})
	must(t, err)
	must(t, w.RegisterWorkflow(RunSlow))
	must(t, w.RegisterActivity(tool.Slow, activities.Options{Name: "Slow"}))
	runWorker(t, w)

	var got string
	if _, err := c.ExecuteWorkflow(ctx, client.StartOptions{ID: "slow", TaskQueue: "hb"}, RunSlow, time.Second, &got); err != nil || got != "job finished" {
		t.Fatalf("result %q, %v", got, err)
	}
	evs, err := c.GetHistory(ctx, "slow", "")
	must(t, err)
	if tool.calls.Load() != 1 || count(evs, history.TypeActivityStarted) != 1 || count(evs, history.TypeActivityTimedOut) != 0 {
		t.Fatalf("%d calls; history %v", tool.calls.Load(), evs)
	}
}

// Progress is an activity's heartbeat details.
type Progress struct {
	Done, Of int
}

type progressTool struct {
	recorded, release chan struct{}
}

func (p *progressTool) Index(ctx context.Context, in string) (string, error) {
	activities.RecordHeartbeat(ctx, Progress{Done: 3, Of: 10})
	close(p.recorded)
	select {
	case <-p.release:
		return in + " indexed", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// heartbeatWatch is the engine with a hook on heartbeats that carried details.
type heartbeatWatch struct {
	api.Service
	once sync.Once
	sent chan struct{}
}

func (h *heartbeatWatch) RecordActivityHeartbeat(ctx context.Context, req *api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	resp, err := h.Service.RecordActivityHeartbeat(ctx, req)
	if err == nil && len(req.Details.Data) > 0 {
		h.once.Do(func() { close(h.sent) })
	}
	return resp, err
}

func TestRecordedHeartbeatDetailsAreVisible(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{NoTimeSkipping: true})
	watch := &heartbeatWatch{Service: env.Engine, sent: make(chan struct{})}
	w, err := worker.New(client.NewLocal(watch, client.Options{}), worker.Options{TaskQueue: env.TaskQueue(), Clock: env.Clock})
	must(t, err)
	tool := &progressTool{recorded: make(chan struct{}), release: make(chan struct{})}
	must(t, w.RegisterWorkflow(RunTool))
	must(t, w.RegisterActivity(tool.Index, activities.Options{Name: "Tool"}))
	env.RunWorker(w)

	run := start(t, ctx, env.Client, env.TaskQueue(), "progress", RunTool, "docs")
	wait(t, ctx, tool.recorded, "the activity to record progress")
	wait(t, ctx, watch.sent, "the heartbeat with details")
	d, err := env.Client.DescribeWorkflow(ctx, "progress", "")
	must(t, err)
	if len(d.PendingActivities) != 1 {
		t.Fatalf("pending %+v", d.PendingActivities)
	}
	var p Progress
	if err := sdk.DefaultConverter().FromPayload(d.PendingActivities[0].HeartbeatDetails, &p); err != nil || p != (Progress{3, 10}) {
		t.Fatalf("heartbeat details %+v, %v", p, err)
	}
	close(tool.release)
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "docs indexed" {
		t.Fatalf("result %q, %v", got, err)
	}
}

// ---- a sticky cache smaller than the work in flight ----

func Steps(ctx sdk.Context, n int) (int, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	sum := 0
	for i := range n {
		v, err := sdk.ExecuteActivity(ctx, Double, i).Get(ctx)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func Double(_ context.Context, i int) (int, error) { return 2 * i, nil }

// Runs evicted from a one-entry cache while their tasks run are closed
// safely and rebuilt by full replays.
func TestTinyStickyCache(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{Worker: worker.Options{StickyCacheSize: 1, MaxConcurrentWorkflowTasks: 4, WorkflowPollers: 4}})
	env.RegisterWorkflow(Steps)
	env.RegisterActivity(Double)
	env.Start()

	const runs, steps = 8, 5
	var runsList []client.Run
	for i := range runs {
		runsList = append(runsList, start(t, ctx, env.Client, env.TaskQueue(), fmt.Sprint("steps-", i), Steps, steps))
	}
	for _, r := range runsList {
		var sum int
		if err := r.Get(ctx, &sum); err != nil || sum != steps*(steps-1) {
			t.Fatalf("%s: %d, %v", r.WorkflowID(), sum, err)
		}
	}
	if s := env.Worker.Stats(); s.WorkflowTaskFails.Load() != 0 {
		t.Fatalf("%d failed workflow tasks", s.WorkflowTaskFails.Load())
	}
}
