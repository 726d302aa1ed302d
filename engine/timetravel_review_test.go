package engine

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// TestResetOfForkDoesNotPayWhatTheBasePaid: the base paid INV-9; a fork
// made before the payment is reset before it ever scheduled it. The reset
// run is still the fork's workflow: its payment must be answered from the
// base's ledger (or held), never performed — the base already charged it.
func TestResetOfForkDoesNotPayWhatTheBasePaid(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "rf"})
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour)) // the fork's own first task: no payment yet
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "rf", ToLastTask: true, Reason: "again"})
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	h.noActivity("q") // the base charged INV-9: not again
	evs := h.historyOf("rf", r.RunID)
	if count(evs, history.TypeActivityDeduplicated) != 1 {
		t.Fatalf("the reset fork's payment was not answered from the base's ledger:\n%s", types(evs))
	}
}

// TestResetOfForkHoldsWhatAPersonFailed: a fork held a payment the base
// never made; a person failed it ("fail records nothing in the ledger, so
// a later schedule of the same action is held again"). A reset of the
// fork schedules it again: it must be held, not performed.
func TestResetOfForkHoldsWhatAPersonFailed(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "rf2"})
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	h.signal("rf2", "go", `"x"`)
	h.complete(h.pollWFT("q"), payCmd("1", "INV-77"))
	if _, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "rf2", ActivityID: "1",
		Resolution: history.ResolvedFailed, Identity: "ann", Reason: "no"}); err != nil {
		t.Fatal(err)
	}
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "rf2", ToEventID: h.firstTaskCompleted("rf2"), Reason: "again"})
	h.complete(h.pollWFT("q"), payCmd("1", "INV-77"))
	h.noActivity("q")
	if evs := h.historyOf("rf2", r.RunID); count(evs, history.TypeActivityHeld) != 1 {
		t.Fatalf("not held:\n%s", types(evs))
	}
}

// TestResetOfSandboxForkKeepsTheSandbox: a fork whose effects go to a
// sandbox queue, reset: its effects still go to the sandbox, not to the
// real vendor's queue.
func TestResetOfSandboxForkKeepsTheSandbox(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "sf", Effects: "sandbox:fake"})
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	h.reset(api.ResetWorkflowRequest{WorkflowID: "sf", ToLastTask: true, Reason: "again"})
	h.complete(h.pollWFT("q"), payCmd("2", "INV-10"))
	h.noActivity("q")
	if a := h.pollActivity("fake"); a.ActivityType != "Pay" {
		t.Fatalf("sandbox got %s", a.ActivityType)
	}
}

// firstTaskCompleted returns the id of the first WorkflowTaskCompleted
// event after the WorkflowReset marker of id's current run.
func (h *harness) firstTaskCompleted(id string) int64 {
	h.t.Helper()
	marked := false
	for _, ev := range h.history(id) {
		switch ev.Attrs.(type) {
		case *history.WorkflowReset:
			marked = true
		case *history.WorkflowTaskCompleted:
			if marked {
				return ev.ID
			}
		}
	}
	h.t.Fatalf("no task completed after the marker in %s", types(h.history(id)))
	return 0
}

// TestForkContinuedAsNewDoesNotPayWhatTheBasePaid: a fork's run continues
// as new. Its next run is still the fork: an action the base's ledger
// completed is answered from it (as a continued run of the base would have
// been answered by the base's own ledger), never performed silently.
func TestForkContinuedAsNewDoesNotPayWhatTheBasePaid(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "cf"})
	h.complete(h.pollWFT("q"), continueAsNewCmd(`"next"`))
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	h.noActivity("q")
	if evs := h.history("cf"); count(evs, history.TypeActivityDeduplicated)+count(evs, history.TypeActivityHeld) != 1 {
		t.Fatalf("the continued fork's payment was neither answered nor held:\n%s", types(evs))
	}
}

