package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Reports of attempts that do not hold the lease, where the store takes
// part: reports after the run closed (judged from the stored ledger entry),
// the ledger across runs, the effects list and the store checker, bad task
// tokens, and leases and heartbeat details across a restart. The clock is
// the harness's fake; workers are scripted calls. How the machine judges
// such reports, the drift margin, Reconcile lookups and tasks given back
// unstarted are scripted in engine/machine (late_test.go).

// heartbeatLease is the lease of the activities below: a heartbeat
// timeout of 10 s within a start-to-close of an hour.
var heartbeatLease = history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second}

// startPayment starts run id with one SideEffect SendPayment (event 3).
func (h *harness) startPayment(id string, reconcile bool, opts history.ActivityOptions) {
	h.t.Helper()
	h.start(id, "PayInvoice")
	c := schedule("1", "SendPayment", history.SideEffect, opts)
	c.ScheduleActivity.HasReconcile = reconcile
	h.complete(h.pollWFT("q"), c)
}

func (h *harness) report(task *api.ActivityTask, kind machine.ReportKind, result string) error {
	h.t.Helper()
	switch kind {
	case machine.ReportCompleted:
		_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(result),
			Identity: "w"})
		return err
	default:
		req := &api.FailActivityRequest{TaskToken: task.TaskToken, Failure: history.Failure{Message: result}, Identity: "w"}
		switch kind {
		case machine.ReportUnknown:
			req.OutcomeUnknown = true
		case machine.ReportNotHappened:
			req.NotHappened = true
		case machine.ReportNotStarted:
			req.NotStarted = true
		}
		_, err := h.eng.FailActivity(h.ctx(), req)
		return err
	}
}

func (h *harness) mustReport(task *api.ActivityTask, kind machine.ReportKind, result string) {
	h.t.Helper()
	if err := h.report(task, kind, result); err != nil {
		h.t.Fatalf("report %s of attempt %d: %v", kind, task.Attempt, err)
	}
}

// Point 4: reports are idempotent. The current attempt's report sent
// twice (the reply to the first was lost) is acknowledged again with the
// original outcome, writing nothing; a different second report is refused.
func TestRepeatedReportIsAcknowledged(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", false, heartbeatLease)
	a := h.pollActivity("q")
	h.mustReport(a, machine.ReportCompleted, `"pay_1"`)
	n := h.historyLen("pay")
	h.mustReport(a, machine.ReportCompleted, `"pay_1"`) // the retry of a report whose reply was lost
	if err := h.report(a, machine.ReportCompleted, `"pay_X"`); !errors.Is(err, api.ErrStaleAttempt) {
		t.Fatalf("another result from the same attempt: %v, want ErrStaleAttempt", err)
	}
	if h.historyLen("pay") != n {
		t.Fatalf("the repeated report wrote events:\n%s", types(h.history("pay")))
	}
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	h.mustReport(a, machine.ReportCompleted, `"pay_1"`) // after the run closed too
	if d := h.describe("pay"); d.Info.Duplicates != 0 || len(d.EffectReports) != 0 {
		t.Fatalf("a repeated report is no late report: %+v %+v", d.Info, d.EffectReports)
	}

	// A failure report repeated while the retry waits.
	h.startWithActivity("flaky", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute})
	f := h.pollActivity("q")
	h.mustReport(f, machine.ReportFailed, "declined")
	h.mustReport(f, machine.ReportFailed, "declined")
}

// A stale "outcome unknown" for an action another attempt performed is a
// possible duplicate: durable and visible, never silently refused.
func TestStaleUnknownIsAPossibleDuplicate(t *testing.T) {
	h := newHarness(t)
	first, _ := payLostThenRetried(t, h)
	wantErr(t, h.report(first, machine.ReportUnknown, "vendor timed out"), api.ErrStaleAttempt)
	evs := h.history("pay")
	dup, _ := find[*history.ActivityDuplicateDetected](t, evs)
	if !dup.Possible || dup.Attempt != 1 || dup.OtherAttempt != 2 || dup.Outcome != "outcome_unknown" {
		t.Fatalf("duplicate %+v", dup)
	}
	effects, err := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{DuplicatesOnly: true})
	if err != nil || len(effects.Effects) != 1 || effects.Effects[0].Reports[0].Verdict != api.VerdictPossibleDuplicate {
		t.Fatalf("ListEffects %+v %v", effects, err)
	}
	h.wantConsistent()
	// A stale error is no alarm: it says that attempt did nothing.
	h2 := newHarness(t)
	first2, _ := payLostThenRetried(t, h2)
	wantErr(t, h2.report(first2, machine.ReportFailed, "connection refused"), api.ErrStaleAttempt)
	if n := count(h2.history("pay"), history.TypeActivityDuplicateDetected); n != 0 {
		t.Fatalf("%d duplicates for a stale failure", n)
	}
}

