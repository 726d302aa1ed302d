package acceptance_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// ---- hello ----

func Greet(_ context.Context, name string) (string, error) { return "Hello, " + name + "!", nil }

// Hello is the smallest agent: one activity, its result returned.
func Hello(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
}

func TestHello(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Hello)
	env.RegisterActivity(Greet)
	env.Start()

	run := start(t, ctx, env, "hello-1", Hello, "World")
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "Hello, World!" {
		t.Fatalf("result %q", got)
	}
	evs := events(t, ctx, env.Client, "hello-1", run.RunID())
	want := []string{"WorkflowStarted", "WorkflowTaskCompleted", "ActivityScheduled", "ActivityStarted", "ActivityCompleted",
		"WorkflowTaskCompleted", "WorkflowCompleted"}
	if got := typesOf(evs); !slices.Equal(got, want) {
		t.Fatalf("history\n got %v\nwant %v", got, want)
	}
	if a := evs[2].Attrs.(*history.ActivityScheduled); a.ActivityType != "Greet" || a.ActivityID != "1" || a.Options.TaskQueue != env.TaskQueue() {
		t.Fatalf("scheduled %+v", a)
	}
	d, err := env.Client.DescribeWorkflow(ctx, "hello-1", "")
	if err != nil || d.Info.Status != api.StatusCompleted || d.Info.WorkflowType != "Hello" {
		t.Fatalf("describe: %+v %v", d, err)
	}
}
