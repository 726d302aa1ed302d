package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
)

// Quarantine: one damaged run never takes the others down.

// putRaw writes one record straight into the store under the engine, as
// damage on disk (or a rolled-back write) would leave it.
func (h *harness) putRaw(space history.Space, key, value []byte) {
	h.t.Helper()
	if err := h.store.Commit(context.Background(), &history.Batch{Puts: []history.Record{{Space: space, Key: key, Value: value}}}); err != nil {
		h.t.Fatalf("raw put: %v", err)
	}
}

func (h *harness) getRaw(space history.Space, key []byte) []byte {
	h.t.Helper()
	b, err := h.store.Get(context.Background(), space, key)
	if err != nil {
		h.t.Fatalf("raw get: %v", err)
	}
	return b
}

func (h *harness) runID(id string) string {
	h.t.Helper()
	return h.describe(id).Info.RunID
}

// wantCorrupt checks that run id is listed and described as quarantined,
// with reason containing want.
func (h *harness) wantCorrupt(id, want string) {
	h.t.Helper()
	d := h.describe(id)
	if d.Info.Corrupt == "" || !strings.Contains(d.Info.Corrupt, want) {
		h.t.Fatalf("describe %s: Corrupt %q, want it to say %q", id, d.Info.Corrupt, want)
	}
	resp, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{Corrupt: true})
	if err != nil {
		h.t.Fatal(err)
	}
	found := false
	for _, w := range resp.Workflows {
		if w.Corrupt == "" {
			h.t.Fatalf("list --corrupt lists healthy run %s", w.WorkflowID)
		}
		found = found || w.WorkflowID == id
	}
	if !found {
		h.t.Fatalf("list --corrupt does not list %s: %+v", id, resp.Workflows)
	}
}

// wantWritesRefused checks that every kind of write to workflow id fails
// with ErrDataCorrupt.
func (h *harness) wantWritesRefused(id string) {
	h.t.Helper()
	ctx := h.ctx()
	_, err := h.eng.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: id, SignalName: "s"})
	wantErr(h.t, err, api.ErrDataCorrupt)
	_, err = h.eng.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: id, Reason: "r"})
	wantErr(h.t, err, api.ErrDataCorrupt)
	_, err = h.eng.RequestCancelWorkflow(ctx, &api.CancelWorkflowRequest{WorkflowID: id})
	wantErr(h.t, err, api.ErrDataCorrupt)
	_, err = h.eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q"})
	wantErr(h.t, err, api.ErrDataCorrupt)
	_, err = h.eng.SignalWithStartWorkflow(ctx, &api.SignalWithStartRequest{Start: api.StartWorkflowRequest{WorkflowID: id,
		WorkflowType: "W", TaskQueue: "q"}, SignalName: "s"})
	wantErr(h.t, err, api.ErrDataCorrupt)
	_, err = h.eng.GetResult(ctx, &api.GetResultRequest{WorkflowID: id, Wait: true})
	wantErr(h.t, err, api.ErrDataCorrupt)
	_, err = h.eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id})
	wantErr(h.t, err, api.ErrDataCorrupt)
}

// finish drives workflow id's next workflow task to completion.
func (h *harness) finish(id string) {
	h.t.Helper()
	task := h.pollWFT("q")
	if task.WorkflowID != id {
		h.t.Fatalf("workflow task for %s, want %s", task.WorkflowID, id)
	}
	h.complete(task, completeWF(`"done"`))
	if r := h.result(id, ""); r.Status != api.StatusCompleted {
		h.t.Fatalf("%s: %+v", id, r)
	}
}

