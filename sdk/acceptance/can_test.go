package acceptance_test

import (
	"context"
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
