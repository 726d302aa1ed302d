package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// payCmd schedules a payment (a SideEffect) of invoice inv.
func payCmd(id, inv string) api.Command {
	c := schedule(id, "Pay", history.SideEffect, history.ActivityOptions{})
	c.ScheduleActivity.Input = jsonPayload(`{"invoice":"` + inv + `"}`)
	return c
}

// paidRun runs "pay-1" through a payment of INV-9 (completed, "ch_1") and
// a Read lookup, and completes it: events 2 and 6 are its first two
// workflow tasks' completions.
func paidRun(h *harness) string {
	h.t.Helper()
	run := h.start("pay-1", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	h.completeActivity(h.pollActivity("q"), `{"charge":"ch_1"}`)
	h.complete(h.pollWFT("q"), schedule("2", "Lookup", history.Read, history.ActivityOptions{}))
	h.completeActivity(h.pollActivity("q"), `"ok"`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	return run
}

func (h *harness) reset(req api.ResetWorkflowRequest) *api.ResetWorkflowResponse {
	h.t.Helper()
	if req.Reason == "" {
		req.Reason = "test"
	}
	resp, err := h.eng.ResetWorkflow(h.ctx(), &req)
	if err != nil {
		h.t.Fatalf("reset %s: %v", req.WorkflowID, err)
	}
	return resp
}

func (h *harness) fork(req api.ForkWorkflowRequest) *api.ForkWorkflowResponse {
	h.t.Helper()
	resp, err := h.eng.ForkWorkflow(h.ctx(), &req)
	if err != nil {
		h.t.Fatalf("fork %s: %v", req.WorkflowID, err)
	}
	return resp
}

func TestResetPastPaymentAnswersFromLedger(t *testing.T) {
	h := newHarness(t)
	base := paidRun(h)
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "pay-1", ToFirstTask: true, Reason: "try again"})
	if r.AtEventID != 2 || r.BaseRunID != base {
		t.Fatalf("reset = %+v", r)
	}
	task := h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted WorkflowReset")
	h.complete(task, payCmd("1", "INV-9"))
	h.noActivity("q") // the payment is not made again
	evs := h.historyOf("pay-1", r.RunID)
	d, _ := find[*history.ActivityDeduplicated](t, evs)
	if d.OriginalRunID != base || string(d.Result.Data) != `{"charge":"ch_1"}` || d.OriginalWorkflowID != "" {
		t.Fatalf("deduplicated = %+v", d)
	}
	h.complete(h.pollWFT("q"), completeWF(`"again"`))
	if res := h.result("pay-1", r.RunID); res.Status != api.StatusCompleted {
		t.Fatalf("new run: %+v", res)
	}
	// The base completed before the reset: linked, not terminated.
	old, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: "pay-1", RunID: base})
	if err != nil || old.Info.Status != api.StatusCompleted || old.Info.ResetRunID != r.RunID {
		t.Fatalf("base after reset: %+v, %v", old, err)
	}
	if nd := h.describe("pay-1"); nd.Info.Base == nil || nd.Info.Base.RunID != base || nd.Info.Base.AtEventID != 2 || nd.Info.LedgerAnswers != 1 {
		t.Fatalf("new run describe: %+v", nd.Info)
	}
}

func TestResetOpenRunTerminatesAndReappliesSignals(t *testing.T) {
	h := newHarness(t)
	base := h.start("r-1", "Flow")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	h.signal("r-1", "go", `"a"`)
	h.complete(h.pollWFT("q"))
	h.signal("r-1", "go", `"b"`) // after the point
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "r-1", ToLastTask: true, Reason: "new prompt"})
	if r.AtEventID != 5 {
		t.Fatalf("point = %d, want 5 (the last task)", r.AtEventID)
	}
	old := h.historyOf("r-1", base)
	term, _ := find[*history.WorkflowTerminated](t, old)
	if term.ResetRunID != r.RunID || !strings.Contains(term.Reason, "new prompt") {
		t.Fatalf("terminated = %+v", term)
	}
	task := h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted WorkflowTaskCompleted TimerStarted SignalReceived WorkflowReset SignalReceived")
	h.complete(task)
	h.advance(time.Hour) // the copied timer still fires
	task = h.pollWFT("q")
	if _, ev := find[*history.TimerFired](t, task.Events); ev.ID == 0 {
		t.Fatal("no TimerFired")
	}
	// Without re-applying: the later signal is dropped.
	h.complete(task, completeWF(`"x"`))
	r2 := h.reset(api.ResetWorkflowRequest{WorkflowID: "r-1", RunID: base, ToEventID: 5, NoReapply: true, Reason: "again"})
	if n := count(h.historyOf("r-1", r2.RunID), history.TypeSignalReceived); n != 1 {
		t.Fatalf("%d signals after a reset without re-applying, want 1", n)
	}
}

