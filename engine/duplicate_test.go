package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Duplicates once the run has closed, from the store. A duplicate proven
// while the run is open is scripted in engine/machine
// (TestStaleSuccessIsADuplicate).

// payLostThenRetried runs a SideEffect payment whose attempt 1 loses its
// lease; a person says it did not happen; attempt 2 (dispatched only once
// attempt 1 can no longer act) pays and completes. It returns both tasks.
func payLostThenRetried(t *testing.T, h *harness) (first, second *api.ActivityTask) {
	t.Helper()
	h.start("pay", "PayInvoice")
	h.complete(h.pollWFT("q"), schedule("1", "SendPayment", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	first = h.pollActivity("q")
	h.advance(time.Minute) // the lease of attempt 1 expires: outcome unknown, the run pauses
	if st := h.describe("pay").Info.Status; st != api.StatusPaused {
		t.Fatalf("status %s, want paused", st)
	}
	if _, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "pay", Resolution: history.ResolvedNotHappened,
		Identity: "clerk", Reason: "not at the provider"}); err != nil {
		t.Fatal(err)
	}
	// The next attempt waits until attempt 1 can no longer act: its lease
	// deadline plus the drift margin.
	h.settle()
	h.noActivity("q")
	h.advance(DefaultLeaseDriftMargin)
	second = h.pollActivity("q")
	if second.Attempt != 2 || second.IdempotencyKey != first.IdempotencyKey {
		t.Fatalf("retry: attempt %d key %s, want 2 and %s", second.Attempt, second.IdempotencyKey, first.IdempotencyKey)
	}
	h.completeActivity(second, `"pay_2"`)
	return first, second
}

// Once the action's run has closed, its history takes no more events: a
// duplicate is recorded on the action's ledger entry and the run's record
// (describe, list), and counted, also after a restart.
func TestStaleSuccessAfterTheRunClosedIsRecorded(t *testing.T) {
	h := newHarness(t)
	first, _ := payLostThenRetried(t, h)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	for range 2 {
		_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: first.TaskToken, Result: jsonPayload(`"pay_1"`),
			Identity: "frozen"})
		wantErr(t, err, api.ErrStaleAttempt)
	}
	le, err := h.eng.ledgerEntry(h.ctx(), "pay", first.IdempotencyKey)
	if err != nil || le.Duplicates != 1 || len(le.Reports) != 1 || !le.Reports[0].AfterClose || le.Reports[0].OtherAttempt != 2 {
		t.Fatalf("ledger entry %+v, %v; want one duplicate, recorded after close", le, err)
	}
	h.reopen()
	d := h.describe("pay")
	if d.Info.Duplicates != 1 || len(d.EffectReports) != 1 || !d.EffectReports[0].AfterClose {
		t.Fatalf("describe of the closed run: %+v, reports %+v", d.Info, d.EffectReports)
	}
	list, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{Status: api.StatusCompleted})
	if err != nil || len(list.Workflows) != 1 || list.Workflows[0].Duplicates != 1 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if s := h.eng.Stats(); s.DuplicateEffects != 1 {
		t.Fatalf("duplicates counted after a restart: %d, want 1", s.DuplicateEffects)
	}
	effects, err := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{DuplicatesOnly: true})
	if err != nil || len(effects.Effects) != 1 || effects.Effects[0].Duplicates != 1 {
		t.Fatalf("ListEffects: %+v, %v", effects, err)
	}
	h.wantConsistent()
}

// TestParentNoticeIsNotADuplicate: a cluster's pending parent notice
// (crossshard.go: "x" ‖ child workflow id ‖ run id, with a value) shares
// the duplicate index's key family; listing the duplicates skips it
// instead of reporting it as an index entry that names a missing ledger
// entry (a false alarm of damage).
func TestParentNoticeIsNotADuplicate(t *testing.T) {
	h := newHarness(t)
	b, err := api.MarshalMsgpack(&parentNotice{ParentWorkflowID: "parent", ParentRunID: "r1", InitiatedEventID: 5})
	if err != nil {
		t.Fatal(err)
	}
	child := history.RunRef{WorkflowID: "child", RunID: "c1"}
	if err := h.store.Commit(h.ctx(), &history.Batch{Puts: []history.Record{{Space: history.SpaceIndex, Key: outboxKey(child), Value: b}}}); err != nil {
		t.Fatal(err)
	}
	for _, req := range []*api.ListEffectsRequest{{DuplicatesOnly: true}, {DuplicatesOnly: true, WorkflowID: "child"}} {
		effects, err := h.eng.ListEffects(h.ctx(), req)
		if err != nil || len(effects.Effects) != 0 {
			t.Fatalf("ListEffects(%+v) with a parent notice stored: %+v, %v", req, effects, err)
		}
	}
}