// Point 4: a terminated run's in-flight attempt that completes afterwards
// records its outcome on the ledger entry, so the next run of the workflow
// id is deduplicated with it instead of pausing.
func TestTerminatedRunsLateSuccessDeduplicatesTheNextRun(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", false, heartbeatLease)
	a := h.pollActivity("q")
	h.terminate("pay")
	h.mustReport(a, machine.ReportCompleted, `"pay_1"`) // accepted: it decides the action's outcome
	if d := h.describe("pay"); d.Info.Duplicates != 0 {
		t.Fatalf("a duplicate for the only payment: %+v", d.Info)
	}
	h.startPayment("pay", false, heartbeatLease)
	evs := h.history("pay")
	d, _ := find[*history.ActivityDeduplicated](t, evs)
	if string(d.Result.Data) != `"pay_1"` || count(evs, history.TypeActivityOutcomeUnknown) != 0 {
		t.Fatalf("deduplicated %+v:\n%s", d, types(evs))
	}
	h.wantConsistent()
}

// wantConsistent runs the store checker (cairn check): the ledger states a
// late report set agree with what the check expects.
func (h *harness) wantConsistent() {
	h.t.Helper()
	r, err := Check(h.ctx(), h.store)
	if err != nil || !r.OK() {
		h.t.Fatalf("check: %v, problems %+v", err, r.Problems)
	}
}

// Point 9: a task token naming an event the run does not have, or one
// that is not an activity, is the client's mistake: invalid argument, and
// the run goes on (it is not quarantined as corrupt).
func TestBadActivityTokenIsInvalidArgument(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", false, heartbeatLease)
	a := h.pollActivity("q")
	var tok actToken
	if err := decodeToken(a.TaskToken, &tok); err != nil {
		t.Fatal(err)
	}
	for _, s := range []int64{999, 0, -1, 1} { // beyond the history, none, negative, WorkflowStarted
		bad := tok
		bad.S = s
		_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: encodeToken(&bad)})
		if !errors.Is(err, api.ErrInvalidArgument) || errors.Is(err, history.ErrCorrupt) {
			t.Fatalf("token naming event %d: %v, want invalid argument", s, err)
		}
	}
	h.mustReport(a, machine.ReportCompleted, `"ok"`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	bad := tok
	bad.S = 999
	_, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: encodeToken(&bad)})
	if !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("token naming event 999 of a closed run: %v", err)
	}
	bad.R = "no-such-run"
	_, err = h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: encodeToken(&bad)})
	if !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("token naming a missing run: %v", err)
	}
	if d := h.describe("pay"); d.Info.Corrupt != "" || d.Info.Status != api.StatusCompleted {
		t.Fatalf("the run after bad tokens: %+v", d.Info)
	}
}

// Heartbeats extend leases in memory only: after a restart the engine
// cannot know the last deadline it granted, so a lease with a heartbeat
// timeout runs at least a heartbeat timeout past the restart. A live
// worker's heartbeat renews it; the drift margin then applies as always.
func TestRestartExtendsHeartbeatLeases(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", true, heartbeatLease)
	a := h.pollActivity("q")
	h.advance(8 * time.Second)
	h.heartbeat(a, `"progress"`) // the lease now ends at +18 s, in memory
	h.advance(4 * time.Second)
	h.reopen() // at +12 s: the stored lease ended at +10 s
	if p := h.describe("pay").PendingActivities[0]; p.State != api.ActivityStateStarted || !p.LeaseExpires.Equal(testStart.Add(22*time.Second)) {
		t.Fatalf("after the restart: %+v, want started with the lease to +22 s", p)
	}
	h.advance(9 * time.Second)
	h.heartbeat(a, `"more"`)
	h.advance(9 * time.Second)
	h.mustReport(a, machine.ReportCompleted, `"pay_1"`)
	if evs := h.history("pay"); count(evs, history.TypeActivityResolved) != 0 || count(evs, history.TypeActivityCompleted) != 1 {
		t.Fatalf("history:\n%s", types(evs))
	}
}

// Point 8: the attempt's last heartbeat details travel with its failure;
// the next attempt receives them, also after a restart.
func TestHeartbeatDetailsFlushedWithTheFailure(t *testing.T) {
	h := newHarness(t)
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second}})
	a := h.pollActivity("q")
	h.heartbeat(a, `"page 1"`)
	if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: a.TaskToken, Failure: history.Failure{Message: "boom"},
		HeartbeatDetails: jsonPayload(`"page 7"`)}); err != nil {
		t.Fatal(err)
	}
	h.reopen()
	h.advance(time.Second)
	if b := h.pollActivity("q"); string(b.HeartbeatDetails.Data) != `"page 7"` {
		t.Fatalf("next attempt's details %q, want the last ones", b.HeartbeatDetails.Data)
	}
}
