package acceptance_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// ---- a parent cancels its child (issue 20, point 6) ----

// Napper sleeps a day. Canceled, it honours the request — cleans up on a
// disconnected context and returns its context's error — unless ignore is
// set: then it completes anyway.
func Napper(ctx sdk.Context, ignore bool) (string, error) {
	if err := sdk.Sleep(ctx, 24*time.Hour); err == nil {
		return "slept", nil
	} else if e := assertf(sdk.IsCanceledError(err), "the child's sleep: %v", err); e != nil {
		return "", e
	}
	if ignore {
		return "finished anyway", nil
	}
	dctx, _ := sdk.NewDisconnectedContext(ctx)
	if _, err := sdk.ExecuteActivity(dctx, Cleanup, "nap").Get(dctx); err != nil {
		return "", err
	}
	return "", ctx.Err()
}

// CancelsChild starts Napper, waits a minute (the child has started: its
// run was created with the parent's decision), then cancels the context
// the child was started with.
func CancelsChild(ctx sdk.Context, ignore bool) (string, error) {
	cctx, cancel := sdk.WithCancel(ctx)
	child := sdk.ExecuteChildWorkflow(cctx, Napper, ignore)
	if err := sdk.Sleep(ctx, time.Minute); err != nil {
		return "", err
	}
	if f := child.GetChildWorkflowExecution(); !f.IsReady() {
		return "", assertf(false, "the child's start is not known after a minute")
	}
	cancel()
	res, err := child.Get(ctx)
	var ce *sdk.ChildWorkflowError
	var canceled *sdk.CanceledError
	switch {
	case err == nil:
		return "child returned: " + res, nil
	case errors.As(err, &ce) && errors.Is(err, sdk.ErrCanceled) && errors.As(err, &canceled):
		return "child canceled", nil
	}
	return "", err
}

// CancelsBeforeStart cancels a child in the decision that starts it (the
// start is withdrawn) and starts one on a canceled context.
func CancelsBeforeStart(ctx sdk.Context) (string, error) {
	cctx, cancel := sdk.WithCancel(ctx)
	first := sdk.ExecuteChildWorkflow(cctx, Napper, false)
	cancel()
	second := sdk.ExecuteChildWorkflow(cctx, Napper, false)
	for _, f := range []sdk.ChildWorkflowFuture[string]{first, second} {
		_, err := f.Get(ctx)
		var ce *sdk.ChildWorkflowError
		if e := assertf(errors.As(err, &ce) && errors.Is(err, sdk.ErrCanceled), "want a canceled child, got %v", err); e != nil {
			return "", e
		}
		if _, err := f.GetChildWorkflowExecution().Get(ctx); !errors.Is(err, sdk.ErrCanceled) {
			return "", assertf(false, "the start future: %v", err)
		}
	}
	return "withdrawn", nil
}

// CancelsAfterClose cancels a child's context once the child completed.
func CancelsAfterClose(ctx sdk.Context, name string) (string, error) {
	cctx, cancel := sdk.WithCancel(ctx)
	res, err := sdk.ExecuteChildWorkflow(cctx, Hello, name).Get(ctx)
	cancel()
	if err := sdk.Sleep(ctx, time.Minute); err != nil { // one more decision after the cancel
		return "", err
	}
	return res, err
}

func childCancelEnv(t *testing.T) *testenv.Env {
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(CancelsChild)
	env.RegisterWorkflow(CancelsBeforeStart)
	env.RegisterWorkflow(CancelsAfterClose)
	env.RegisterWorkflow(Napper)
	env.RegisterWorkflow(Hello)
	env.RegisterWorkflow(AwaitsChild)
	env.RegisterWorkflow(Waiter)
	env.RegisterActivity(Cleanup)
	env.RegisterActivity(Greet)
	env.Start()
	return env
}

// replays checks that the workflow replays its recorded history.
func replays(t *testing.T, wf any, id, runID string, evs []history.Event) {
	t.Helper()
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(wf))
	if err := r.ReplayHistory(history.RunRef{WorkflowID: id, RunID: runID}, evs, worker.ReplayOptions{}); err != nil {
		t.Fatalf("replay of %s: %v", id, err)
	}
}

