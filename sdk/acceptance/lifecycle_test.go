package acceptance_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// ---- a child workflow ----

// Parent runs Hello as a child workflow and reports the child's id.
func Parent(ctx sdk.Context, name string) (string, error) {
	child := sdk.ExecuteChildWorkflow(ctx, Hello, name)
	we, err := child.GetChildWorkflowExecution().Get(ctx)
	if err != nil {
		return "", err
	}
	greeting, err := child.Get(ctx)
	if err != nil {
		return "", err
	}
	return greeting + " from " + we.ID, nil
}

func TestChildWorkflow(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Parent)
	env.RegisterWorkflow(Hello)
	env.RegisterActivity(Greet)
	env.Start()

	run := start(t, ctx, env, "parent", Parent, "child")
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	childID := "parent/" + run.RunID() + "/1"
	if got != "Hello, child! from "+childID {
		t.Fatalf("result %q", got)
	}
	d, err := env.Client.DescribeWorkflow(ctx, childID, "")
	if err != nil || d.Info.Status != api.StatusCompleted || d.Info.WorkflowType != "Hello" ||
		d.Info.ParentWorkflowID != "parent" || d.Info.ParentRunID != run.RunID() {
		t.Fatalf("child: %+v, %v", d, err)
	}
	evs := events(t, ctx, env.Client, "parent", run.RunID())
	if count(evs, history.TypeChildWorkflowStarted) != 1 || count(evs, history.TypeChildWorkflowCompleted) != 1 {
		t.Fatalf("parent history %v", typesOf(evs))
	}
}

// ---- continue-as-new ----

// Countdown runs one activity per run and continues as new until n is 0.
func Countdown(ctx sdk.Context, n int) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	greeting, err := sdk.ExecuteActivity(ctx, Greet, strconv.Itoa(n)).Get(ctx)
	if err != nil {
		return "", err
	}
	if n > 0 {
		return "", sdk.NewContinueAsNewError(ctx, Countdown, n-1)
	}
	info := sdk.GetInfo(ctx)
	return greeting + " first run " + info.FirstRunID, nil
}

func TestContinueAsNew(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Countdown)
	env.RegisterActivity(Greet)
	env.Start()

	run := start(t, ctx, env, "countdown", Countdown, 3)
	var got string
	if err := run.Get(ctx, &got); err != nil { // follows the chain
		t.Fatal(err)
	}
	if got != "Hello, 0! first run "+run.RunID() {
		t.Fatalf("result %q", got)
	}
	// Walk the chain: four runs, each continued into the next.
	runID, runs := run.RunID(), 1
	for {
		d, err := env.Client.DescribeWorkflow(ctx, "countdown", runID)
		if err != nil {
			t.Fatal(err)
		}
		if d.Info.Status != api.StatusContinuedAsNew {
			if d.Info.Status != api.StatusCompleted {
				t.Fatalf("last run %s is %s", runID, d.Info.Status)
			}
			break
		}
		runID, runs = d.Info.ContinuedAsNewRunID, runs+1
	}
	if runs != 4 {
		t.Fatalf("%d runs, want 4", runs)
	}
	evs := events(t, ctx, env.Client, "countdown", runID)
	if ws := evs[0].Attrs.(*history.WorkflowStarted); ws.ContinuedFromRunID == "" || ws.FirstRunID != run.RunID() {
		t.Fatalf("last run started with %+v", ws)
	}
}

// ---- cancellation reaching a running activity ----

// cancelProbe's LongTask runs until its context is canceled.
type cancelProbe struct {
	started   chan struct{}
	once      sync.Once
	sawCancel chan struct{}
}

func (p *cancelProbe) LongTask(ctx context.Context, _ string) (string, error) {
	p.once.Do(func() { close(p.started) })
	for i := 0; ; i++ {
		activities.RecordHeartbeat(ctx, i)
		select {
		case <-ctx.Done():
			close(p.sawCancel)
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond): // working
		}
	}
}

func Cleanup(_ context.Context, what string) (string, error) { return "cleaned up after " + what, nil }

// Cancellable runs LongTask; when the workflow is canceled the activity is
// canceled with it, and a cleanup activity runs on a disconnected context.
func Cancellable(ctx sdk.Context) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: time.Second})
	_, err := sdk.ExecuteActivityByName[string](ctx, "LongTask", "crawl").Get(ctx)
	var actErr *sdk.ActivityError
	if e := assertf(errors.As(err, &actErr) && sdk.IsCanceledError(err) && actErr.RetryState == sdk.RetryStateCancelRequested,
		"want a canceled *sdk.ActivityError, got %T %v", err, err); e != nil {
		return "", e
	}
	dctx, _ := sdk.NewDisconnectedContext(ctx)
	msg, err := sdk.ExecuteActivity(dctx, Cleanup, "crawl").Get(dctx)
	if err != nil {
		return "", err
	}
	sdk.GetLogger(ctx).Info().Str("cleanup", msg).Msg("canceled")
	return msg, ctx.Err() // a *sdk.CanceledError: the run closes as canceled
}

func TestCancellationReachesRunningActivity(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	probe := &cancelProbe{started: make(chan struct{}), sawCancel: make(chan struct{})}
	env.RegisterWorkflow(Cancellable)
	env.RegisterActivity(probe.LongTask, activities.Options{Name: "LongTask"})
	env.RegisterActivity(Cleanup)
	env.Start()

	run := start(t, ctx, env, "cancel-me", Cancellable, nil)
	select {
	case <-probe.started:
	case <-ctx.Done():
		t.Fatal("LongTask never started")
	}
	if err := env.Client.CancelWorkflow(ctx, "cancel-me", "", "user pressed stop"); err != nil {
		t.Fatal(err)
	}
	err := run.Get(ctx, nil)
	noAssertion(t, err)
	var canceled *sdk.CanceledError
	if !errors.As(err, &canceled) {
		t.Fatalf("client got %T %v, want *sdk.CanceledError", err, err)
	}
	select {
	case <-probe.sawCancel:
	default:
		t.Fatal("the activity never saw ctx.Done()")
	}
	evs := events(t, ctx, env.Client, "cancel-me", run.RunID())
	for _, typ := range []history.EventType{history.TypeWorkflowCancelRequested, history.TypeActivityCancelRequested,
		history.TypeActivityCanceled, history.TypeWorkflowCanceled} {
		if count(evs, typ) != 1 {
			t.Fatalf("want one %s: %v", typ, typesOf(evs))
		}
	}
	if count(evs, history.TypeActivityCompleted) != 1 { // the cleanup
		t.Fatalf("cleanup did not run: %v", typesOf(evs))
	}
	d, err := env.Client.DescribeWorkflow(ctx, "cancel-me", "")
	if err != nil || d.Info.Status != api.StatusCanceled {
		t.Fatalf("describe %+v, %v", d, err)
	}
}
