package acceptance_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

func Welcome(_ context.Context, name string) (string, error) {
	return "Welcome aboard, " + name + ".", nil
}
func Audit(_ context.Context, name string) (string, error)    { return "audited " + name, nil }
func Farewell(_ context.Context, name string) (string, error) { return "Goodbye, " + name + ".", nil }

// Onboard is the old code: greet, then welcome.
func Onboard(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	greeting, err := sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	welcome, err := sdk.ExecuteActivity(ctx, Welcome, name).Get(ctx)
	return greeting + " " + welcome, err
}

// OnboardV2 is the new code, deployed under the same name: it adds an
// audit step behind GetVersion, so runs recorded by the old code replay.
func OnboardV2(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	v := sdk.GetVersion(ctx, "audit-step", sdk.DefaultVersion, 1)
	greeting, err := sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	if v == 1 {
		if _, err := sdk.ExecuteActivity(ctx, Audit, name).Get(ctx); err != nil {
			return "", err
		}
		greeting += " (audited)"
	}
	welcome, err := sdk.ExecuteActivity(ctx, Welcome, name).Get(ctx)
	return greeting + " " + welcome, err
}

// OnboardChanged changes the code without GetVersion: the second step is
// a different activity.
func OnboardChanged(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	greeting, err := sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	bye, err := sdk.ExecuteActivity(ctx, Farewell, name).Get(ctx)
	return greeting + " " + bye, err
}

// runOnboard runs wf, registered as "Onboard", to completion and returns
// its result and history.
func runOnboard(t *testing.T, wf any, id string) (string, []history.Event) {
	t.Helper()
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(wf, sdk.RegisterOptions{Name: "Onboard"})
	env.RegisterActivity(Greet)
	env.RegisterActivity(Welcome)
	env.RegisterActivity(Audit)
	env.Start()
	run := start(t, ctx, env, id, "Onboard", "ada")
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	return got, events(t, ctx, env.Client, id, run.RunID())
}

func replayer(t *testing.T, wf any) *worker.Replayer {
	t.Helper()
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(wf, sdk.RegisterOptions{Name: "Onboard"}))
	return r
}

func TestGetVersionOldAndNewCode(t *testing.T) {
	oldResult, oldHistory := runOnboard(t, Onboard, "onboard-old")
	if oldResult != "Hello, ada! Welcome aboard, ada." {
		t.Fatalf("old code: %q", oldResult)
	}
	ref := history.RunRef{WorkflowID: "onboard-old"}

	// The new code replays the old run: GetVersion answers DefaultVersion
	// there, so the audit step is skipped exactly as the old code ran.
	if err := replayer(t, OnboardV2).ReplayHistory(ref, oldHistory, worker.ReplayOptions{}); err != nil {
		t.Fatalf("new code over the old history: %v", err)
	}

	// A new run of the new code takes the new path and records the version.
	newResult, newHistory := runOnboard(t, OnboardV2, "onboard-new")
	if newResult != "Hello, ada! (audited) Welcome aboard, ada." {
		t.Fatalf("new code: %q", newResult)
	}
	var marker *history.MarkerRecorded
	for _, ev := range newHistory {
		if m, ok := ev.Attrs.(*history.MarkerRecorded); ok {
			marker = m
		}
	}
	if marker == nil || marker.Name != sdk.MarkerVersion || marker.ID != "audit-step" {
		t.Fatalf("no version marker in %v", typesOf(newHistory))
	}
	if err := replayer(t, OnboardV2).ReplayHistory(history.RunRef{WorkflowID: "onboard-new"}, newHistory, worker.ReplayOptions{}); err != nil {
		t.Fatalf("new code over the new history: %v", err)
	}
	// The old code cannot replay the new history.
	err := replayer(t, Onboard).ReplayHistory(history.RunRef{WorkflowID: "onboard-new"}, newHistory, worker.ReplayOptions{})
	if !errors.Is(err, sdk.ErrNondeterminism) {
		t.Fatalf("old code over the new history: %v, want nondeterminism", err)
	}
}

