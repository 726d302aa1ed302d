package acceptance_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// Decision answers one tool call waiting for a person.
type Decision struct {
	Call string
	OK   bool
}

// Desk waits for a decision on each of its calls, taken as an update:
// the validator answers "unknown call" and "already decided" at once,
// without a trace in history; the handler records the decision, runs an
// activity and answers its result. A "hold" signal makes handlers wait
// for a "go" signal before they finish (to stop a worker in between).
func Desk(ctx sdk.Context, calls []string) (int, error) {
	pending := map[string]bool{}
	for _, c := range calls {
		pending[c] = true
	}
	decided := map[string]bool{}
	hold := false
	goCh := sdk.GetSignalChannel[bool](ctx, "go")
	sdk.Go(ctx, func(ctx sdk.Context) {
		sdk.GetSignalChannel[bool](ctx, "hold").Receive(ctx)
		hold = true
	})
	err := sdk.SetUpdateHandler(ctx, "decide", func(ctx sdk.Context, d Decision) (string, error) {
		decided[d.Call] = d.OK
		delete(pending, d.Call)
		if hold {
			goCh.Receive(ctx)
		}
		if !d.OK {
			return "", sdk.NewNonRetryableError("declined "+d.Call, "Declined")
		}
		return sdk.ExecuteActivity(ctx, Greet, d.Call).Get(ctx)
	}, sdk.UpdateHandlerOptions{Validator: func(ctx sdk.Context, d Decision) error {
		if _, done := decided[d.Call]; done {
			return fmt.Errorf("call %q is already decided", d.Call)
		}
		if !pending[d.Call] {
			return fmt.Errorf("unknown call %q", d.Call)
		}
		return nil
	}})
	if err != nil {
		return 0, err
	}
	// Validators that misbehave: each is a rejection.
	_ = sdk.SetUpdateHandler(ctx, "sneaky", func(ctx sdk.Context) error { return nil },
		sdk.UpdateHandlerOptions{Validator: func(ctx sdk.Context) error { return sdk.Sleep(ctx, time.Second) }})
	_ = sdk.SetUpdateHandler(ctx, "panicky", func(ctx sdk.Context) error { return nil },
		sdk.UpdateHandlerOptions{Validator: func(ctx sdk.Context) error { panic("boom") }})
	if err := sdk.Await(ctx, func() bool { return len(pending) == 0 }); err != nil {
		return 0, err
	}
	if err := sdk.Await(ctx, func() bool { return sdk.AllHandlersFinished(ctx) }); err != nil {
		return 0, err
	}
	return len(decided), nil
}

func newDeskEnv(t *testing.T, opts testenv.Options) *testenv.Env {
	env := newEnv(t, opts)
	env.RegisterWorkflow(Desk)
	env.RegisterActivity(Greet)
	env.Start()
	return env
}

// settled waits until the run's last workflow task is recorded and
// returns its history: nothing more happens until something is sent.
func settled(t *testing.T, env *testenv.Env, id, runID string) []history.Event {
	t.Helper()
	ctx := testCtx(t)
	for {
		env.Engine.Settle()
		evs := events(t, ctx, env.Client, id, runID)
		d, err := env.Client.DescribeWorkflow(ctx, id, runID)
		if err != nil {
			t.Fatal(err)
		}
		if d.WorkflowTask == nil || !d.Info.Status.Open() {
			if again := events(t, ctx, env.Client, id, runID); len(again) == len(evs) {
				return evs
			}
			continue
		}
		// A workflow task is pending after evs: its completion is news.
		waitEvent(t, ctx, env.Client, id, runID, evs[len(evs)-1].ID, func(history.Event) bool { return true })
	}
}

func decide(t *testing.T, env *testenv.Env, id, updateID string, d Decision) (string, error) {
	t.Helper()
	ctx := testCtx(t)
	h, err := env.Client.UpdateWorkflow(ctx, client.UpdateOptions{WorkflowID: id, UpdateID: updateID, Name: "decide", Args: d})
	if err != nil {
		return "", err
	}
	var out string
	err = h.Get(ctx, &out)
	return out, err
}

func TestUpdateAcceptedReturnsHandlerResult(t *testing.T) {
	env := newDeskEnv(t, testenv.Options{})
	run := start(t, testCtx(t), env, "desk", Desk, []string{"pay", "mail"})
	out, err := decide(t, env, "desk", "", Decision{Call: "pay", OK: true})
	if err != nil || out != "Hello, pay!" {
		t.Fatalf("decide pay: %q, %v", out, err)
	}
	_, err = decide(t, env, "desk", "", Decision{Call: "mail"})
	var app *sdk.ApplicationError
	if !errors.As(err, &app) || app.Type != "Declined" {
		t.Fatalf("a handler's error: %v, want the Declined application error", err)
	}
	var n int
	if err := run.Get(testCtx(t), &n); err != nil || n != 2 {
		t.Fatalf("result %d, %v", n, err)
	}
	evs := events(t, testCtx(t), env.Client, "desk", "")
	if a, c := count(evs, history.TypeWorkflowUpdateAccepted), count(evs, history.TypeWorkflowUpdateCompleted); a != 2 || c != 2 {
		t.Fatalf("%d accepted, %d completed: %v", a, c, typesOf(evs))
	}
}