func TestChildCancelHonoured(t *testing.T) {
	ctx := testCtx(t)
	env := childCancelEnv(t)
	run := start(t, ctx, env, "cancels-child", CancelsChild, false)
	var got string
	err := run.Get(ctx, &got)
	noAssertion(t, err)
	if err != nil || got != "child canceled" {
		t.Fatalf("parent: %q, %v", got, err)
	}
	evs := events(t, ctx, env.Client, "cancels-child", run.RunID())
	if count(evs, history.TypeChildWorkflowCancelRequested) != 1 || count(evs, history.TypeChildWorkflowFailed) != 1 {
		t.Fatalf("parent history %v", typesOf(evs))
	}
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ChildWorkflowCancelRequested:
			if a.InitiatedEventID == 0 || a.WorkflowID == "" || a.RunID == "" || a.WorkflowTaskCompletedEventID == 0 {
				t.Fatalf("ChildWorkflowCancelRequested %+v", a)
			}
		case *history.ChildWorkflowFailed:
			if !errors.Is(sdk.FailureToError(a.Failure), sdk.ErrCanceled) {
				t.Fatalf("ChildWorkflowFailed %+v", a.Failure)
			}
		}
	}
	childID := "cancels-child/" + run.RunID() + "/1"
	d, err := env.Client.DescribeWorkflow(ctx, childID, "")
	if err != nil || d.Info.Status != api.StatusCanceled {
		t.Fatalf("child: %+v, %v", d, err)
	}
	cevs := events(t, ctx, env.Client, childID, "")
	for _, typ := range []history.EventType{history.TypeWorkflowCancelRequested, history.TypeTimerCanceled, history.TypeActivityCompleted,
		history.TypeWorkflowCanceled} {
		if count(cevs, typ) != 1 {
			t.Fatalf("want one %s in the child: %v", typ, typesOf(cevs))
		}
	}
	replays(t, CancelsChild, "cancels-child", run.RunID(), evs)
	replays(t, Napper, childID, d.Info.RunID, cevs)
}

// NeverCancels is CancelsChild without the cancel: replayed against a
// history in which the parent canceled its child, it must be reported.
func NeverCancels(ctx sdk.Context, ignore bool) (string, error) {
	child := sdk.ExecuteChildWorkflow(ctx, Napper, ignore)
	if err := sdk.Sleep(ctx, time.Minute); err != nil {
		return "", err
	}
	res, err := child.Get(ctx)
	return "child returned: " + res, err
}

// The cancel is a command like any other: code that no longer cancels the
// child does not replay the history in which it did.
func TestChildCancelReplayIsChecked(t *testing.T) {
	ctx := testCtx(t)
	env := childCancelEnv(t)
	run := start(t, ctx, env, "checked", CancelsChild, true)
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	evs := events(t, ctx, env.Client, "checked", run.RunID())
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(NeverCancels, sdk.RegisterOptions{Name: "CancelsChild"}))
	err := r.ReplayHistory(history.RunRef{WorkflowID: "checked", RunID: run.RunID()}, evs, worker.ReplayOptions{})
	var nd *sdk.NondeterminismError
	if !errors.As(err, &nd) || !strings.Contains(nd.Recorded, "ChildWorkflowCancelRequested") {
		t.Fatalf("replay without the cancel: %v", err)
	}
}

// A history recorded before a parent could cancel its child (the cancel
// was not sent, the child slept its day) replays with code that cancels:
// the cancel the history does not hold is not made, and the child's
// recorded outcome stands.
func TestChildCancelOldHistoryReplays(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(NeverCancels, sdk.RegisterOptions{Name: "CancelsChild"})
	env.RegisterWorkflow(Napper)
	env.Start()
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "old", TaskQueue: env.TaskQueue()}, "CancelsChild", false)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "child returned: slept" {
		t.Fatalf("old code: %q, %v", got, err)
	}
	replays(t, CancelsChild, "old", run.RunID(), events(t, ctx, env.Client, "old", run.RunID()))
}

