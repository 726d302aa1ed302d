package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

func TestOneActivityWorkflow(t *testing.T) {
	h := newHarness(t)
	h.start("wf-1", "Hello")
	task := h.pollWFT("q")
	if task.FirstEventID != 1 || len(task.Events) != 1 || task.Events[0].Type() != history.TypeWorkflowStarted {
		t.Fatalf("first task: %+v", task)
	}
	h.complete(task, schedule("1", "Greet", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	act := h.pollActivity("q")
	if act.ActivityType != "Greet" || act.Attempt != 1 || string(act.Input.Data) != `{"invoice":"INV-9"}` {
		t.Fatalf("activity task: %+v", act)
	}
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: act.TaskToken, Result: jsonPayload(`"hi"`)}); err != nil {
		t.Fatal(err)
	}
	task = h.pollWFT("q")
	h.complete(task, completeWF(`"done"`))
	res, err := h.eng.GetResult(h.ctx(), &api.GetResultRequest{WorkflowID: "wf-1"})
	if err != nil || res.Status != api.StatusCompleted || string(res.Result.Data) != `"done"` {
		t.Fatalf("result %+v %v", res, err)
	}
	want := "1 WorkflowStarted\n2 WorkflowTaskCompleted\n3 ActivityScheduled\n4 ActivityStarted\n5 ActivityCompleted\n6 WorkflowTaskCompleted\n7 WorkflowCompleted\n"
	if got := types(h.history("wf-1")); got != want {
		t.Fatalf("history:\n%s\nwant:\n%s", got, want)
	}
	// A stale completion of the finished task is refused with a typed error.
	_, err = h.eng.CompleteWorkflowTask(h.ctx(), &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken})
	if !errors.Is(err, api.ErrStaleTask) {
		t.Fatalf("stale completion: %v", err)
	}
}
