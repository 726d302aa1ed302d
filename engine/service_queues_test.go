package engine

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
)

// A poller is remembered with the (engine clock) time of its last poll,
// shown as polling while its poll waits, and forgotten PollerRetention
// after its last poll ended.
func TestPollersAreRememberedThenForgotten(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.eng.PollActivityTask(done, &api.PollActivityTaskRequest{TaskQueue: "q", Identity: "w1"}); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(time.Minute)
	describe := func() api.TaskQueueInfo {
		t.Helper()
		resp, err := h.eng.DescribeTaskQueue(ctx, &api.DescribeTaskQueueRequest{TaskQueue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Queue
	}
	q := describe()
	if len(q.ActivityPollers) != 1 || q.ActivityPollers[0].Identity != "w1" || !q.ActivityPollers[0].LastSeen.Equal(testStart) ||
		q.ActivityPollers[0].Polling != 0 || len(q.WorkflowPollers) != 0 {
		t.Fatalf("after one poll: %+v", q)
	}

	// A waiting poll is shown as polling, seen now.
	pctx, stop := context.WithCancel(ctx)
	polled := make(chan error, 1)
	go func() {
		_, err := h.eng.PollWorkflowTask(pctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w2"})
		polled <- err
	}()
	for h.eng.wftQ.Waiting("q") == 0 { // parked: its poll began
		runtime.Gosched()
	}
	q = describe()
	if len(q.WorkflowPollers) != 1 || q.WorkflowPollers[0].Polling != 1 || !q.WorkflowPollers[0].LastSeen.Equal(h.clk.Now()) {
		t.Fatalf("while w2 polls: %+v", q)
	}
	stop()
	if err := <-polled; err != nil {
		t.Fatal(err)
	}

	h.clk.Advance(api.PollerRetention)
	q = describe()
	if len(q.ActivityPollers) != 0 || len(q.WorkflowPollers) != 1 {
		t.Fatalf("w1 idle past the retention, w2 just within: %+v", q)
	}
	h.clk.Advance(time.Second)
	if q = describe(); len(q.WorkflowPollers) != 0 {
		t.Fatalf("both idle past the retention: %+v", q)
	}
	list, err := h.eng.ListTaskQueues(ctx, &api.ListTaskQueuesRequest{})
	if err != nil || len(list.Queues) != 0 {
		t.Fatalf("ListTaskQueues with every poller forgotten and no backlog: %+v %v", list, err)
	}
}
