package main

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// askTokens holds the printable task token of each AskApproval attempt, by
// workflow id.
var askTokens sync.Map

// AskApproval hands its task token over and returns ErrResultPending: a
// person completes it with `cairn activity complete`.
func AskApproval(ctx context.Context, what string) (string, error) {
	info := activities.GetInfo(ctx)
	askTokens.Store(info.WorkflowID, info.TaskTokenString())
	return "", activities.ErrResultPending
}

// Await runs AskApproval (activity id "ask") and returns its answer.
func Await(ctx sdk.Context, what string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{ActivityID: "ask", StartToCloseTimeout: time.Hour,
		RetryPolicy: &sdk.RetryPolicy{MaximumAttempts: 1}})
	return sdk.ExecuteActivity(ctx, AskApproval, what).Get(ctx)
}

// registerAwait registers Await and its activity on the CLI tests' worker.
func registerAwait(w *worker.Worker) error {
	if err := w.RegisterWorkflow(Await); err != nil {
		return err
	}
	return w.RegisterActivity(AskApproval, activities.Options{Effect: activities.Idempotent})
}

// startAwait starts Await as id and waits until its activity runs.
func (s *testServer) startAwait(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := s.c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: testQueue}, "Await", "refund")
	if err != nil {
		t.Fatal(err)
	}
	from := int64(1)
	for {
		resp, err := s.c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, RunID: r.RunID(), FromEventID: from, WaitNewEvents: true})
		if err != nil {
			t.Fatalf("waiting for %s's activity: %v", id, err)
		}
		for _, ev := range resp.Events {
			if _, ok := ev.Attrs.(*history.ActivityStarted); ok {
				return
			}
		}
		from += int64(len(resp.Events))
	}
}

// The CLI completes an activity that returned ErrResultPending by its
// printable token, and by ids; describe shows the activity id to copy;
// a second completion is refused.
func TestActivityCompleteFromTheCLI(t *testing.T) {
	s := newTestServer(t, true)
	s.startAwait(t, "await-tok")
	s.startAwait(t, "await-id")
	if out := s.must(t, "workflow", "describe", "await-id"); !strings.Contains(out, " ask ") {
		t.Fatalf("describe does not show the activity id:\n%s", out)
	}
	tok, ok := askTokens.Load("await-tok")
	if !ok {
		t.Fatal("no token handed over")
	}
	out := s.must(t, "activity", "complete", tok.(string), "--result", `"approved"`, "--json")
	var o activityOut
	if err := json.Unmarshal([]byte(out), &o); err != nil || o.Report != "completed" || o.TaskToken != tok {
		t.Fatalf("--json: %s (%v)", out, err)
	}
	s.must(t, "activity", "heartbeat", "--workflow-id", "await-id", "--activity-id", "ask", "--details", `"pinged"`)
	s.must(t, "activity", "complete", "--workflow-id", "await-id", "--activity-id", "ask", "--result", `"ok"`)
	for id, want := range map[string]string{"await-tok": "approved", "await-id": "ok"} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var got string
		err := s.c.GetWorkflow(ctx, id, "").Get(ctx, &got)
		cancel()
		if err != nil || got != want {
			t.Fatalf("%s: %q, %v; want %q", id, got, err, want)
		}
	}
	_, errs, code := s.run(t, "", "activity", "complete", tok.(string), "--result", `"no"`)
	if code != 1 || !strings.Contains(errs, "stale") {
		t.Fatalf("a second completion by token: exit %d, %s", code, errs)
	}
	_, errs, code = s.run(t, "", "activity", "complete", "--workflow-id", "await-id", "--activity-id", "ask")
	if code != 1 || !strings.Contains(errs, "no open run") {
		t.Fatalf("a completion by id of a closed activity: exit %d, %s", code, errs)
	}
	_, errs, code = s.run(t, "", "activity", "complete", "not a token!")
	if code != 2 {
		t.Fatalf("a malformed token: exit %d, %s", code, errs)
	}
}