// TestResetOfForkIntoTheSharedPrefix: the base's payment was in flight at
// the fork's point (and completed later: the fork was answered from the
// base's ledger). A reset of the fork to that same point — an event of the
// base's stretch of the fork's history — must not dispatch the payment
// again under the base's key in the fork's ledger (which knows nothing
// under it).
func TestResetOfForkIntoTheSharedPrefix(t *testing.T) {
	h := newHarness(t)
	h.start("p-2", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	pay := h.pollActivity("q")
	h.signal("p-2", "go", `"a"`)
	h.complete(h.pollWFT("q")) // X: the payment is in flight
	h.signal("p-2", "go", `"b"`)
	h.complete(h.pollWFT("q")) // Y: still in flight
	h.completeActivity(pay, `{"charge":"ch_1"}`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	var wtc []int64
	for _, ev := range h.history("p-2") {
		if _, ok := ev.Attrs.(*history.WorkflowTaskCompleted); ok {
			wtc = append(wtc, ev.ID)
		}
	}
	h.fork(api.ForkWorkflowRequest{WorkflowID: "p-2", AtEventID: wtc[2], NewWorkflowID: "p-2f"})
	h.noActivity("q") // answered from the base's ledger
	h.complete(h.pollWFT("q"), completeWF(`"fork done"`))
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "p-2f", ToEventID: wtc[1], Reason: "again"})
	h.noActivity("q")
	if evs := h.historyOf("p-2f", r.RunID); count(evs, history.TypeActivityDeduplicated) != 1 {
		t.Fatalf("not answered:\n%s", types(evs))
	}
}

// TestResetOfForkKeepsItsHold: the fork held a payment; reset to a point
// where it is held (pending), the new run holds it again.
func TestResetOfForkKeepsItsHold(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "kh"})
	h.complete(h.pollWFT("q"), payCmd("1", "INV-77")) // held
	h.signal("kh", "go", `"x"`)
	h.complete(h.pollWFT("q")) // the point: the payment is held
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "kh", ToLastTask: true, Reason: "again"})
	h.noActivity("q")
	evs := h.historyOf("kh", r.RunID)
	held := 0
	for _, ev := range evs {
		if hd, ok := ev.Attrs.(*history.ActivityHeld); ok && ev.ID > r.AtEventID && hd.OriginKey != "" {
			held++
		}
	}
	if held != 1 {
		t.Fatalf("not held again (with its origin key):\n%s", types(evs))
	}
}

// TestForkAcrossShards: in a cluster the router sends ForkWorkflow to the
// server of the new workflow id; the base is often served by another. The
// fork must still be made (the base is only read).
func TestForkAcrossShards(t *testing.T) {
	a, b, la, lb := twoServers(t)
	ctx := context.Background()
	base := "fork-base"
	bsh := la.Of(base)
	fork := idInOtherShard(la, "fork-new", bsh)
	la.take(t, bsh)
	must(t, a.Acquire(ctx, []int{bsh}))
	lb.take(t, lb.Of(fork))
	must(t, b.Acquire(ctx, []int{lb.Of(fork)}))
	if _, err := a.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: base, WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	completeOn(t, a, pollOn(t, a, "q"), completeWF(`"done"`))
	if _, err := b.ForkWorkflow(ctx, &api.ForkWorkflowRequest{WorkflowID: base, NewWorkflowID: fork, Reason: "try"}); err != nil {
		t.Fatalf("fork on the new id's server of a base another server serves: %v", err)
	}
}

// TestResetPausedOnBaseThenBaseCompletes: a reset while the base's payment
// is in flight pauses the new run ("outcome is unknown"). The base's
// attempt then succeeds (a late report: the ledger now says completed).
// A person resolving the stale pause as "not happened" must not charge
// again: the ledger knows it happened.
func TestResetPausedOnBaseThenBaseCompletes(t *testing.T) {
	h := newHarness(t)
	h.start("lp", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	pay := h.pollActivity("q")
	h.signal("lp", "go", `"a"`)
	h.complete(h.pollWFT("q")) // the point: the payment is in flight
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "lp", ToLastTask: true, Reason: "x"})
	if d := h.describe("lp"); d.Info.Status != api.StatusPaused {
		t.Fatalf("new run: %s", d.Info.Status)
	}
	h.completeActivity(pay, `{"charge":"ch_1"}`) // the terminated base's attempt succeeds
	h.settleAll()
	_, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "lp", ActivityID: "1",
		Resolution: history.ResolvedNotHappened, Identity: "ann"})
	if err == nil {
		h.noActivity("q") // charged twice
	}
	if evs := h.historyOf("lp", r.RunID); count(evs, history.TypeActivityDeduplicated) != 1 && err == nil {
		t.Fatalf("the ledger's answer was not used:\n%s", types(evs))
	}
}

