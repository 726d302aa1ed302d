package sdk_test

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

func Greet(_ context.Context, name string) (string, error) { return "Hello, " + name, nil }

// Hello is a workflow: one activity, its result returned.
func Hello(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
}

// Example drives an Execution the way a worker does: each workflow task's
// new events in, the decision's commands out.
func Example() {
	reg := sdk.NewRegistry()
	if err := reg.RegisterWorkflow(Hello); err != nil {
		panic(err)
	}
	if err := reg.RegisterActivity(Greet); err != nil {
		panic(err)
	}
	conv := sdk.DefaultConverter()
	input, _ := conv.ToPayload("World")

	// The first task carries the history from event 1.
	task := &api.WorkflowTask{WorkflowID: "hello-1", RunID: "run-1", WorkflowType: "Hello", TaskQueue: "agents",
		FirstEventID: 1, Events: []history.Event{
			{ID: 1, Attrs: &history.WorkflowStarted{WorkflowType: "Hello", TaskQueue: "agents", Input: input}},
		}}
	exec, err := sdk.NewExecution(reg, task, sdk.ExecutionOptions{})
	if err != nil {
		panic(err)
	}
	defer exec.Close()
	cmds, err := exec.ProcessTask(task)
	if err != nil {
		panic(err)
	}
	fmt.Println(cmds[0].Type, cmds[0].ScheduleActivity.ActivityType)

	// The engine recorded the decision and, later, the activity's result;
	// the next task carries only the new events.
	result, _ := conv.ToPayload("Hello, World")
	cmds, err = exec.ProcessTask(&api.WorkflowTask{WorkflowID: "hello-1", RunID: "run-1", WorkflowType: "Hello",
		FirstEventID: exec.LastEventID() + 1, Events: []history.Event{
			{ID: 2, Attrs: &history.WorkflowTaskCompleted{SeenEventID: 1}},
			{ID: 3, Attrs: &history.ActivityScheduled{ActivityID: "1", ActivityType: "Greet", Input: cmds[0].ScheduleActivity.Input}},
			{ID: 4, Attrs: &history.ActivityCompleted{ScheduledEventID: 3, Result: result}},
		}})
	if err != nil {
		panic(err)
	}
	var out string
	_ = conv.FromPayload(cmds[0].CompleteWorkflow.Result, &out)
	fmt.Println(cmds[0].Type, out)
	// Output:
	// ScheduleActivity Greet
	// CompleteWorkflow Hello, World
}
