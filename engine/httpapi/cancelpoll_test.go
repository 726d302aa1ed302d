package httpapi

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
)

// lateTask is a service whose activity poll hands a task out only once its
// caller has gone: the moment a cluster's fanned-out poll is stopped just
// as another server handed it a task.
type lateTask struct {
	stubService
	polled chan struct{}
}

func (s *lateTask) PollActivityTask(ctx context.Context, _ *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	close(s.polled)
	<-ctx.Done()
	return &api.PollActivityTaskResponse{Task: &api.ActivityTask{TaskToken: []byte("late"), ActivityType: "Echo"}}, nil
}

// TestCanceledPollKeepsItsTask: a poll canceled by its caller still returns
// the task the server answered with, rather than dropping it (a dropped
// task is dispatched and nobody runs it: it waits out its lease).
func TestCanceledPollKeepsItsTask(t *testing.T) {
	svc := &lateTask{polled: make(chan struct{})}
	srv := newTestServer(t, NewHandler(svc, Options{}))
	rs, err := client.NewRemoteService(srv.URL, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-svc.polled
		cancel()
	}()
	done := make(chan struct{})
	var resp *api.PollActivityTaskResponse
	go func() {
		defer close(done)
		resp, err = rs.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q"})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the canceled poll did not return")
	}
	if err != nil || resp == nil || resp.Task == nil || string(resp.Task.TaskToken) != "late" {
		t.Fatalf("a canceled poll answered with a task returned %+v, %v: the task is dropped", resp, err)
	}
}
