package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

var billDecl = []api.ActivityDeclaration{{ActivityType: "Bill", Effect: history.SideEffect, BusinessKey: true, Reconcile: true}}

// pollDeclaring polls queue as a worker that declares ds.
func (h *harness) pollDeclaring(queue string, ds []api.ActivityDeclaration) *api.ActivityTask {
	h.t.Helper()
	resp, err := h.eng.PollActivityTask(h.ctx(), &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "payments", Activities: ds})
	if err != nil || resp.Task == nil {
		h.t.Fatalf("poll %s: %+v, %v", queue, resp, err)
	}
	return resp.Task
}

func (h *harness) answerKey(task *api.ActivityTask, material string) {
	h.t.Helper()
	if !task.KeyTask {
		h.t.Fatalf("task %+v, want a key task", task)
	}
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: task.TaskToken, KeyMaterial: []byte(material),
		Identity: "payments"}); err != nil {
		h.t.Fatal(err)
	}
}

// Point 7: the declaration of the worker that runs an activity applies at
// schedule time once the engine knows it (it survives a restart), and at
// the latest at dispatch, before any intent is recorded. Keys with a
// business key are assigned in schedule order whatever order the key tasks
// answer in: occurrence 1 is the first schedule.
func TestDeclarationsDecideClassAndKey(t *testing.T) {
	h := newHarness(t)
	bill := func(id, invoice string) api.Command {
		c := schedule(id, "Bill", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute})
		c.ScheduleActivity.Input = jsonPayload(`{"invoice":"` + invoice + `","n":"` + id + `"}`)
		return c
	}

	// Not declared yet: scheduled as the workflow's worker says (Read),
	// upgraded when a declaring worker takes it.
	h.start("early", "W")
	h.complete(h.pollWFT("q"), bill("1", "INV-1"))
	h.answerKey(h.pollDeclaring("q", billDecl), "INV-1")
	a := h.pollDeclaring("q", billDecl)
	if a.KeyTask || a.Effect != history.SideEffect || a.IdempotencyKey != IdempotencyKey("early", "Bill", []byte("INV-1"), 1) {
		t.Fatalf("after the key task: %+v", a)
	}
	evs := h.history("early")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityKeyed ActivityStarted")
	h.completeActivity(a, `"billed"`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))

	// Declared now (and after a restart): applied at schedule time; two
	// bills under one business key get occurrences 1 and 2 in schedule
	// order although the key tasks answer in the other order.
	h.reopen()
	h.start("two", "W")
	h.complete(h.pollWFT("q"), bill("1", "INV-2"), bill("2", "INV-2"))
	s, _ := find[*history.ActivityScheduled](t, h.history("two"))
	if s.Effect != history.SideEffect || s.IdempotencyKey != "" || !s.HasReconcile {
		t.Fatalf("scheduled %+v, want the declared class and lookup, the key pending", s)
	}
	k1, k2 := h.pollDeclaring("q", billDecl), h.pollDeclaring("q", billDecl)
	if k1.ScheduledEventID > k2.ScheduledEventID {
		k1, k2 = k2, k1
	}
	h.answerKey(k2, "INV-2") // the second schedule answers first: it waits for the first
	h.noActivity("q")
	h.answerKey(k1, "INV-2")
	keys := map[int64]string{}
	for _, ev := range h.history("two") {
		if k, ok := ev.Attrs.(*history.ActivityKeyed); ok {
			keys[k.ScheduledEventID] = k.IdempotencyKey
		}
	}
	if keys[k1.ScheduledEventID] != IdempotencyKey("two", "Bill", []byte("INV-2"), 1) ||
		keys[k2.ScheduledEventID] != IdempotencyKey("two", "Bill", []byte("INV-2"), 2) {
		t.Fatalf("keys %v: want occurrence 1 for event %d and 2 for event %d", keys, k1.ScheduledEventID, k2.ScheduledEventID)
	}
	for range 2 {
		if at := h.pollDeclaring("q", billDecl); at.KeyTask || at.IdempotencyKey == "" {
			t.Fatalf("attempt %+v", at)
		}
	}
	h.wantConsistent()
}

// TestKeyNoLongerWaitsForAFailedPredecessor: keys with a business key go
// out in schedule order, so a later Bill whose key material is known waits
// for an earlier one whose key task has not answered. When that earlier
// one leaves the run unkeyed — here its key task fails for good; a timeout
// or a cancel leaves through the same finishActivity — the later one gets its key (occurrence 1: the one that left never
// had a key) and is dispatched. It used to wait for ever.
func TestKeyNoLongerWaitsForAFailedPredecessor(t *testing.T) {
	bill := func(id, invoice string, o history.ActivityOptions) api.Command {
		c := schedule(id, "Bill", history.Read, o)
		c.ScheduleActivity.Input = jsonPayload(`{"invoice":"` + invoice + `","n":"` + id + `"}`)
		return c
	}
	minute := history.ActivityOptions{StartToCloseTimeout: time.Minute}
	h := newHarness(t)
	h.start("boot", "W") // the engine learns the declaration
	h.complete(h.pollWFT("q"), bill("0", "INV-0", minute))
	h.answerKey(h.pollDeclaring("q", billDecl), "INV-0")
	h.completeActivity(h.pollDeclaring("q", billDecl), `"billed"`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))

	h.start("two", "W")
	h.complete(h.pollWFT("q"), bill("1", "INV-2", minute), bill("2", "INV-2", minute))
	k1, k2 := h.pollDeclaring("q", billDecl), h.pollDeclaring("q", billDecl)
	if k1.ScheduledEventID > k2.ScheduledEventID {
		k1, k2 = k2, k1
	}
	h.answerKey(k2, "INV-2") // the later one's material is known; it waits for the earlier one
	if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: k1.TaskToken,
		Failure: history.Failure{Message: "business key error"}, Identity: "payments"}); err != nil {
		t.Fatal(err)
	}
	a := h.pollDeclaring("q", billDecl)
	if a.KeyTask || a.ScheduledEventID != k2.ScheduledEventID || a.IdempotencyKey != IdempotencyKey("two", "Bill", []byte("INV-2"), 1) {
		t.Fatalf("after the earlier one failed: %+v", a)
	}
}
