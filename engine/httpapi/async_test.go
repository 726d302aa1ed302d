package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// An activity completed asynchronously by a person with curl: by its ids,
// in JSON; a second completion is not_found.
func TestAsyncCompletionOverJSON(t *testing.T) {
	eng := openEngine(t)
	srv := newTestServer(t, NewHandler(eng, Options{Token: token}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "sign-7", WorkflowType: "Sign", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v, %v", wft, err)
	}
	_, err = eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Commands: []api.Command{{
		Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1", ActivityType: "RequestSignature",
			Effect: history.Idempotent, Options: history.ActivityOptions{StartToCloseTimeout: time.Hour}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if at, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q"}); err != nil || at.Task == nil {
		t.Fatalf("poll activity: %+v, %v", at, err) // the worker returned ErrResultPending
	}
	body := []byte(`{"WorkflowID":"sign-7","ActivityID":"1","Result":{"encoding":"json","data":"InNpZ25lZCI="},"Identity":"ada"}`)
	if r := do(t, srv, "POST", Prefix+"CompleteActivity", body, jsonBody...); r.status != 200 {
		t.Fatalf("complete by ids: %d %q", r.status, r.body)
	}
	if r := do(t, srv, "POST", Prefix+"CompleteActivity", body, jsonBody...); r.status != 404 || r.errorBody(t).Code != api.CodeNotFound {
		t.Fatalf("a second completion: %d %q", r.status, r.body)
	}
	h, err := eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "sign-7"})
	if err != nil {
		t.Fatal(err)
	}
	done, ok := h.Events[len(h.Events)-1].Attrs.(*history.ActivityCompleted)
	if !ok || string(done.Result.Data) != `"signed"` || done.Identity != "ada" {
		t.Fatalf("last event %+v", h.Events[len(h.Events)-1])
	}
}