// TestOpenQuarantinesRunWithDamagedState: a run whose state record does
// not decode is quarantined at Open; the engine opens and serves the rest.
func TestOpenQuarantinesRunWithDamagedState(t *testing.T) {
	h := newHarness(t)
	h.start("a", "W")
	h.start("bad", "W")
	h.start("c", "W")
	ref := history.RunRef{WorkflowID: "bad", RunID: h.runID("bad")}
	h.close()
	// A flipped bit in the middle of the record: it no longer decodes.
	h.openStoreOnly()
	b := h.getRaw(history.SpaceRunState, stateKey(ref))
	b[len(b)/2] ^= 0xff
	b = b[:len(b)/2+1]
	h.putRaw(history.SpaceRunState, stateKey(ref), b)
	h.closeStoreOnly()

	h.open()
	if n := h.eng.Stats().CorruptRuns; n != 1 {
		t.Fatalf("%d corrupt runs, want 1", n)
	}
	h.wantCorrupt("bad", "run state")
	h.wantWritesRefused("bad")
	// Every other run is served.
	for range 2 {
		task := h.pollWFT("q")
		if task.WorkflowID == "bad" {
			t.Fatal("a workflow task for the quarantined run")
		}
		h.complete(task, completeWF(`"done"`))
	}
	for _, id := range []string{"a", "c"} {
		if r := h.result(id, ""); r.Status != api.StatusCompleted {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	h.noWFT("q")
	// The full list shows the quarantined run with its reason.
	resp, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Workflows) != 3 {
		t.Fatalf("list: %+v", resp.Workflows)
	}
	for _, w := range resp.Workflows {
		if (w.WorkflowID == "bad") != (w.Corrupt != "") {
			t.Fatalf("list entry %s: Corrupt %q", w.WorkflowID, w.Corrupt)
		}
	}
	// The quarantine is durable: the record is repaired behind the engine's
	// back (as a restore of that one record would), yet the run stays
	// quarantined until an operator acts.
	h.reopen()
	h.wantCorrupt("bad", "run state")
}

// openStoreOnly opens the Badger store without an engine, to damage it.
func (h *harness) openStoreOnly() {
	h.t.Helper()
	h.open()
	_ = h.eng.Close()
	h.eng = nil
}

func (h *harness) closeStoreOnly() { h.close() }

// TestOpenQuarantinesRunWhoseHistoryDisagrees: an open run whose history
// ends elsewhere than its state says — events lost, or the state rolled
// back behind its history — is quarantined at Open.
func TestOpenQuarantinesRunWhoseHistoryDisagrees(t *testing.T) {
	h := newHarness(t)
	h.start("lost", "W")
	h.start("rolled", "W")
	h.start("ok", "W")
	lost := history.RunRef{WorkflowID: "lost", RunID: h.runID("lost")}
	rolled := history.RunRef{WorkflowID: "rolled", RunID: h.runID("rolled")}
	old := h.getRaw(history.SpaceRunState, stateKey(rolled))
	for _, id := range []string{"lost", "rolled"} {
		task := h.pollWFT("q")
		if task.WorkflowID != id {
			t.Fatalf("task for %s, want %s", task.WorkflowID, id)
		}
		h.complete(task, startTimer("t", time.Hour))
	}
	// "lost": its state claims events its history does not hold.
	st, err := decodeState(h.getRaw(history.SpaceRunState, stateKey(lost)))
	if err != nil {
		t.Fatal(err)
	}
	st.NextEventID += 2
	b, _ := encodeState(st)
	h.putRaw(history.SpaceRunState, stateKey(lost), b)
	// "rolled": its state goes back to before the task (its history is longer).
	h.putRaw(history.SpaceRunState, stateKey(rolled), old)

	h.reopen()
	if n := h.eng.Stats().CorruptRuns; n != 2 {
		t.Fatalf("%d corrupt runs, want 2", n)
	}
	h.wantCorrupt("lost", "history ends at event")
	h.wantCorrupt("rolled", "history ends at event")
	h.wantWritesRefused("lost")
	h.wantWritesRefused("rolled")
	h.finish("ok")
}

// TestRunFoundDamagedWhileRunningIsQuarantined: damage met while the run is
// open — here a history read — quarantines that run: the workflow task out
// for it is refused, a waiter on its result wakes with ErrDataCorrupt, and
// the other runs go on.
func TestRunFoundDamagedWhileRunningIsQuarantined(t *testing.T) {
	h := newHarness(t)
	h.start("bad", "W")
	out := h.pollWFT("q")
	h.start("ok", "W")
	badRef := history.RunRef{WorkflowID: "bad", RunID: out.RunID}
	waiter := async(func() (*api.GetResultResponse, error) {
		return h.eng.GetResult(h.ctx(), &api.GetResultRequest{WorkflowID: "bad", Wait: true})
	})
	remove := h.fault.Inject(faultstore.Rule{Op: faultstore.OpReadEvents, Match: faultstore.RunIs(badRef),
		Err: faultstore.Corrupt("event checksum mismatch")})
	_, err := h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: "bad"})
	wantErr(t, err, api.ErrDataCorrupt)
	if !errors.Is(err, history.ErrCorrupt) {
		t.Fatalf("%v does not carry history.ErrCorrupt", err)
	}
	remove() // the damage stays recorded even once reads would succeed
	r := <-waiter
	wantErr(t, r.err, api.ErrDataCorrupt)
	h.wantCorrupt("bad", "event checksum mismatch")
	wantErr(t, h.completeErr(out, completeWF(`"done"`)), api.ErrDataCorrupt)
	h.wantWritesRefused("bad")
	if d := h.describe("bad"); d.Info.WorkflowType != "W" || d.Info.Status != api.StatusRunning {
		t.Fatalf("a run quarantined while open keeps its last known state: %+v", d.Info)
	}
	h.finish("ok")
	if n := h.eng.Stats().CorruptRuns; n != 1 {
		t.Fatalf("%d corrupt runs", n)
	}
}