func TestUpdateRejectionLeavesHistoryUnchanged(t *testing.T) {
	env := newDeskEnv(t, testenv.Options{})
	ctx := testCtx(t)
	run := start(t, ctx, env, "desk", Desk, []string{"pay", "mail"})
	before := settled(t, env, "desk", run.RunID())
	for _, c := range []struct {
		name string
		args any
		want string
	}{
		{"decide", Decision{Call: "refund", OK: true}, `unknown call "refund"`},
		{"nope", nil, "unknown update"},
		{"sneaky", nil, "must not block"},
		{"panicky", nil, "boom"},
	} {
		_, err := env.Client.UpdateWorkflow(ctx, client.UpdateOptions{WorkflowID: "desk", Name: c.name, Args: c.args})
		if !errors.Is(err, api.ErrUpdateRejected) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("update %s: %v, want a rejection saying %q", c.name, err, c.want)
		}
	}
	if out, err := decide(t, env, "desk", "", Decision{Call: "pay", OK: true}); err != nil || out != "Hello, pay!" {
		t.Fatalf("decide pay: %q, %v", out, err)
	}
	after := events(t, ctx, env.Client, "desk", run.RunID())
	if !reflect.DeepEqual(after[:len(before)], before) || after[len(before)].Type() != history.TypeWorkflowUpdateAccepted {
		t.Fatalf("rejections changed the history:\nbefore %v\nafter  %v", typesOf(before), typesOf(after))
	}
	// Already decided: rejected by the validator, synchronously.
	if _, err := decide(t, env, "desk", "", Decision{Call: "pay", OK: true}); !errors.Is(err, api.ErrUpdateRejected) ||
		!strings.Contains(err.Error(), "already decided") {
		t.Fatalf("deciding twice: %v", err)
	}
}

func TestUpdateIDDeduplicated(t *testing.T) {
	env := newDeskEnv(t, testenv.Options{})
	run := start(t, testCtx(t), env, "desk", Desk, []string{"pay", "mail"})
	first, err := decide(t, env, "desk", "u-1", Decision{Call: "pay", OK: true})
	if err != nil {
		t.Fatal(err)
	}
	// The same id again (even with another input, which the validator
	// would now reject): the first outcome, nothing applied twice.
	again, err := decide(t, env, "desk", "u-1", Decision{Call: "pay", OK: true})
	if err != nil || again != first {
		t.Fatalf("the same update id again: %q, %v; want %q", again, err, first)
	}
	evs := settled(t, env, "desk", run.RunID())
	if n := count(evs, history.TypeWorkflowUpdateAccepted); n != 1 {
		t.Fatalf("%d WorkflowUpdateAccepted, want 1: %v", n, typesOf(evs))
	}
}