// Waiter waits until it is canceled (on no timer: the test env does not
// skip time past it).
func Waiter(ctx sdk.Context) (string, error) {
	return "", sdk.Await(ctx, func() bool { return false })
}

// AwaitsChild waits for its Waiter child; canceled, it returns what the
// child's cancellation gave it.
func AwaitsChild(ctx sdk.Context) (string, error) {
	_, err := sdk.ExecuteChildWorkflowByName[string](ctx, "Waiter", nil).Get(ctx)
	if e := assertf(errors.Is(err, sdk.ErrCanceled), "want the child canceled, got %v", err); e != nil {
		return "", e
	}
	return "", ctx.Err()
}

// Canceling the parent run cancels the children started on its context.
func TestParentCancelReachesChild(t *testing.T) {
	ctx := testCtx(t)
	env := childCancelEnv(t)
	run := start(t, ctx, env, "awaits", AwaitsChild, nil)
	waitEvent(t, ctx, env.Client, "awaits", run.RunID(), 0, func(ev history.Event) bool { return ev.Type() == history.TypeChildWorkflowStarted })
	if err := env.Client.CancelWorkflow(ctx, "awaits", "", "stop"); err != nil {
		t.Fatal(err)
	}
	err := run.Get(ctx, nil)
	noAssertion(t, err)
	if !errors.Is(err, sdk.ErrCanceled) {
		t.Fatalf("parent: %v", err)
	}
	d, err := env.Client.DescribeWorkflow(ctx, "awaits/"+run.RunID()+"/1", "")
	if err != nil || d.Info.Status != api.StatusCanceled {
		t.Fatalf("child: %+v, %v", d, err)
	}
}

func TestChildIgnoresCancel(t *testing.T) {
	ctx := testCtx(t)
	env := childCancelEnv(t)
	run := start(t, ctx, env, "ignored", CancelsChild, true)
	var got string
	err := run.Get(ctx, &got)
	noAssertion(t, err)
	if err != nil || got != "child returned: finished anyway" {
		t.Fatalf("parent: %q, %v", got, err)
	}
	evs := events(t, ctx, env.Client, "ignored", run.RunID())
	if count(evs, history.TypeChildWorkflowCancelRequested) != 1 || count(evs, history.TypeChildWorkflowCompleted) != 1 {
		t.Fatalf("parent history %v", typesOf(evs))
	}
	replays(t, CancelsChild, "ignored", run.RunID(), evs)
}

func TestChildCancelBeforeStart(t *testing.T) {
	ctx := testCtx(t)
	env := childCancelEnv(t)
	run := start(t, ctx, env, "early", CancelsBeforeStart, nil)
	var got string
	err := run.Get(ctx, &got)
	noAssertion(t, err)
	if err != nil || got != "withdrawn" {
		t.Fatalf("parent: %q, %v", got, err)
	}
	evs := events(t, ctx, env.Client, "early", run.RunID())
	if count(evs, history.TypeChildWorkflowStarted) != 0 || count(evs, history.TypeChildWorkflowCancelRequested) != 0 {
		t.Fatalf("a withdrawn start left events: %v", typesOf(evs))
	}
	replays(t, CancelsBeforeStart, "early", run.RunID(), evs)
}

func TestChildCancelAfterClose(t *testing.T) {
	ctx := testCtx(t)
	env := childCancelEnv(t)
	run := start(t, ctx, env, "late", CancelsAfterClose, "kid")
	var got string
	err := run.Get(ctx, &got)
	if err != nil || got != "Hello, kid!" {
		t.Fatalf("parent: %q, %v", got, err)
	}
	evs := events(t, ctx, env.Client, "late", run.RunID())
	if count(evs, history.TypeChildWorkflowCompleted) != 1 || count(evs, history.TypeChildWorkflowCancelRequested) != 0 {
		t.Fatalf("parent history %v", typesOf(evs))
	}
	replays(t, CancelsAfterClose, "late", run.RunID(), evs)
}