func TestResetRequestSentAgainMakesOneRun(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	a := h.reset(api.ResetWorkflowRequest{WorkflowID: "pay-1", ToFirstTask: true, RequestID: "req-1"})
	b := h.reset(api.ResetWorkflowRequest{WorkflowID: "pay-1", RunID: a.BaseRunID, ToFirstTask: true, RequestID: "req-1"})
	if a.RunID != b.RunID {
		t.Fatalf("a reset sent again made run %s, then %s", a.RunID, b.RunID)
	}
}

func TestResetRefusals(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	for _, c := range []struct {
		req  api.ResetWorkflowRequest
		want error
	}{
		{api.ResetWorkflowRequest{WorkflowID: "pay-1", ToEventID: 3, Reason: "x"}, api.ErrInvalidArgument}, // an ActivityScheduled
		{api.ResetWorkflowRequest{WorkflowID: "pay-1", ToEventID: 99, Reason: "x"}, api.ErrInvalidArgument},
		{api.ResetWorkflowRequest{WorkflowID: "pay-1", ToFirstTask: true}, api.ErrInvalidArgument},                                // no reason
		{api.ResetWorkflowRequest{WorkflowID: "pay-1", ToFirstTask: true, ToLastTask: true, Reason: "x"}, api.ErrInvalidArgument}, // two points
		{api.ResetWorkflowRequest{WorkflowID: "nobody", ToFirstTask: true, Reason: "x"}, api.ErrNotFound},
	} {
		_, err := h.eng.ResetWorkflow(h.ctx(), &c.req)
		wantErr(t, err, c.want)
	}
}

// TestResetPendingPaymentThatCompletedLater: the point is between a
// payment's dispatch and its completion; the new run does not pay again.
func TestResetPendingPaymentThatCompletedLater(t *testing.T) {
	h := newHarness(t)
	base := h.start("p-2", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"), schedule("2", "Lookup", history.Read, history.ActivityOptions{}))
	pay, look := h.pollActivity("q"), h.pollActivity("q")
	if pay.ActivityType != "Pay" {
		pay, look = look, pay
	}
	h.completeActivity(look, `"ok"`)
	h.complete(h.pollWFT("q")) // the point: the payment is in flight
	h.completeActivity(pay, `{"charge":"ch_1"}`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "p-2", ToEventID: 8})
	h.noActivity("q")
	evs := h.historyOf("p-2", r.RunID)
	d, ev := find[*history.ActivityDeduplicated](t, evs)
	if d.OriginalRunID != base || ev.ID < r.AtEventID {
		t.Fatalf("deduplicated = %+v at %d", d, ev.ID)
	}
	// The task sees the answer as the payment's outcome.
	task := h.pollWFT("q")
	if _, ev := find[*history.ActivityDeduplicated](t, task.Events); ev.ID == 0 {
		t.Fatal("task lacks the ledger's answer")
	}
}

// TestResetPausedPaymentStaysPaused: an effect whose outcome is unknown is
// not performed by the new run: it pauses, as the base did.
func TestResetPausedPaymentStaysPaused(t *testing.T) {
	h := newHarness(t)
	h.start("p-3", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	a := h.pollActivity("q")
	if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: a.TaskToken, OutcomeUnknown: true,
		Failure: history.Failure{Message: "vendor timed out"}}); err != nil {
		t.Fatal(err)
	}
	if d := h.describe("p-3"); d.Info.Status != api.StatusPaused {
		t.Fatalf("base: %s", d.Info.Status)
	}
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "p-3", ToFirstTask: true})
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	h.noActivity("q")
	d := h.describe("p-3")
	if d.Info.RunID != r.RunID || d.Info.Status != api.StatusPaused || d.Info.Pause == nil || !strings.Contains(d.Info.Pause.Reason, "outcome is unknown") {
		t.Fatalf("new run: %+v", d.Info)
	}
}