func TestChangedWorkflowIsNondeterministic(t *testing.T) {
	_, h := runOnboard(t, Onboard, "onboard")
	// The change is at the second activity: find the event that recorded it.
	var want int64
	for _, ev := range h {
		if a, ok := ev.Attrs.(*history.ActivityScheduled); ok && a.ActivityType == "Welcome" {
			want = ev.ID
		}
	}
	err := replayer(t, OnboardChanged).ReplayHistory(history.RunRef{WorkflowID: "onboard"}, h, worker.ReplayOptions{})
	var nd *sdk.NondeterminismError
	if !errors.As(err, &nd) {
		t.Fatalf("replay: %v, want *sdk.NondeterminismError", err)
	}
	if nd.EventID != want || !strings.Contains(nd.Recorded, "Welcome") || !strings.Contains(nd.Produced, "Farewell") {
		t.Fatalf("nondeterminism at event %d (want %d): recorded %q, produced %q", nd.EventID, want, nd.Recorded, nd.Produced)
	}
	// The unchanged code replays cleanly.
	if err := replayer(t, Onboard).ReplayHistory(history.RunRef{WorkflowID: "onboard"}, h, worker.ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
}

// ---- a worker killed between tasks; another finishes the run ----

// Approve greets, waits for an approval signal, then welcomes the approver.
func Approve(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	greeting, err := sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	a := sdk.GetSignalChannel[Approval](ctx, "approve").Receive(ctx)
	welcome, err := sdk.ExecuteActivity(ctx, Welcome, a.By).Get(ctx)
	return greeting + " " + welcome, err
}

func registerApprove(t *testing.T, w registrar) {
	must(t, w.RegisterWorkflow(Approve))
	must(t, w.RegisterActivity(Greet))
	must(t, w.RegisterActivity(Welcome))
}

func TestWorkerKilledBetweenTasks(t *testing.T) {
	ctx := testCtx(t)
	const stickyTimeout = 5 * time.Second
	env := newEnv(t, testenv.Options{NoTimeSkipping: true,
		Engine: engine.Options{Defaults: engine.Defaults{StickyTimeout: stickyTimeout}}})
	registerApprove(t, env.Worker)
	env.Start()

	run := start(t, ctx, env, "approve", Approve, "ada")
	// The run waits on the signal once the decision after the greeting is in.
	done := waitEvent(t, ctx, env.Client, "approve", run.RunID(), 0, isType(history.TypeActivityCompleted))
	waitEvent(t, ctx, env.Client, "approve", run.RunID(), done.ID, isType(history.TypeWorkflowTaskCompleted))
	first := env.Worker.Stats()
	if first.FullReplays.Load() != 1 || first.CacheHits.Load() != 1 {
		t.Fatalf("first worker: %d full replays, %d cache hits", first.FullReplays.Load(), first.CacheHits.Load())
	}
	env.StopWorker() // the process dies between tasks; its cache is gone

	second := env.NewWorker(worker.Options{Identity: "second"})
	registerApprove(t, second)
	env.RunWorker(second)
	if err := env.Client.SignalWorkflow(ctx, "approve", "", "approve", Approval{By: "grace", OK: true}); err != nil {
		t.Fatal(err)
	}
	// The task went to the dead worker's sticky queue; after the sticky
	// timeout it falls back to the task queue, where the second worker takes it.
	env.Clock.Advance(stickyTimeout)
	env.Engine.Settle()

	var got string
	if err := run.Get(ctx, &got); err != nil || got != "Hello, ada! Welcome aboard, grace." {
		t.Fatalf("result %q, %v", got, err)
	}
	if s := second.Stats(); s.FullReplays.Load() < 1 {
		t.Fatalf("second worker: %d full replays, want ≥ 1", s.FullReplays.Load())
	}
	// Each activity ran once: the replay did not call Greet again.
	evs := events(t, ctx, env.Client, "approve", run.RunID())
	if count(evs, history.TypeActivityStarted) != 2 {
		t.Fatalf("history %v", typesOf(evs))
	}
}

// ---- a 1,000-turn loop served from the sticky cache ----

func Echo(_ context.Context, i int) (int, error) { return i, nil }

// Turns runs n activities one after another: n+1 workflow tasks.
func Turns(ctx sdk.Context, n int) (int, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	sum := 0
	for i := range n {
		v, err := sdk.ExecuteActivity(ctx, Echo, i).Get(ctx)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

func TestThousandTurnsNeverReplayFromStart(t *testing.T) {
	ctx := testCtx(t)
	const n = 1000
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Turns)
	env.RegisterActivity(Echo)
	env.Start()

	run := start(t, ctx, env, "turns", Turns, n)
	var sum int
	if err := run.Get(ctx, &sum); err != nil || sum != n*(n-1)/2 {
		t.Fatalf("sum %d, %v", sum, err)
	}
	s := env.Worker.Stats()
	// Only the first task builds the run; every later one continues the
	// cached Execution with the new events alone.
	if s.FullReplays.Load() != 1 || s.CacheHits.Load() != n || s.WorkflowTasks.Load() != n+1 {
		t.Fatalf("%d workflow tasks: %d full replays, %d cache hits", s.WorkflowTasks.Load(), s.FullReplays.Load(), s.CacheHits.Load())
	}
}

// ApproveV2 is Approve with an audit step added behind GetVersion.
func ApproveV2(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	v := sdk.GetVersion(ctx, "audit-approver", sdk.DefaultVersion, 1)
	greeting, err := sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	a := sdk.GetSignalChannel[Approval](ctx, "approve").Receive(ctx)
	if v == 1 {
		if _, err := sdk.ExecuteActivity(ctx, Audit, a.By).Get(ctx); err != nil {
			return "", err
		}
		greeting += " (audited)"
	}
	welcome, err := sdk.ExecuteActivity(ctx, Welcome, a.By).Get(ctx)
	return greeting + " " + welcome, err
}

// A deploy of new code while a run waits: the new worker rebuilds the run
// from its history, GetVersion keeps it on the old path, and runs started
// after the deploy take the new one.
func TestDeployNewCodeMidRun(t *testing.T) {
	ctx := testCtx(t)
	const stickyTimeout = 5 * time.Second
	env := newEnv(t, testenv.Options{NoTimeSkipping: true,
		Engine: engine.Options{Defaults: engine.Defaults{StickyTimeout: stickyTimeout}}})
	registerApprove(t, env.Worker)
	env.Start()
	old := start(t, ctx, env, "deploy-old", Approve, "ada")
	done := waitEvent(t, ctx, env.Client, "deploy-old", old.RunID(), 0, isType(history.TypeActivityCompleted))
	waitEvent(t, ctx, env.Client, "deploy-old", old.RunID(), done.ID, isType(history.TypeWorkflowTaskCompleted))
	env.StopWorker()

	v2 := env.NewWorker(worker.Options{Identity: "v2"})
	must(t, v2.RegisterWorkflow(ApproveV2, sdk.RegisterOptions{Name: "Approve"}))
	for _, a := range []any{Greet, Welcome, Audit} {
		must(t, v2.RegisterActivity(a))
	}
	env.RunWorker(v2)
	for _, id := range []string{"deploy-old", "deploy-new"} {
		if id == "deploy-new" {
			start(t, ctx, env, id, "Approve", "ada")
		}
		if err := env.Client.SignalWorkflow(ctx, id, "", "approve", Approval{By: "grace", OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	env.Clock.Advance(stickyTimeout) // the old run's task leaves the stopped worker's sticky queue
	env.Engine.Settle()
	for id, want := range map[string]string{
		"deploy-old": "Hello, ada! Welcome aboard, grace.",
		"deploy-new": "Hello, ada! (audited) Welcome aboard, grace.",
	} {
		var got string
		if err := env.Client.GetWorkflow(ctx, id, "").Get(ctx, &got); err != nil || got != want {
			t.Fatalf("%s: %q, %v", id, got, err)
		}
	}
	if v2.Stats().WorkflowTaskFails.Load() != 0 {
		t.Fatal("the new code failed a workflow task")
	}
}
