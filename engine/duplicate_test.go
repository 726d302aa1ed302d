package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// A stale attempt that reports success after the action was completed by
// a later attempt proves the effect happened twice: it is refused and
// recorded in the run's history, or, once the run has closed, counted on the
// effects-ledger entry.
func TestStaleSuccessAfterTheActionClosedIsRecorded(t *testing.T) {
	h := newHarness(t)
	h.start("pay", "PayInvoice")
	h.complete(h.pollWFT("q"), schedule("1", "SendPayment", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	first := h.pollActivity("q")
	h.advance(time.Minute) // the lease of attempt 1 expires: outcome unknown, the run pauses
	if st := h.describe("pay").Info.Status; st != api.StatusPaused {
		t.Fatalf("status %s, want paused", st)
	}
	if _, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "pay", Resolution: history.ResolvedNotHappened,
		Identity: "clerk", Reason: "not at the provider"}); err != nil {
		t.Fatal(err)
	}
	second := h.pollActivity("q")
	if second.Attempt != 2 || second.IdempotencyKey != first.IdempotencyKey {
		t.Fatalf("retry: attempt %d key %s, want 2 and %s", second.Attempt, second.IdempotencyKey, first.IdempotencyKey)
	}
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: second.TaskToken, Result: jsonPayload(`"pay_2"`)}); err != nil {
		t.Fatal(err)
	}
	// Attempt 1 wakes up: it had paid after all.
	_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: first.TaskToken, Result: jsonPayload(`"pay_1"`), Identity: "frozen"})
	if !errors.Is(err, api.ErrStaleAttempt) {
		t.Fatalf("stale completion: %v, want ErrStaleAttempt", err)
	}
	var dup *history.ActivityDuplicateDetected
	for _, ev := range h.history("pay") {
		if d, ok := ev.Attrs.(*history.ActivityDuplicateDetected); ok {
			dup = d
		}
	}
	if dup == nil || dup.Attempt != 1 || dup.IdempotencyKey != first.IdempotencyKey || string(dup.Result.Data) != `"pay_1"` {
		t.Fatalf("duplicate event: %+v", dup)
	}

	// Once the run has closed, the proof goes to the ledger entry.
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: first.TaskToken, Result: jsonPayload(`"pay_1"`)}); !errors.Is(err, api.ErrStaleAttempt) {
		t.Fatalf("stale completion after close: %v", err)
	}
	le, err := h.eng.ledgerEntry(h.ctx(), "pay", first.IdempotencyKey)
	if err != nil || le == nil || le.Duplicates != 2 || le.State != LedgerCompleted || le.Attempts != 2 || len(le.Reports) != 2 ||
		le.Reports[0].AfterClose || !le.Reports[1].AfterClose {
		t.Fatalf("ledger entry %+v, %v; want completed after two attempts, with the duplicate reported before and after close", le, err)
	}
	// The closed run's record shows it too: describe, list, and the
	// counter, also after a restart.
	h.reopen()
	d := h.describe("pay")
	if d.Info.Duplicates != 2 || len(d.EffectReports) != 2 || !d.EffectReports[1].AfterClose {
		t.Fatalf("describe of the closed run: %+v, reports %+v", d.Info, d.EffectReports)
	}
	list, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{Status: api.StatusCompleted})
	if err != nil || len(list.Workflows) != 1 || list.Workflows[0].Duplicates != 2 {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if s := h.eng.Stats(); s.DuplicateEffects != 2 {
		t.Fatalf("duplicates counted after a restart: %d, want 2", s.DuplicateEffects)
	}
}
