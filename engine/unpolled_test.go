package engine

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// wantUnpolled checks describe's Unpolled for id: one line per queue, in
// order; none when want is empty.
func (h *harness) wantUnpolled(id string, want ...string) {
	h.t.Helper()
	got := h.describe(id).Unpolled
	if len(got) != len(want) {
		h.t.Fatalf("unpolled %+v, want %q", got, want)
	}
	for i, u := range got {
		if u.Message != want[i] {
			h.t.Errorf("unpolled %d: %q, want %q", i, u.Message, want[i])
		}
	}
}

// TestDescribeSaysNoWorkerPollsTheQueue: a run whose task waits on a task
// queue no worker polls says so in describe — never polled since the
// engine started, or not for how long — for workflow and activity tasks
// apart, and not while a worker polled within UnpolledAfter.
func TestDescribeSaysNoWorkerPollsTheQueue(t *testing.T) {
	h := newHarness(t)
	h.start("w", "Flow")
	h.wantUnpolled("w") // the engine started just now: it cannot know yet

	h.clk.Advance(40 * time.Second)
	h.wantUnpolled("w", `no worker has ever polled task queue "q" for workflow tasks (since the engine started 40 s ago)`)
	u := h.describe("w").Unpolled[0]
	if u.TaskQueue != "q" || u.Kind != "workflow" || !u.LastPoll.IsZero() || !u.Since.Equal(testStart) {
		t.Fatalf("unpolled %+v", u)
	}

	// A worker takes the workflow task and schedules an activity on a
	// queue of its own: the workflow task no longer waits, the activity
	// does, on a queue never polled.
	task := h.pollWFT("q")
	h.complete(task, schedule("1", "Charge", history.Read, history.ActivityOptions{TaskQueue: "payments", StartToCloseTimeout: time.Minute,
		RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 5}}))
	h.wantUnpolled("w", `no worker has ever polled task queue "payments" for activity tasks (since the engine started 40 s ago)`)

	// A worker takes the attempt and fails it: the retry waits on a queue
	// last polled when the attempt was taken.
	h.failActivity(h.pollActivity("payments"), history.Failure{Message: "provider down"})
	h.advance(5 * time.Second) // the retry is due: the attempt waits again
	if a := h.describe("w").PendingActivities; len(a) != 1 || a[0].State != api.ActivityStateScheduled {
		t.Fatalf("pending %+v, want the retry waiting", a)
	}
	h.wantUnpolled("w") // polled 5 s ago
	h.clk.Advance(90 * time.Second)
	h.wantUnpolled("w", `no worker has polled task queue "payments" for activity tasks in 95 s`)
	if u := h.describe("w").Unpolled[0]; !u.LastPoll.Equal(testStart.Add(40*time.Second)) || u.Kind != "activity" {
		t.Fatalf("unpolled %+v, want the last poll at %s", u, testStart.Add(40*time.Second))
	}

	// A poll of the workflow queue says nothing of the activity queue.
	h.pollAbandoned("q", false)
	h.wantUnpolled("w", `no worker has polled task queue "payments" for activity tasks in 95 s`)
	h.pollActivity("payments")
	h.wantUnpolled("w")
}

// pollAbandoned polls queue for a kind of task with a context ended at
// once: a poll that finds nothing.
func (h *harness) pollAbandoned(queue string, activity bool) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if activity {
		_, _ = h.eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "idle"})
		return
	}
	_, _ = h.eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "idle"})
}