// TestForkHeldThenBaseCompletesThenPerform: the fork held a payment the
// base had in flight; the base then completed it. A person's "perform" of
// the held action would charge a second time; the base's ledger answers.
func TestForkHeldThenBaseCompletesThenPerform(t *testing.T) {
	h := newHarness(t)
	h.start("fb", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	pay := h.pollActivity("q")
	h.signal("fb", "go", `"a"`)
	h.complete(h.pollWFT("q")) // the point: the payment is in flight
	h.fork(api.ForkWorkflowRequest{WorkflowID: "fb", NewWorkflowID: "fb-f"})
	if d := h.describe("fb-f"); d.Info.Status != api.StatusPaused {
		t.Fatalf("fork: %s", d.Info.Status)
	}
	h.completeActivity(pay, `{"charge":"ch_1"}`) // the base goes on: charged
	_, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "fb-f", ActivityID: "1",
		Resolution: history.ResolvedPerform, Identity: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	h.noActivity("q")
	if evs := h.history("fb-f"); count(evs, history.TypeActivityDeduplicated) != 1 {
		t.Fatalf("the base's ledger was not asked again:\n%s", types(evs))
	}
	if d := h.describe("fb-f"); d.Info.Status != api.StatusRunning {
		t.Fatalf("fork after the answer: %s", d.Info.Status)
	}
}

// TestResetRetriedWithoutRunID: the client retries a reset (same request
// id) that named no run: the current run is now the reset's new run. The
// retry must return that run, not reset it again (terminating it).
func TestResetRetriedWithoutRunID(t *testing.T) {
	h := newHarness(t)
	h.start("rr", "Flow")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	a := h.reset(api.ResetWorkflowRequest{WorkflowID: "rr", ToFirstTask: true, RequestID: "req-1"})
	h.complete(h.pollWFT("q"), startTimer("t2", time.Hour)) // the new run goes on
	b := h.reset(api.ResetWorkflowRequest{WorkflowID: "rr", ToFirstTask: true, RequestID: "req-1"})
	if a.RunID != b.RunID {
		t.Fatalf("a reset sent again made run %s, then %s", a.RunID, b.RunID)
	}
	if d := h.describe("rr"); d.Info.RunID != a.RunID || !d.Info.Status.Open() {
		t.Fatalf("current run: %+v", d.Info)
	}
}

// TestForkRetriedAfterTheBaseMoved: a fork retried (same request id)
// after its base run moved on to a new run (here: reset) returns the fork
// it made, rather than refusing with already-started.
func TestForkRetriedAfterTheBaseMoved(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	f := h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", NewWorkflowID: "fr", RequestID: "req-f"})
	h.reset(api.ResetWorkflowRequest{WorkflowID: "pay-1", ToFirstTask: true})
	g, err := h.eng.ForkWorkflow(h.ctx(), &api.ForkWorkflowRequest{WorkflowID: "pay-1", NewWorkflowID: "fr", RequestID: "req-f"})
	if err != nil || g.RunID != f.RunID {
		t.Fatalf("the fork sent again: %+v, %v (first: %s)", g, err, f.RunID)
	}
}

// TestCheckAcceptsForkOfPendingAction: a fork at a point where the base's
// payment was pending is answered from the base's ledger; the fork's own
// ledger records the answer under the fork's key. cairn check must accept
// that entry (the fork's prefix event carries the base's key).
func TestCheckAcceptsForkOfPendingAction(t *testing.T) {
	h := newHarness(t)
	h.start("cp", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	pay := h.pollActivity("q")
	for _, s := range []string{`"a"`, `"b"`, `"c"`} {
		h.signal("cp", "go", s)
		h.complete(h.pollWFT("q")) // X1, X2, X3: the payment is in flight
	}
	h.completeActivity(pay, `{"charge":"ch_1"}`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	var x []int64
	for _, ev := range h.history("cp") {
		if _, ok := ev.Attrs.(*history.WorkflowTaskCompleted); ok && ev.ID > 2 {
			x = append(x, ev.ID)
		}
	}
	h.fork(api.ForkWorkflowRequest{WorkflowID: "cp", AtEventID: x[2], NewWorkflowID: "cp-f"})
	if evs := h.history("cp-f"); count(evs, history.TypeActivityDeduplicated) != 1 {
		t.Fatalf("fork:\n%s", types(evs))
	}
	// A fork of the fork in the base's stretch: answered from the fork's
	// ledger; and a reset of that one.
	h.fork(api.ForkWorkflowRequest{WorkflowID: "cp-f", AtEventID: x[1], NewWorkflowID: "cp-ff"})
	if evs := h.history("cp-ff"); count(evs, history.TypeActivityDeduplicated) != 1 {
		t.Fatalf("fork of the fork:\n%s", types(evs))
	}
	h.reset(api.ResetWorkflowRequest{WorkflowID: "cp-ff", ToEventID: x[0], Reason: "again"})
	h.noActivity("q")
	if evs := h.history("cp-ff"); count(evs, history.TypeActivityDeduplicated) != 1 {
		t.Fatalf("reset of the fork of the fork:\n%s", types(evs))
	}
	h.close()
	h.openStoreOnly()
	if rep := check(t, h); !rep.OK() {
		t.Fatalf("problems: %+v", rep.Problems)
	}
}

// TestForkChildPaysSilently: a fork's code starts its child under an id of
// its own (derived from the fork's) and the child pays what the base's
// child paid. The fork never performs an effect silently; its child does.
func TestForkChildPaysSilently(t *testing.T) {
	h := newHarness(t)
	h.start("cb", "Flow")
	h.complete(h.pollWFT("q"), childCmd("cb-kid", "Kid", history.ParentCloseAbandon))
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9")) // the child's task
	h.completeActivity(h.pollActivity("q"), `{"charge":"ch_1"}`)
	h.complete(h.pollWFT("q"), completeWF(`"paid"`))
	h.settleAll()
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	h.fork(api.ForkWorkflowRequest{WorkflowID: "cb", AtEventID: 2, NewWorkflowID: "cb-f"})
	h.complete(h.pollWFT("q"), childCmd("cb-f-kid", "Kid", history.ParentCloseAbandon))
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9")) // the fork's child's task
	h.noActivity("q")
}

// TestResetKeyDecidedAfterThePoint: the base's bill was scheduled as a
// Read (the declaring worker not yet known) and keyed by the worker after
// the point; a reset re-dispatches it: keyed again the same way, it is
// answered from the ledger.
func TestResetKeyDecidedAfterThePoint(t *testing.T) {
	h := newHarness(t)
	h.start("kp", "W")
	c := schedule("1", "Bill", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute})
	c.ScheduleActivity.Input = jsonPayload(`{"invoice":"INV-5"}`)
	h.complete(h.pollWFT("q"), c)
	h.signal("kp", "go", `"a"`)
	h.complete(h.pollWFT("q")) // the point: the bill waits for its key
	h.answerKey(h.pollDeclaring("q", billDecl), "INV-5")
	h.completeActivity(h.pollDeclaring("q", billDecl), `"billed"`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	var at int64
	for _, ev := range h.history("kp") {
		if _, ok := ev.Attrs.(*history.WorkflowTaskCompleted); ok && ev.ID > 2 && at == 0 {
			at = ev.ID
		}
	}
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "kp", ToEventID: at, Reason: "x"})
	if task := h.pollDeclaring("q", billDecl); task.KeyTask {
		h.answerKey(task, "INV-5")
	} else {
		t.Fatalf("the bill was dispatched for real, key %q", task.IdempotencyKey)
	}
	h.noActivity("q")
	if evs := h.historyOf("kp", r.RunID); count(evs, history.TypeActivityDeduplicated) != 1 {
		t.Fatalf("not answered:\n%s", types(evs))
	}
}