func TestForkAnswersFromBaseAndHoldsNewEffects(t *testing.T) {
	h := newHarness(t)
	base := paidRun(h)
	f := h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "pay-1-fork", Reason: "new prompt"})
	if f.RunID == "" || f.AtEventID != 2 {
		t.Fatalf("fork = %+v", f)
	}
	task := h.pollWFT("q")
	h.complete(task, payCmd("1", "INV-9"), payCmd("2", "INV-10"))
	h.noActivity("q")
	evs := h.historyOf("pay-1-fork", "")
	d, _ := find[*history.ActivityDeduplicated](t, evs)
	if d.OriginalWorkflowID != "pay-1" || d.OriginalRunID != base || string(d.Result.Data) != `{"charge":"ch_1"}` {
		t.Fatalf("answer = %+v", d)
	}
	held, _ := find[*history.ActivityHeld](t, evs)
	info := h.describe("pay-1-fork").Info
	if info.Status != api.StatusPaused || info.Pause == nil || info.Pause.Kind != api.PauseHeld || !strings.Contains(info.Pause.Reason, "fork: effect held") {
		t.Fatalf("fork: %+v", info)
	}
	// A person performs the held payment: under the fork's own key.
	if _, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "pay-1-fork", ScheduledEventID: held.ScheduledEventID,
		Resolution: history.ResolvedPerform, Identity: "ann"}); err != nil {
		t.Fatal(err)
	}
	a := h.pollActivity("q")
	if a.IdempotencyKey == "" || a.IdempotencyKey == held.OriginKey {
		t.Fatalf("performed with key %q (origin %q)", a.IdempotencyKey, held.OriginKey)
	}
	h.completeActivity(a, `{"charge":"ch_2"}`)
	if h.describe("pay-1").Info.Status != api.StatusCompleted {
		t.Fatal("the base changed")
	}
}

func TestForkHeldEffectGivenAResult(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "f2"})
	h.complete(h.pollWFT("q"), payCmd("1", "INV-77"))
	_, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "f2", ActivityID: "1",
		Resolution: history.ResolvedHappened, Result: jsonPayload(`{"charge":"fake"}`), Identity: "ann"})
	if err != nil {
		t.Fatal(err)
	}
	h.noActivity("q")
	task := h.pollWFT("q")
	r, _ := find[*history.ActivityResolved](t, task.Events)
	if string(r.Result.Data) != `{"charge":"fake"}` {
		t.Fatalf("resolved = %+v", r)
	}
	// perform is only for held actions.
	h.complete(task, payCmd("3", "INV-78"))
	_, err = h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "pay-1", ActivityID: "1", Resolution: history.ResolvedPerform})
	if err == nil {
		t.Fatal("perform on a closed base's activity succeeded")
	}
}

func TestForkSandboxSendsEffectsElsewhere(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", AtEventID: 2, NewWorkflowID: "f3", Effects: "sandbox:fake-vendor", TaskQueue: "q2"})
	task := h.pollWFT("q2")
	h.complete(task, payCmd("1", "INV-9"), payCmd("2", "INV-10"), schedule("3", "Lookup", history.Read, history.ActivityOptions{}))
	look := h.pollActivity("q2") // a Read runs where it would have
	if look.ActivityType != "Lookup" {
		t.Fatalf("on q2: %s", look.ActivityType)
	}
	h.noActivity("q2")
	sb := h.pollActivity("fake-vendor")
	if sb.ActivityType != "Pay" || !strings.Contains(string(sb.Input.Data), "INV-10") {
		t.Fatalf("sandbox got %s %s", sb.ActivityType, sb.Input.Data)
	}
	evs := h.historyOf("f3", "")
	if count(evs, history.TypeActivityDeduplicated) != 1 || count(evs, history.TypeActivityHeld) != 0 {
		t.Fatalf("history:\n%s", types(evs))
	}
}