// TestDispatchQuarantinesRunWithDamagedHistory: a workflow task whose
// history cannot be read is not handed out (nor left to time out and be
// dispatched again, forever): its run is quarantined and the poller gets
// the next task.
func TestDispatchQuarantinesRunWithDamagedHistory(t *testing.T) {
	h := newHarness(t)
	h.start("a-bad", "W")
	h.start("b-ok", "W")
	badRef := history.RunRef{WorkflowID: "a-bad", RunID: h.runID("a-bad")}
	// After a restart the event tails are empty, and the open runs' tasks
	// are queued in key order: a-bad first, read from the store.
	h.rules = []faultstore.Rule{{Op: faultstore.OpReadEvents, Match: faultstore.RunIs(badRef), Err: faultstore.Corrupt("bit flip")}}
	h.reopen()
	task := h.pollWFT("q")
	if task.WorkflowID != "b-ok" {
		t.Fatalf("task for %s, want b-ok", task.WorkflowID)
	}
	h.wantCorrupt("a-bad", "bit flip")
	h.complete(task, completeWF(`"done"`))
	h.noWFT("q")
}

// TestDamagedLedgerEntryQuarantinesTheRunThatNeedsIt: whether an action
// already happened cannot be known from a damaged ledger entry, so the run
// scheduling it is quarantined rather than dispatching it (or answering
// from garbage).
func TestDamagedLedgerEntryQuarantinesTheRunThatNeedsIt(t *testing.T) {
	h := newHarness(t)
	h.start("pay", "W")
	h.complete(h.pollWFT("q"), schedule("p", "Pay", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	act := h.pollActivity("q")
	h.completeActivity(act, `"paid"`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	h.putRaw(history.SpaceLedger, ledgerKey("pay", act.IdempotencyKey), []byte{0xc1, 0xc1, 0xc1})
	// A new run of the same workflow makes the same payment: the ledger
	// must say whether it happened.
	h.start("pay", "W")
	h.start("other", "W")
	err := h.completeErr(h.pollWFT("q"), schedule("p", "Pay", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	wantErr(t, err, api.ErrDataCorrupt)
	h.wantCorrupt("pay", "ledger entry")
	h.noActivity("q")
	h.finish("other")
}

// TestDamagedListEntryDoesNotFailTheList: one index entry that does not
// decode is listed from its key, marked, and the rest of the list is
// served.
func TestDamagedListEntryDoesNotFailTheList(t *testing.T) {
	h := newHarness(t)
	h.start("a", "W")
	h.start("b", "W")
	st, _, err := h.eng.loadState(h.ctx(), "b", "")
	if err != nil {
		t.Fatal(err)
	}
	h.putRaw(history.SpaceIndex, indexAllKey(st), []byte{0xc1})
	resp, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Workflows) != 2 {
		t.Fatalf("list: %+v", resp.Workflows)
	}
	for _, w := range resp.Workflows {
		switch w.WorkflowID {
		case "a":
			if w.Corrupt != "" || w.WorkflowType != "W" {
				t.Fatalf("a: %+v", w)
			}
		case "b":
			if !strings.Contains(w.Corrupt, "index entry") || w.RunID != st.RunID || !w.StartTime.Equal(st.StartTime) {
				t.Fatalf("b: %+v", w)
			}
		default:
			t.Fatalf("listed %+v", w)
		}
	}
	// The runs themselves are not damaged: neither is quarantined.
	for range 2 {
		h.complete(h.pollWFT("q"), completeWF(`"done"`))
	}
	if n := h.eng.Stats().CorruptRuns; n != 0 {
		t.Fatalf("%d corrupt runs", n)
	}
}

// TestParentOfQuarantinedChildIsTold: a parent waiting for a child that is
// quarantined learns that the child failed (DataCorrupt) instead of
// waiting forever — whether the child is found damaged at Open (its state
// record unreadable) or while running.
func TestParentOfQuarantinedChildIsTold(t *testing.T) {
	for _, when := range []string{"open", "running"} {
		t.Run(when, func(t *testing.T) {
			h := newHarness(t)
			h.start("parent", "P")
			h.complete(h.pollWFT("q"), childCmd("kid", "K", history.ParentCloseAbandon))
			kid := history.RunRef{WorkflowID: "kid", RunID: h.runID("kid")}
			if when == "open" {
				h.putRaw(history.SpaceRunState, stateKey(kid), []byte{0x93, 0xc1})
				h.reopen()
			} else {
				h.fault.Inject(faultstore.Rule{Op: faultstore.OpReadEvents, Match: faultstore.RunIs(kid), Err: faultstore.Corrupt("zeroed page"), Times: 1})
				_, err := h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: "kid"})
				wantErr(t, err, api.ErrDataCorrupt)
			}
			h.settleAll()
			task := h.pollWFT("q")
			if task.WorkflowID == "kid" {
				t.Fatal("a task for the quarantined child")
			}
			f, _ := find[*history.ChildWorkflowFailed](t, task.Events)
			if f.Failure.Type != "DataCorrupt" || f.RunID != kid.RunID {
				t.Fatalf("parent told %+v", f)
			}
			h.complete(task, completeWF(`"done"`))
		})
	}
}

// TestOpenGoesPastDamagedIndexRecords: an open-run index record the store
// reports damaged in a scan does not hide the records around it: every
// open run is recovered and served, and the list shows every run.
func TestOpenGoesPastDamagedIndexRecords(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"a", "b", "c"} {
		h.start(id, "W")
	}
	b := history.RunRef{WorkflowID: "b", RunID: h.runID("b")}
	st, _, err := h.eng.loadState(h.ctx(), "b", "")
	if err != nil {
		t.Fatal(err)
	}
	h.close()
	h.openStoreOnly()
	for _, bad := range [][]byte{indexOpenKey(b), indexAllKey(st)} {
		ds := &damagedScan{Store: h.store, space: history.SpaceIndex, bad: bad}
		opts := h.opts
		opts.Store = ds
		eng, err := Open(opts)
		if err != nil {
			t.Fatal(err)
		}
		if n := eng.Stats().OpenRuns; n != 3 {
			t.Fatalf("%d open runs recovered, want 3", n)
		}
		resp, err := eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{})
		if err != nil || len(resp.Workflows) != 3 {
			t.Fatalf("list: %+v %v", resp, err)
		}
		_ = eng.Close()
	}
}
