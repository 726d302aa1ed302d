package engine

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/internal/crashpoint"
)

// doubtOpts: a 10 s start-to-close, so that an attempt lost in a recovery
// can act for at most 10 s after it (plus the drift margin).
var doubtOpts = history.ActivityOptions{StartToCloseTimeout: 10 * time.Second}

// markDoubt closes the engine and writes a doubt mark into the store, as
// a restore the store cannot see (and `cairn effects doubt`) would; the
// engine is not reopened.
func (h *harness) markDoubt(reason string) {
	h.t.Helper()
	h.close()
	st, err := h.data.Open(h.ctx())
	if err != nil {
		h.t.Fatal(err)
	}
	defer st.Close()
	if err := history.MarkInDoubt(h.ctx(), st, history.DoubtMark{At: h.clk.Now(), Source: history.DoubtOperator, Reason: reason}); err != nil {
		h.t.Fatal(err)
	}
}

// marksLeft reads the doubt marks the store still holds.
func (h *harness) marksLeft() int {
	h.t.Helper()
	marks, _, err := history.DoubtMarks(h.ctx(), h.store)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(marks)
}

// schedulePayNoteRead starts run id with a SideEffect Pay (event 5 …), an
// Idempotent Note and a Read Quote, none dispatched.
func (h *harness) schedulePayNoteRead(id string, reconcile bool) {
	h.t.Helper()
	h.start(id, "W")
	p := schedule("pay", "Pay", history.SideEffect, doubtOpts)
	p.ScheduleActivity.HasReconcile = reconcile
	h.complete(h.pollWFT("q"), p, schedule("note", "Note", history.Idempotent, doubtOpts), schedule("quote", "Quote", history.Read, doubtOpts))
}

// pending returns the run's pending activity of type typ.
func pending(t *testing.T, d *api.DescribeWorkflowResponse, typ string) api.PendingActivity {
	t.Helper()
	for _, a := range d.PendingActivities {
		if a.ActivityType == typ {
			return a
		}
	}
	t.Fatalf("no pending %s: %+v", typ, d.PendingActivities)
	return api.PendingActivity{}
}

// TestDoubtPausesASideEffectWithoutReconcile: after a recovery (a doubt
// mark), a scheduled SideEffect action without a lookup is not dispatched:
// the run pauses saying why; its ledger entry is unknown, in doubt; the
// Idempotent and Read actions are dispatched as usual; the mark is gone.
// A person's "did not happen" then dispatches it, once an attempt lost in
// the recovery can no longer act. Without the doubt, Pay was queued as
// attempt 1 again.
func TestDoubtPausesASideEffectWithoutReconcile(t *testing.T) {
	h := newHarness(t)
	h.schedulePayNoteRead("wf", false)
	h.markDoubt("restored from PITR at 10:42")
	h.open()
	d := h.describe("wf")
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || !strings.Contains(d.Info.Pause.Reason, "recovery of the store") ||
		!strings.Contains(d.Info.Pause.Reason, "restored from PITR at 10:42") {
		t.Fatalf("after the recovery: status %s, pause %+v", d.Info.Status, d.Info.Pause)
	}
	if a := pending(t, d, "Pay"); a.State != api.ActivityStateUnknown || !strings.Contains(a.InDoubt, "PITR") {
		t.Fatalf("Pay: %+v", a)
	}
	if n := h.eng.actQ.Len("q"); n != 2 {
		t.Fatalf("%d activity tasks queued, want 2 (Note and Quote; not Pay)", n)
	}
	for range 2 {
		task := h.pollActivity("q")
		if task.ActivityType == "Pay" {
			t.Fatal("Pay was dispatched again after the recovery")
		}
		h.completeActivity(task, `"ok"`)
	}
	if n := count(h.history("wf"), history.TypeActivityOutcomeUnknown); n != 1 {
		t.Fatalf("%d ActivityOutcomeUnknown, want 1:\n%s", n, types(h.history("wf")))
	}
	effects, err := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{InDoubtOnly: true})
	if err != nil || len(effects.Effects) != 1 || effects.Effects[0].ActivityType != "Pay" || effects.Effects[0].State != api.EffectUnknown {
		t.Fatalf("effects in doubt: %+v, %v", effects, err)
	}
	if n := h.marksLeft(); n != 0 || h.eng.Stats().EffectsInDoubt != 1 {
		t.Fatalf("%d marks left, %d in doubt", n, h.eng.Stats().EffectsInDoubt)
	}
	h.reopen() // the mark is gone: nothing is put in doubt twice
	if n := count(h.history("wf"), history.TypeActivityOutcomeUnknown); n != 1 {
		t.Fatalf("after a second open: %d ActivityOutcomeUnknown, want 1", n)
	}
	if _, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "wf", Resolution: history.ResolvedNotHappened,
		Identity: "clerk", Reason: "not at the provider"}); err != nil {
		t.Fatal(err)
	}
	h.noActivity("q") // an attempt of the lost range may still act
	h.advance(doubtOpts.StartToCloseTimeout + DefaultLeaseDriftMargin)
	if task := h.pollActivity("q"); task.ActivityType != "Pay" || task.Attempt != 2 {
		t.Fatalf("after the resolution: %s attempt %d, want Pay attempt 2", task.ActivityType, task.Attempt)
	}
	if e, _ := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{InDoubtOnly: true}); len(e.Effects) != 0 {
		t.Fatalf("still in doubt after the resolution: %+v", e.Effects)
	}
}