func TestForkRefusals(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	h.start("taken", "Flow")
	for _, c := range []struct {
		req  api.ForkWorkflowRequest
		want error
	}{
		{api.ForkWorkflowRequest{WorkflowID: "pay-1", NewWorkflowID: "pay-1"}, api.ErrInvalidArgument},
		{api.ForkWorkflowRequest{WorkflowID: "pay-1", NewWorkflowID: "taken"}, api.ErrAlreadyStarted},
		{api.ForkWorkflowRequest{WorkflowID: "pay-1", NewWorkflowID: "n", Effects: "maybe"}, api.ErrInvalidArgument},
		{api.ForkWorkflowRequest{WorkflowID: "pay-1", NewWorkflowID: "n", AtEventID: 4}, api.ErrInvalidArgument},
	} {
		_, err := h.eng.ForkWorkflow(h.ctx(), &c.req)
		wantErr(t, err, c.want)
	}
}

func TestBranchWithChildren(t *testing.T) {
	h := newHarness(t)
	h.start("par", "Flow")
	h.complete(h.pollWFT("q"), childCmd("kid", "Kid", history.ParentCloseAbandon))
	h.signal("par", "go", `"x"`)
	tasks := h.pollBoth("par", "kid")
	h.complete(tasks["par"]) // the point (event 5): the child runs
	h.complete(tasks["kid"], completeWF(`"kid done"`))
	h.settleAll()
	h.complete(h.pollWFT("q"))
	f := h.fork(api.ForkWorkflowRequest{WorkflowID: "par", AtEventID: 5, NewWorkflowID: "par-f"})
	evs := h.historyOf("par-f", f.RunID)
	c, ev := find[*history.ChildWorkflowCompleted](t, evs)
	if string(c.Result.Data) != `"kid done"` || ev.ID <= 5 {
		t.Fatalf("child outcome %+v at %d", c, ev.ID)
	}
	if task := h.pollWFT("q"); task.WorkflowID != "par-f" {
		t.Fatalf("task of %s, want the fork's", task.WorkflowID)
	} else {
		h.complete(task)
	}
	// A child still running refuses the branch.
	h.start("par2", "Flow")
	h.complete(h.pollWFT("q"), childCmd("kid2", "Kid", history.ParentCloseAbandon))
	h.signal("par2", "go", `"x"`)
	h.complete(h.pollBoth("par2", "kid2")["par2"])
	_, err := h.eng.ForkWorkflow(h.ctx(), &api.ForkWorkflowRequest{WorkflowID: "par2", AtEventID: 5, NewWorkflowID: "par2-f"})
	if !errors.Is(err, machine.ErrChildRunning) || !errors.Is(err, api.ErrFailedPrecondition) {
		t.Fatalf("fork past a running child: %v\n%s", err, types(h.history("par2")))
	}
}

// pollBoth polls the workflow tasks of a parent and its new child, in
// whatever order they come.
func (h *harness) pollBoth(ids ...string) map[string]*api.WorkflowTask {
	h.t.Helper()
	out := map[string]*api.WorkflowTask{}
	for range ids {
		task := h.pollWFT("q")
		out[task.WorkflowID] = task
	}
	for _, id := range ids {
		if out[id] == nil {
			h.t.Fatalf("no workflow task of %s (got %v)", id, out)
		}
	}
	return out
}

// TestCheckAcceptsBranchedRuns: resets and forks leave a store that
// cairn check finds healthy (counters, ledger, chunks, indexes).
func TestCheckAcceptsBranchedRuns(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "pay-1", ToFirstTask: true})
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"), payCmd("2", "INV-9"))
	h.completeActivity(h.pollActivity("q"), `{"charge":"ch_9"}`) // the second INV-9: a new occurrence
	h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", RunID: r.RunID, NewWorkflowID: "pay-f"})
	h.complete(h.pollWFT("q"), payCmd("3", "INV-11"))
	h.close()
	h.openStoreOnly()
	if rep := check(t, h); !rep.OK() {
		t.Fatalf("problems: %+v", rep.Problems)
	}
}

// TestResetRepeatsTheBaseKeys: the base paid INV-9 twice (two
// occurrences, two keys); a reset between the two answers the new run's
// second payment with the base's second charge — the occurrence counters
// of the prefix were rebuilt, so the key is the base's second one.
func TestResetRepeatsTheBaseKeys(t *testing.T) {
	h := newHarness(t)
	h.start("twice", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	h.completeActivity(h.pollActivity("q"), `{"charge":"ch_1"}`)
	h.complete(h.pollWFT("q"), payCmd("2", "INV-9")) // event 6: the point
	h.completeActivity(h.pollActivity("q"), `{"charge":"ch_2"}`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "twice", ToEventID: 6})
	h.complete(h.pollWFT("q"), payCmd("2", "INV-9"))
	h.noActivity("q")
	d, _ := find[*history.ActivityDeduplicated](t, h.historyOf("twice", r.RunID))
	if string(d.Result.Data) != `{"charge":"ch_2"}` {
		t.Fatalf("answered with %s, want the second charge", d.Result.Data)
	}
}

