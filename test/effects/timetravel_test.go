//go:build unix

package effects_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// Time travel with real worker processes and a provider that does not
// deduplicate: every charge it takes is a real second payment. A reset
// or a fork must charge exactly what a person approved.

// PayInvoiceV2 is PayInvoice as a changed agent decides (a new prompt, a
// new model): it pays one more than asked. Workers with Variant "v2"
// register it under PayInvoice's name.
func PayInvoiceV2(ctx sdk.Context, o Order) (Outcome, error) {
	o.Amount++
	return PayInvoice(ctx, o)
}

// paidAndWaiting runs the agent until it paid INV-9 (once) and waits for
// the "ship" signal.
func paidAndWaiting(t *testing.T, e *env, id string) client.Run {
	t.Helper()
	o := inv
	o.WaitSignal = true
	run := e.start(id, o)
	done := e.waitEvent(run, "the payment", is(history.TypeActivityCompleted))
	e.waitEvent(run, "the decision after it", after(done.ID, history.TypeWorkflowTaskCompleted))
	e.wantPayments(1)
	return run
}

func ship(t *testing.T, c client.Client, id, runID string) {
	t.Helper()
	if err := c.SignalWorkflow(context.Background(), id, runID, "ship", "go"); err != nil {
		t.Fatal(err)
	}
}

// TestResetPastPaymentChargesOnce: a reset to before the payment runs
// the agent again; the payment is answered from the ledger and the run
// completes with the first run's receipt.
func TestResetPastPaymentChargesOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.worker("w1", workerCfg{Class: history.SideEffect})
	base := paidAndWaiting(t, e, "tt-reset")
	r, err := e.c.ResetWorkflow(context.Background(), api.ResetWorkflowRequest{WorkflowID: "tt-reset", ToFirstTask: true, Reason: "new prompt"})
	if err != nil {
		t.Fatal(err)
	}
	e.waitEvent(e.c.GetWorkflow(context.Background(), "tt-reset", r.RunID), "the answer", is(history.TypeActivityDeduplicated))
	ship(t, e.c, "tt-reset", r.RunID)
	out := result(t, e.c.GetWorkflow(context.Background(), "tt-reset", r.RunID))
	ps := e.wantPayments(1)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] {
		t.Fatalf("outcome %+v, want the first run's receipt %+v", out, ps[0])
	}
	d, err := e.c.DescribeWorkflow(context.Background(), "tt-reset", base.RunID())
	if err != nil || d.Info.Status != api.StatusTerminated || d.Info.ResetRunID != r.RunID {
		t.Fatalf("base run: %+v %v", d, err)
	}
}

// TestForkChargesOnlyWhatAPersonApproved: a fork of a paid run, at a
// point before the payment. With the same code the payment is answered
// from the base's ledger; with changed code (another amount) it is held
// until a person performs it — then, and only then, the provider charges.
func TestForkChargesOnlyWhatAPersonApproved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w1 := e.worker("w1", workerCfg{Class: history.SideEffect})
	w2 := e.worker("w2", workerCfg{Class: history.SideEffect, Variant: "v2", Queue: "agents-v2"})
	paidAndWaiting(t, e, "tt-base")
	ctx := context.Background()

	same, err := e.c.ForkWorkflow(ctx, api.ForkWorkflowRequest{WorkflowID: "tt-base", AtEventID: 2, NewWorkflowID: "tt-same"})
	if err != nil {
		t.Fatal(err)
	}
	sameRun := e.c.GetWorkflow(ctx, "tt-same", same.RunID)
	ans := e.waitEvent(sameRun, "the answer", is(history.TypeActivityDeduplicated)).Attrs.(*history.ActivityDeduplicated)
	if ans.OriginalWorkflowID != "tt-base" {
		t.Fatalf("answer %+v", ans)
	}
	ship(t, e.c, "tt-same", "")
	if out := result(t, sameRun); len(out.Receipts) != 1 || out.Receipts[0].Amount != inv.Amount {
		t.Fatalf("same-code fork: %+v", out)
	}
	e.wantPayments(1)

	changed, err := e.c.ForkWorkflow(ctx, api.ForkWorkflowRequest{WorkflowID: "tt-base", AtEventID: 2, NewWorkflowID: "tt-v2",
		TaskQueue: "agents-v2", Reason: "try a new prompt"})
	if err != nil {
		t.Fatal(err)
	}
	v2 := e.c.GetWorkflow(ctx, "tt-v2", changed.RunID)
	held := e.waitEvent(v2, "the hold", is(history.TypeActivityHeld)).Attrs.(*history.ActivityHeld)
	d, err := e.c.DescribeWorkflow(ctx, "tt-v2", "")
	if err != nil || d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseHeld {
		t.Fatalf("changed fork: %+v %v", d, err)
	}
	// Nothing was charged while it was held (the provider's ledger is read
	// after the hold was recorded: the payment was never dispatched).
	e.wantPayments(1)
	e.resolve(client.ResolveRequest{WorkflowID: "tt-v2", ScheduledEventID: held.ScheduledEventID, Resolution: history.ResolvedPerform,
		By: "ann", Reason: "approved the new amount"})
	ship(t, e.c, "tt-v2", "")
	out := result(t, v2)
	ps := e.wantPayments(2)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[1] || ps[1].Amount != inv.Amount+1 {
		t.Fatalf("changed fork: outcome %+v, payments %+v", out, ps)
	}
	// The fork's tools run where its new build runs, not on the base's queue.
	if n1, n2 := len(w1.Lines("started")), len(w2.Lines("started")); n1 != 1 || n2 != 1 {
		t.Fatalf("SendPayment started %d times on the base's worker and %d on the fork's, want 1 and 1", n1, n2)
	}
}

// TestForkAfterPaymentCopiesIt: a fork at the base's last workflow task
// has the payment in its copied history: it completes without a call.
func TestForkAfterPaymentCopiesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.worker("w1", workerCfg{Class: history.SideEffect})
	paidAndWaiting(t, e, "tt-after")
	f, err := e.c.ForkWorkflow(context.Background(), api.ForkWorkflowRequest{WorkflowID: "tt-after", NewWorkflowID: "tt-after-f"})
	if err != nil {
		t.Fatal(err)
	}
	ship(t, e.c, "tt-after-f", "")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var out Outcome
	if err := e.c.GetWorkflow(ctx, "tt-after-f", f.RunID).Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	ps := e.wantPayments(1)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] {
		t.Fatalf("outcome %+v, payments %+v", out, ps)
	}
	_ = time.Second
}
