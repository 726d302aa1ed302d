package clienttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// AskApprovals runs two SideEffect "RequestApproval" activities that
// complete asynchronously (ids "first" and "second"), and returns their
// answers joined.
func AskApprovals(ctx sdk.Context, what string) (string, error) {
	var answers string
	for _, id := range []string{"first", "second"} {
		actx := sdk.WithActivityOptions(ctx, sdk.ActivityOptions{ActivityID: id, StartToCloseTimeout: time.Hour,
			RetryPolicy: &sdk.RetryPolicy{MaximumAttempts: 1}})
		answer, err := sdk.ExecuteActivityByName[string](actx, "RequestApproval", what+" "+id).Get(ctx)
		if err != nil {
			return answers, err
		}
		answers += answer + ";"
	}
	return answers, nil
}

// testAsyncCompletion: an activity returns activities.ErrResultPending
// after handing its task token over; the client completes it by the token,
// the next one by its ids, after heartbeating it; a second completion of
// either is refused with a typed error.
func testAsyncCompletion(t *testing.T, s *suite) {
	tokens := make(chan []byte, 2)
	request := func(ctx context.Context, what string) (string, error) {
		info := activities.GetInfo(ctx)
		tok, err := activities.ParseTaskToken(info.TaskTokenString())
		if err != nil || string(tok) != string(info.TaskToken) {
			return "", errors.New("the task token's printable form does not read back")
		}
		tokens <- info.TaskToken
		return "", activities.ErrResultPending
	}
	s.startWorker(func(w *worker.Worker) error { return w.RegisterWorkflow(AskApprovals) },
		func(w *worker.Worker) error {
			return w.RegisterActivity(request, activities.Options{Name: "RequestApproval", Effect: activities.SideEffect})
		})
	r := s.start(s.opts("approve"), AskApprovals, "refund")
	var tok []byte
	select {
	case tok = <-tokens:
	case <-s.ctx.Done():
		t.Fatal("the activity never ran")
	}
	if err := s.c.CompleteActivity(s.ctx, client.ByToken(tok), "yes"); err != nil {
		t.Fatalf("complete by token: %v", err)
	}
	wantCode(t, "a second, different completion by token", s.c.CompleteActivity(s.ctx, client.ByToken(tok), "no"), api.ErrStaleAttempt)
	select {
	case <-tokens:
	case <-s.ctx.Done():
		t.Fatal("the second activity never ran")
	}
	if cancel, err := s.c.HeartbeatActivity(s.ctx, client.ByID("approve", "", "second"), "still waiting"); err != nil || cancel {
		t.Fatalf("heartbeat by id: %v, %v", cancel, err)
	}
	d := s.describe("approve", "")
	if len(d.PendingActivities) != 1 || d.PendingActivities[0].ActivityID != "second" {
		t.Fatalf("pending: %+v", d.PendingActivities)
	}
	if err := s.c.CompleteActivity(s.ctx, client.ByID("approve", "", "second"), "ok"); err != nil {
		t.Fatalf("complete by id: %v", err)
	}
	var got string
	if err := r.Get(s.ctx, &got); err != nil || got != "yes;ok;" {
		t.Fatalf("result %q, %v", got, err)
	}
	wantCode(t, "a completion by id of a closed run's activity", s.c.CompleteActivity(s.ctx, client.ByID("approve", "", "second"), "ok"), api.ErrNotFound)
}