func TestUpdateClosedRun(t *testing.T) {
	env := newDeskEnv(t, testenv.Options{})
	run := start(t, testCtx(t), env, "desk", Desk, []string{"pay"})
	if _, err := decide(t, env, "desk", "u-pay", Decision{Call: "pay", OK: true}); err != nil {
		t.Fatal(err)
	}
	if err := run.Get(testCtx(t), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := decide(t, env, "desk", "", Decision{Call: "mail", OK: true}); !errors.Is(err, api.ErrWorkflowClosed) {
		t.Fatalf("update of a closed run: %v, want ErrWorkflowClosed", err)
	}
	// An update the run completed still answers by its id.
	if out, err := decide(t, env, "desk", "u-pay", Decision{Call: "pay", OK: true}); err != nil || out != "Hello, pay!" {
		t.Fatalf("a completed update after the run closed: %q, %v", out, err)
	}
}

func TestUpdateWithStart(t *testing.T) {
	env := newDeskEnv(t, testenv.Options{})
	ctx := testCtx(t)
	so := client.StartOptions{ID: "desk", TaskQueue: env.TaskQueue()}
	h, err := env.Client.UpdateWithStartWorkflow(ctx, so, Desk, []string{"pay", "mail"},
		client.UpdateOptions{Name: "decide", Args: Decision{Call: "pay", OK: true}})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	if err := h.Get(ctx, &out); err != nil || out != "Hello, pay!" || h.WorkflowID() != "desk" {
		t.Fatalf("update-with-start: %q, %v", out, err)
	}
	// The run is open: the second one updates it, starting nothing.
	h2, err := env.Client.UpdateWithStartWorkflow(ctx, so, Desk, []string{"other"},
		client.UpdateOptions{Name: "decide", Args: Decision{Call: "mail", OK: true}})
	if err != nil || h2.RunID() != h.RunID() {
		t.Fatalf("second update-with-start: %v (run %s, first %s)", err, h2.RunID(), h.RunID())
	}
	var n int
	if err := env.Client.GetWorkflow(ctx, "desk", h.RunID()).Get(ctx, &n); err != nil || n != 2 {
		t.Fatalf("result %d, %v", n, err)
	}
	// A rejected update-with-start leaves the run it started (as in
	// Temporal): started, without the update.
	_, err = env.Client.UpdateWithStartWorkflow(ctx, client.StartOptions{ID: "desk-2", TaskQueue: env.TaskQueue()}, Desk, []string{"pay"},
		client.UpdateOptions{Name: "decide", Args: Decision{Call: "refund", OK: true}})
	if !errors.Is(err, api.ErrUpdateRejected) {
		t.Fatalf("a rejected update-with-start: %v", err)
	}
	evs := settled(t, env, "desk-2", "")
	if evs[0].Type() != history.TypeWorkflowStarted || count(evs, history.TypeWorkflowUpdateAccepted) != 0 {
		t.Fatalf("after a rejected update-with-start: %v", typesOf(evs))
	}
}

func TestUpdateSurvivesWorkerRestart(t *testing.T) {
	const stickyTimeout = 5 * time.Second
	env := newEnv(t, testenv.Options{NoTimeSkipping: true,
		Engine: engine.Options{Defaults: engine.Defaults{StickyTimeout: stickyTimeout}}})
	env.RegisterWorkflow(Desk)
	env.RegisterActivity(Greet)
	env.Start()
	ctx := testCtx(t)
	run := start(t, ctx, env, "desk", Desk, []string{"pay"})
	must(t, env.Client.SignalWorkflow(ctx, "desk", "", "hold", true))
	settled(t, env, "desk", run.RunID())
	h, err := env.Client.UpdateWorkflow(ctx, client.UpdateOptions{WorkflowID: "desk", Name: "decide", Args: Decision{Call: "pay", OK: true},
		WaitForStage: api.UpdateStageAccepted})
	if err != nil {
		t.Fatal(err)
	}
	// The handler ran and waits for "go"; the worker dies.
	settled(t, env, "desk", run.RunID())
	d, err := env.Client.DescribeWorkflow(ctx, "desk", "")
	if err != nil || len(d.PendingUpdates) != 1 || d.PendingUpdates[0].Name != "decide" || d.PendingUpdates[0].UpdateID != h.UpdateID() {
		t.Fatalf("describe: pending updates %+v, %v", d.PendingUpdates, err)
	}
	env.StopWorker()

	second := env.NewWorker(worker.Options{Identity: "second"})
	must(t, second.RegisterWorkflow(Desk))
	must(t, second.RegisterActivity(Greet))
	env.RunWorker(second)
	must(t, env.Client.SignalWorkflow(ctx, "desk", "", "go", true))
	env.Clock.Advance(stickyTimeout) // the task falls back from the dead worker's sticky queue
	var out string
	if err := h.Get(ctx, &out); err != nil || out != "Hello, pay!" {
		t.Fatalf("after the restart: %q, %v", out, err)
	}
	if second.Stats().FullReplays.Load() == 0 {
		t.Fatal("the second worker did not replay the run")
	}
	if d, err := env.Client.DescribeWorkflow(ctx, "desk", ""); err != nil || len(d.PendingUpdates) != 0 {
		t.Fatalf("describe after the update completed: %+v, %v", d.PendingUpdates, err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// Rolling continues as new on a "next" signal without waiting for its
// update handlers, whose "stall" update never returns.
func Rolling(ctx sdk.Context, gen int) (int, error) {
	if err := sdk.SetUpdateHandler(ctx, "stall", func(ctx sdk.Context) error {
		return sdk.Await(ctx, func() bool { return false })
	}, sdk.UpdateHandlerOptions{}); err != nil {
		return 0, err
	}
	if gen > 0 {
		return gen, nil
	}
	sdk.GetSignalChannel[bool](ctx, "next").Receive(ctx)
	return 0, sdk.NewContinueAsNewError(ctx, Rolling, gen+1)
}

// An update accepted but unfinished when its run continues as new is not
// carried over: its caller hears that the run closed first.
func TestUpdateUnfinishedAtContinueAsNew(t *testing.T) {
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Rolling)
	env.Start()
	ctx := testCtx(t)
	run := start(t, ctx, env, "rolling", Rolling, 0)
	h, err := env.Client.UpdateWorkflow(ctx, client.UpdateOptions{WorkflowID: "rolling", Name: "stall", WaitForStage: api.UpdateStageAccepted})
	if err != nil {
		t.Fatal(err)
	}
	must(t, env.Client.SignalWorkflow(ctx, "rolling", "", "next", true))
	if err := h.Get(ctx, nil); !errors.Is(err, api.ErrWorkflowClosed) || !strings.Contains(err.Error(), "before its update") {
		t.Fatalf("an update unfinished at continue-as-new: %v, want ErrWorkflowClosed", err)
	}
	var gen int
	if err := run.Get(ctx, &gen); err != nil || gen != 1 {
		t.Fatalf("the next run: %d, %v", gen, err)
	}
}