// TestDoubtRunsTheLookupFirst: with a Reconcile lookup, the lookup is
// dispatched — once an attempt lost in the recovery can no longer act —
// before any attempt; "not happened" then dispatches the next attempt.
func TestDoubtRunsTheLookupFirst(t *testing.T) {
	h := newHarness(t)
	h.schedulePayNoteRead("wf", true)
	h.markDoubt("accepted data loss")
	h.open()
	for range 2 {
		if task := h.pollActivity("q"); task.ActivityType == "Pay" {
			t.Fatal("Pay was dispatched before its lookup")
		}
	}
	h.noActivity("q")
	if a := pending(t, h.describe("wf"), "Pay"); a.State != api.ActivityStateReconciling || a.InDoubt == "" {
		t.Fatalf("Pay: %+v", a)
	}
	h.advance(doubtOpts.StartToCloseTimeout + DefaultLeaseDriftMargin)
	lookup := h.pollActivity("q")
	if lookup.ActivityType != "Pay" || !lookup.Reconcile {
		t.Fatalf("first dispatch after the quiet time: %s reconcile=%v, want Pay's lookup", lookup.ActivityType, lookup.Reconcile)
	}
	h.mustReport(lookup, machine.ReportNotHappened, "no such payment")
	task := h.pollActivity("q")
	if task.ActivityType != "Pay" || task.Reconcile || task.Attempt != 2 {
		t.Fatalf("after the lookup: %s reconcile=%v attempt %d", task.ActivityType, task.Reconcile, task.Attempt)
	}
	h.mustReport(task, machine.ReportCompleted, `"pay_1"`)
	if a := h.describe("wf").PendingActivities; len(a) != 2 {
		t.Fatalf("pending after the payment: %+v", a)
	}
}

