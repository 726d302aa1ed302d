package engine

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// A task handed to a poller that had already left goes straight back on its
// queue: a workflow task instead of waiting for its task timeout, a Read
// attempt instead of waiting for its lease.
func TestTaskHandedToAPollerThatLeftGoesBack(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "Agent")

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the poller has already gone when the task reaches it
	item, ok := h.eng.wftQ.Poll(context.Background(), "q")
	if !ok {
		t.Fatal("no workflow task queued")
	}
	task, err := h.eng.dispatchWFT(ctx, item, "gone")
	if err != nil || task == nil {
		t.Fatalf("dispatch: %v %v", task, err)
	}
	h.eng.handBackWFT(task)
	again := h.pollWFT("q") // at once, not after the 10 s task timeout
	if again.FirstEventID != 1 {
		t.Fatalf("handed-back task starts at %d", again.FirstEventID)
	}
	h.complete(again, schedule("1", "Read", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour}))

	actItem, ok := h.eng.actQ.Poll(context.Background(), "q")
	if !ok {
		t.Fatal("no activity task queued")
	}
	act, err := h.eng.dispatchActivity(ctx, actItem, "gone", nil)
	if err != nil || act == nil {
		t.Fatalf("dispatch activity: %v %v", act, err)
	}
	h.eng.handBackActivity(actItem, act.LeaseEpoch)
	got := h.pollActivity("q") // at once, not after the hour-long lease
	if got.Attempt != 1 {
		t.Fatalf("handed-back attempt %d, want the same attempt 1", got.Attempt)
	}
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: got.TaskToken}); err != nil {
		t.Fatal(err)
	}
}