// TestBranchedRunSurvivesARestart: a reset's history refers to its base's
// events; after a restart the engine recovers the run (its own stored
// events counted from the point) and serves its whole history.
func TestBranchedRunSurvivesARestart(t *testing.T) {
	h := newHarness(t)
	paidRun(h)
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "pay-1", ToEventID: 6})
	h.reopen()
	task := h.pollWFT("q")
	if task.RunID != r.RunID || task.Events[0].ID != 1 || len(task.Events) != 6 {
		t.Fatalf("task of %s with %d events from %d", task.RunID, len(task.Events), task.Events[0].ID)
	}
	wantTypes(t, task.Events, "WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityCompleted WorkflowReset")
	h.complete(task, completeWF(`"after restart"`))
	evs := h.historyOf("pay-1", r.RunID)
	for i, ev := range evs {
		if ev.ID != int64(i)+1 {
			t.Fatalf("history ids: %s", types(evs))
		}
	}
	if res := h.result("pay-1", r.RunID); res.Status != api.StatusCompleted {
		t.Fatalf("after the restart: %+v", res)
	}
}

// TestForkOfAPausedPaymentHoldsIt: the base's payment is in doubt; a fork
// that makes the same payment is not answered (the base's ledger does not
// know whether it happened) and does not perform it: it holds it.
func TestForkOfAPausedPaymentHoldsIt(t *testing.T) {
	h := newHarness(t)
	h.start("doubt", "Flow")
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	a := h.pollActivity("q")
	if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: a.TaskToken, OutcomeUnknown: true,
		Failure: history.Failure{Message: "vendor timed out"}}); err != nil {
		t.Fatal(err)
	}
	h.fork(api.ForkWorkflowRequest{WorkflowID: "doubt", AtEventID: 2, NewWorkflowID: "doubt-f"})
	h.complete(h.pollWFT("q"), payCmd("1", "INV-9"))
	h.noActivity("q")
	held, _ := find[*history.ActivityHeld](t, h.historyOf("doubt-f", ""))
	if !strings.Contains(held.Reason, "outcome is not known") {
		t.Fatalf("held: %+v", held)
	}
}

// TestResetKeepsTheUpdatesOfItsPrefix: an update accepted and completed
// before the point belongs to the new run too: sent again with its id, it
// is answered from the record (its completion read from the base's
// stored events), not applied a second time.
func TestResetKeepsTheUpdatesOfItsPrefix(t *testing.T) {
	h := newHarness(t)
	h.start("up", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	ch := async(func() (*api.UpdateWorkflowResponse, error) {
		return h.eng.UpdateWorkflow(h.ctx(), &api.UpdateWorkflowRequest{WorkflowID: "up", UpdateID: "u1", Name: "decide"})
	})
	h.respondValidation("decide", "")
	h.complete(h.pollWFT("q"), completeUpdate("u1", `"yes"`))
	if r := <-ch; r.err != nil || string(r.v.Result.Data) != `"yes"` {
		t.Fatalf("update: %+v %v", r.v, r.err)
	}
	h.signal("up", "poke", `1`)
	task := h.pollWFT("q") // its completion is the point
	h.complete(task)
	last := h.history("up")
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "up", ToEventID: last[len(last)-1].ID})
	again, err := h.eng.UpdateWorkflow(h.ctx(), &api.UpdateWorkflowRequest{WorkflowID: "up", RunID: r.RunID, UpdateID: "u1", Name: "decide"})
	if err != nil || string(again.Result.Data) != `"yes"` {
		t.Fatalf("the update sent again to the new run: %+v %v", again, err)
	}
	if n := count(h.historyOf("up", r.RunID), history.TypeWorkflowUpdateAccepted); n != 1 {
		t.Fatalf("%d acceptances in the new run's history, want the prefix's one", n)
	}
}