// TestDoubtOfARunningAttempt: an attempt in flight when the store was
// recovered may be followed by attempts of the lost range. Its failure
// proves nothing about them (no retry); its success completes the action.
func TestDoubtOfARunningAttempt(t *testing.T) {
	for _, kind := range []machine.ReportKind{machine.ReportFailed, machine.ReportCompleted} {
		t.Run(kind.String(), func(t *testing.T) {
			h := newHarness(t)
			h.startPayment("wf", false, doubtOpts)
			a := h.pollActivity("q")
			h.markDoubt("restored")
			h.open()
			err := h.report(a, kind, `"pay_1"`)
			st := h.describe("wf")
			switch kind {
			case machine.ReportFailed:
				wantErr(t, err, api.ErrStaleAttempt)
				h.advance(time.Hour)
				h.noActivity("q")
				if st.Info.Status != api.StatusPaused {
					t.Fatalf("status %s", st.Info.Status)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if len(st.PendingActivities) != 0 || count(h.history("wf"), history.TypeActivityCompleted) != 1 {
					t.Fatalf("the late success did not complete the action:\n%s", types(h.history("wf")))
				}
			}
		})
	}
}

// TestDoubtPausesTheNextRunToo: a new run of the workflow id that
// schedules the action the earlier run left in doubt pauses on its ledger
// entry, saying why.
func TestDoubtPausesTheNextRunToo(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.markDoubt("restored")
	h.open()
	if _, err := h.eng.TerminateWorkflow(h.ctx(), &api.TerminateWorkflowRequest{WorkflowID: "wf", Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.noActivity("q")
	d := h.describe("wf")
	if d.Info.Pause == nil || !strings.Contains(d.Info.Pause.Reason, "recovery of the store") {
		t.Fatalf("the new run: %+v", d.Info.Pause)
	}
}

// TestDoubtPassSurvivesCrashes: the store dies just before or just after
// a commit of the pass (the first of two batches, or the last, which
// deletes the mark). After a restart every action is in doubt exactly once
// and the mark is gone.
func TestDoubtPassSurvivesCrashes(t *testing.T) {
	old := doubtBatchRuns
	doubtBatchRuns = 2
	defer func() { doubtBatchRuns = old }()
	for _, c := range []struct {
		at  string
		hit int
	}{{crashpoint.Before, 1}, {crashpoint.After, 1}, {crashpoint.Before, 2}, {crashpoint.After, 2}} {
		t.Run(c.at[1:]+"-"+string(rune('0'+c.hit)), func(t *testing.T) {
			h := newHarness(t)
			ids := []string{"a", "b", "c"}
			for _, id := range ids {
				h.start(id, "W")
				h.complete(h.pollWFT("q"), pay("p", id))
			}
			h.markDoubt("restored")
			var died atomic.Bool
			crashpoint.Arm("Doubt"+c.at, c.hit, func() { h.fault.Kill(nil); died.Store(true) })
			h.rules = nil
			st, err := h.data.Open(h.ctx())
			if err != nil {
				t.Fatal(err)
			}
			h.store, h.fault = st, faultstore.New(st)
			opts := h.opts
			opts.Store = h.fault
			if eng, err := Open(opts); err == nil {
				_ = eng.Close()
				t.Fatal("the engine opened over a store that died in the doubt pass")
			}
			crashpoint.Disarm()
			if !died.Load() {
				t.Fatal("the crash point was not reached")
			}
			h.close()
			h.open()
			for _, id := range ids {
				if n := count(h.history(id), history.TypeActivityOutcomeUnknown); n != 1 || h.describe(id).Info.Status != api.StatusPaused {
					t.Fatalf("run %s: %d ActivityOutcomeUnknown, status %s", id, n, h.describe(id).Info.Status)
				}
			}
			h.noActivity("q")
			if n := h.marksLeft(); n != 0 {
				t.Fatalf("%d marks left", n)
			}
		})
	}
}

// TestDoubtOfAKeyNotAssignedYet: an action whose key waits for its
// declaring worker (a key task) is put in doubt once the key is assigned,
// and its ledger entry then says unknown — also when the engine learns the
// declaration only after the recovery (the workflow scheduled a Read).
func TestDoubtOfAKeyNotAssignedYet(t *testing.T) {
	decl := []api.ActivityDeclaration{{ActivityType: "Pay", Effect: history.SideEffect}}
	for _, known := range []bool{true, false} {
		t.Run(map[bool]string{true: "declared before", false: "declared after"}[known], func(t *testing.T) {
			h := newHarness(t)
			if known {
				h.eng.declare(h.ctx(), "q", decl)
			}
			h.start("wf", "W")
			h.complete(h.pollWFT("q"), schedule("pay", "Pay", history.Read, doubtOpts)) // the workflow's worker declares nothing
			h.markDoubt("restored")
			h.open()
			resp, err := h.eng.PollActivityTask(h.ctx(), &api.PollActivityTaskRequest{TaskQueue: "q", Identity: "w", Activities: decl})
			if err != nil || resp.Task == nil || !resp.Task.KeyTask {
				t.Fatalf("want a key task first: %+v, %v", resp, err)
			}
			if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: resp.Task.TaskToken, KeyMaterial: []byte("INV-1")}); err != nil {
				t.Fatal(err)
			}
			if h.eng.actQ.Len("q") != 0 {
				t.Fatalf("a task is ready after the key:\n%s\n%+v", types(h.history("wf")), h.describe("wf").PendingActivities)
			}
			d := h.describe("wf")
			if d.Info.Status != api.StatusPaused || pending(t, d, "Pay").IdempotencyKey == "" || pending(t, d, "Pay").InDoubt == "" {
				t.Fatalf("after the key: %s %+v", d.Info.Status, d.PendingActivities)
			}
			e, err := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{InDoubtOnly: true})
			if err != nil || len(e.Effects) != 1 || e.Effects[0].State != api.EffectUnknown {
				t.Fatalf("ledger: %+v %v", e, err)
			}
			if r := check(t, h); !r.OK() {
				t.Fatalf("check: %+v", r.Problems)
			}
		})
	}
}
