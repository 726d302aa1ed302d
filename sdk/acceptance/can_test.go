package acceptance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// LongAgent runs turns until the engine suggests continuing as new, then
// continues as new with its progress; it returns after total turns.
func LongAgent(ctx sdk.Context, done int) (int, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	for done < 30 {
		if sdk.GetInfo(ctx).ContinueAsNewSuggested {
			return 0, sdk.NewContinueAsNewError(ctx, LongAgent, done)
		}
		if _, err := sdk.ExecuteActivity(ctx, Echo, done).Get(ctx); err != nil {
			return 0, err
		}
		done++
	}
	return done, nil
}

// The continue-as-new suggestion is derived from the history the decision
// saw, so a run that acted on it replays without a nondeterminism error.
func TestContinueAsNewSuggestionReplays(t *testing.T) {
	env := newEnv(t, testenv.Options{Engine: engine.Options{Limits: engine.Limits{SuggestContinueAsNewAt: 20}}})
	env.RegisterWorkflow(LongAgent)
	env.RegisterActivity(Echo)
	env.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var done int
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartOptions{ID: "long", TaskQueue: env.TaskQueue()}, LongAgent, 0, &done)
	if err != nil || done != 30 {
		t.Fatalf("result %d, %v", done, err)
	}
	evs, err := env.Client.GetHistory(ctx, "long", run.RunID())
	if err != nil {
		t.Fatal(err)
	}
	if evs[len(evs)-1].Type() != history.TypeWorkflowContinuedAsNew {
		t.Fatalf("the first run should have continued as new, it ended with %s", evs[len(evs)-1].Type())
	}
	r := worker.NewReplayer(worker.ReplayerOptions{SuggestContinueAsNewAt: 20})
	if err := r.RegisterWorkflow(LongAgent); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplayHistory(history.RunRef{WorkflowID: "long", RunID: run.RunID()}, evs, worker.ReplayOptions{}); err != nil {
		t.Fatalf("replay of a run that continued as new on the suggestion: %v", err)
	}
}

// Weigh runs activities whose results are 1 KiB, passing each decision's
// HistorySize as the next activity's input (so a replay that measured
// another size would not match the recorded command), until the size
// suggestion says to continue as new; the next run returns the sizes its
// first decision saw.
func Weigh(ctx sdk.Context, carried int64) ([]int64, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	var sizes []int64
	for {
		info := sdk.GetInfo(ctx)
		sizes = append(sizes, info.HistorySize)
		if carried > 0 {
			return sizes, nil
		}
		if sdk.ContinueAsNewSuggested(ctx) {
			return nil, sdk.NewContinueAsNewError(ctx, Weigh, info.HistorySize)
		}
		if _, err := sdk.ExecuteActivity(ctx, Kilobyte, info.HistorySize).Get(ctx); err != nil {
			return nil, err
		}
	}
}

// Kilobyte returns 1 KiB.
func Kilobyte(_ context.Context, _ int64) (string, error) { return strings.Repeat("k", 1024), nil }

// The history size grows with what the events hold, is what the next
// decision saw on every replay, and the size suggestion (here 20 KB, the
// length one out of reach) turns continue-as-new on.
func TestHistorySizeSuggestionReplays(t *testing.T) {
	limits := engine.Limits{SuggestContinueAsNewAt: 1 << 40, SuggestContinueAsNewBytes: 20_000}
	env := newEnv(t, testenv.Options{Engine: engine.Options{Limits: limits}})
	env.RegisterWorkflow(Weigh)
	env.RegisterActivity(Kilobyte)
	env.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var sizes []int64
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartOptions{ID: "weigh", TaskQueue: env.TaskQueue()}, Weigh, int64(0), &sizes)
	if err != nil || len(sizes) != 1 || sizes[0] <= 0 || sizes[0] > 1000 {
		t.Fatalf("the new run's first decision saw %v, %v", sizes, err)
	}
	evs, err := env.Client.GetHistory(ctx, "weigh", run.RunID())
	if err != nil {
		t.Fatal(err)
	}
	last := evs[len(evs)-1]
	if last.Type() != history.TypeWorkflowContinuedAsNew {
		t.Fatalf("the first run should have continued as new, it ended with %s", last.Type())
	}
	var carried int64
	if err := sdk.DefaultConverter().FromPayload(last.Attrs.(*history.WorkflowContinuedAsNew).Input, &carried); err != nil {
		t.Fatal(err)
	}
	if carried < 20_000 || carried > 24_000 || count(evs, history.TypeActivityCompleted) < 15 {
		t.Fatalf("continued as new at %d bytes after %d activities", carried, count(evs, history.TypeActivityCompleted))
	}
	r := worker.NewReplayer(worker.ReplayerOptions{SuggestContinueAsNewAt: 1 << 40, SuggestContinueAsNewBytes: 20_000})
	if err := r.RegisterWorkflow(Weigh); err != nil {
		t.Fatal(err)
	}
	if err := r.ReplayHistory(history.RunRef{WorkflowID: "weigh", RunID: run.RunID()}, evs, worker.ReplayOptions{}); err != nil {
		t.Fatalf("replay of a run that passed its history size along: %v", err)
	}
}
