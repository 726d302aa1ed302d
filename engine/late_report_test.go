package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Deterministic tests of how the engine takes reports of attempts that do
// not hold the lease (engine/machine, report.go), of the drift margin before a
// lost attempt is treated as unable to act, of Reconcile lookups, of tasks
// given back unstarted, of bad task tokens and of leases across a restart.
// The clock is the harness's fake; workers are scripted calls.

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

// loseLease lets the lease of the attempt in hand expire (heartbeatLease)
// and then the drift margin pass, after checking that nothing is
// dispatched a millisecond before the margin is over.
func (h *harness) loseLease(queue string) {
	h.t.Helper()
	h.advance(heartbeatLease.HeartbeatTimeout)
	h.advance(DefaultLeaseDriftMargin - time.Millisecond)
	h.noActivity(queue)
	h.advance(time.Millisecond)
}

// Point 2: a lost attempt is unable to act only after its lease deadline
// plus the drift margin; the Reconcile lookup is dispatched only then, and
// so is the next attempt after "did not happen".
func TestReconcileWaitsForTheDriftMargin(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", true, heartbeatLease)
	first := h.pollActivity("q")
	h.advance(5 * time.Second)
	if hb := h.heartbeat(first, `"half"`); !hb.Deadline.Equal(testStart.Add(15 * time.Second)) {
		t.Fatalf("heartbeat deadline %v", hb.Deadline)
	}
	h.advance(10 * time.Second) // the lease (renewed to +15 s) expires
	if a := h.describe("pay").PendingActivities[0]; a.State != api.ActivityStateReconciling ||
		!a.NextAttemptAt.Equal(testStart.Add(15*time.Second+DefaultLeaseDriftMargin)) {
		t.Fatalf("after the lease: %+v, want reconciling from lease end + margin", a)
	}
	h.advance(DefaultLeaseDriftMargin - time.Millisecond)
	h.noActivity("q")
	h.advance(time.Millisecond)
	lookup := h.pollActivity("q")
	if !lookup.Reconcile || lookup.Attempt != 1 {
		t.Fatalf("lookup task %+v", lookup)
	}
	h.mustReport(lookup, machine.ReportNotHappened, "")
	// The lookup ran after the margin: the next attempt goes at once.
	second := h.pollActivity("q")
	if second.Reconcile || second.Attempt != 2 {
		t.Fatalf("second attempt %+v", second)
	}
}

// An attempt that reports an unknown outcome before its lease ends has
// stopped, but its request may still be on its way: the lookup waits the
// margin from the report.
func TestReportedUnknownWaitsForTheMarginToo(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", true, heartbeatLease)
	first := h.pollActivity("q")
	h.advance(2 * time.Second)
	h.mustReport(first, machine.ReportUnknown, "vendor timed out")
	h.advance(DefaultLeaseDriftMargin - time.Millisecond)
	h.noActivity("q")
	h.advance(time.Millisecond)
	if l := h.pollActivity("q"); !l.Reconcile {
		t.Fatalf("lookup task %+v", l)
	}
}

// Point 6: a Reconcile lookup is a read. One that loses its lease, or
// fails with an error, is asked again; the run pauses only when the lookup
// says it cannot tell, or after maxLookups tries.
func TestReconcileLookupIsAskedAgain(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", true, heartbeatLease)
	h.pollActivity("q")
	h.loseLease("q")
	lookup := h.pollActivity("q")
	h.advance(heartbeatLease.HeartbeatTimeout) // the lookup's worker died
	again := h.pollActivity("q")
	if !again.Reconcile || again.LeaseEpoch == lookup.LeaseEpoch {
		t.Fatalf("the lookup was not dispatched again: %+v", again)
	}
	h.mustReport(again, machine.ReportFailed, "provider API 503")
	h.advance(2 * time.Second) // the retry policy's backoff after the second lookup
	third := h.pollActivity("q")
	if !third.Reconcile {
		t.Fatalf("third lookup %+v", third)
	}
	if evs := h.history("pay"); count(evs, history.TypeActivityOutcomeUnknown) != 0 {
		t.Fatalf("paused on a lookup that can be asked again:\n%s", types(evs))
	}
	h.mustReport(third, machine.ReportUnknown, "the provider cannot tell")
	if d := h.describe("pay"); d.Info.Status != api.StatusPaused {
		t.Fatalf("status %s after the lookup said it cannot tell, want paused", d.Info.Status)
	}
}

func TestReconcileLookupGivesUpAfterMaxLookups(t *testing.T) {
	const maxLookups = 10 // the machine's bound
	h := newHarness(t)
	h.startPayment("pay", true, heartbeatLease)
	h.pollActivity("q")
	h.loseLease("q")
	for i := range maxLookups {
		l := h.pollActivity("q")
		if !l.Reconcile {
			t.Fatalf("lookup %d: %+v", i+1, l)
		}
		h.mustReport(l, machine.ReportFailed, "provider API 503")
		h.advance(time.Hour)
	}
	d := h.describe("pay")
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil {
		t.Fatalf("after %d failed lookups: %+v", maxLookups, d.Info)
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

// Point 4: the late success of the attempt a Reconcile lookup (or a
// person) resolved as happened is a confirmation; a different result is a
// conflict. Neither is a duplicate.
func TestLateSuccessOfTheResolvedAttemptIsAConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name, late string
		verdict    api.EffectVerdict
	}{{"same result", `"pay_1"`, api.VerdictConfirmation}, {"another result", `"pay_9"`, api.VerdictConflict}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.startPayment("pay", true, heartbeatLease)
			first := h.pollActivity("q")
			h.loseLease("q")
			h.mustReport(h.pollActivity("q"), machine.ReportCompleted, `"pay_1"`) // the lookup found it
			err := h.report(first, machine.ReportCompleted, tc.late)
			wantErr(t, err, api.ErrStaleAttempt)
			evs := h.history("pay")
			if count(evs, history.TypeActivityDuplicateDetected) != 0 {
				t.Fatalf("a duplicate alarm for one payment:\n%s", types(evs))
			}
			lr, _ := find[*history.ActivityLateReport](t, evs)
			if lr.Verdict != tc.verdict.String() || lr.Attempt != 1 {
				t.Fatalf("late report %+v, want %s of attempt 1", lr, tc.verdict)
			}
			d := h.describe("pay")
			if d.Info.Duplicates != 0 || len(d.EffectReports) != 1 || d.EffectReports[0].Verdict != tc.verdict {
				t.Fatalf("describe %+v %+v", d.Info, d.EffectReports)
			}
		})
	}
}

// A late success while the retry it raced runs waits for the retry's
// outcome: the retry failing means only the late attempt performed the
// action (its result is the outcome, no alarm); the retry succeeding too
// is a proven duplicate.
func TestLateSuccessWhileTheRetryRuns(t *testing.T) {
	setup := func(t *testing.T) (*harness, *api.ActivityTask, *api.ActivityTask) {
		h := newHarness(t)
		h.startPayment("pay", true, heartbeatLease)
		first := h.pollActivity("q")
		h.loseLease("q")
		h.mustReport(h.pollActivity("q"), machine.ReportNotHappened, "")
		second := h.pollActivity("q")
		h.mustReport(first, machine.ReportCompleted, `"pay_1"`) // accepted: held until attempt 2 reports
		return h, first, second
	}
	t.Run("the retry fails", func(t *testing.T) {
		h, _, second := setup(t)
		h.mustReport(second, machine.ReportFailed, "card declined")
		evs := h.history("pay")
		c, _ := find[*history.ActivityCompleted](t, evs)
		if string(c.Result.Data) != `"pay_1"` || count(evs, history.TypeActivityDuplicateDetected) != 0 {
			t.Fatalf("completed %+v:\n%s", c, types(evs))
		}
	})
	t.Run("the retry succeeds too", func(t *testing.T) {
		h, _, second := setup(t)
		h.mustReport(second, machine.ReportCompleted, `"pay_2"`)
		evs := h.history("pay")
		dup, _ := find[*history.ActivityDuplicateDetected](t, evs)
		c, _ := find[*history.ActivityCompleted](t, evs)
		if dup.Attempt != 1 || dup.OtherAttempt != 2 || dup.Possible || string(c.Result.Data) != `"pay_2"` {
			t.Fatalf("duplicate %+v, completed %+v", dup, c)
		}
	})
}

// A late success while the next attempt waits to be dispatched decides
// the action: no second attempt runs at all.
func TestLateSuccessBeforeTheRetryStarts(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", false, heartbeatLease)
	first := h.pollActivity("q")
	h.advance(heartbeatLease.HeartbeatTimeout) // paused
	if _, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "pay", Resolution: history.ResolvedNotHappened,
		Identity: "clerk", Reason: "nothing at the provider"}); err != nil {
		t.Fatal(err)
	}
	h.mustReport(first, machine.ReportCompleted, `"pay_1"`) // within the margin: the retry has not started
	h.advance(DefaultLeaseDriftMargin)
	h.noActivity("q")
	evs := h.history("pay")
	c, _ := find[*history.ActivityCompleted](t, evs)
	if string(c.Result.Data) != `"pay_1"` || count(evs, history.TypeActivityStarted) != 1 {
		t.Fatalf("completed %+v:\n%s", c, types(evs))
	}
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

// A late "did not happen" (error, give-back) of the attempt a run is
// paused on proves the action did not happen: the pause resolves itself.
func TestLateGiveBackResolvesThePause(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", false, heartbeatLease)
	first := h.pollActivity("q")
	h.advance(heartbeatLease.HeartbeatTimeout) // paused on attempt 1: its report still counts
	h.mustReport(first, machine.ReportNotStarted, "")
	res, _ := find[*history.ActivityResolved](t, h.history("pay"))
	if res.Resolution != history.ResolvedNotHappened {
		t.Fatalf("resolved %+v", res)
	}
	h.advance(DefaultLeaseDriftMargin)
	if second := h.pollActivity("q"); second.Attempt != 2 {
		t.Fatalf("next attempt %+v", second)
	}
}

// Point 1, the engine's side: a task given back unstarted by the attempt
// holding the lease is dispatched again, the same attempt, at once; a
// give-back of an attempt that no longer holds the lease changes nothing
// for the current one.
func TestGiveBack(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", true, heartbeatLease)
	first := h.pollActivity("q")
	h.mustReport(first, machine.ReportNotStarted, "")
	again := h.pollActivity("q")
	if again.Attempt != 1 || again.LeaseEpoch == first.LeaseEpoch || again.Reconcile {
		t.Fatalf("after the give-back: %+v", again)
	}
	if d := h.describe("pay").PendingActivities[0]; d.LastFailure == nil || d.LastFailure.Type != "NotStarted" {
		t.Fatalf("the give-back is not visible: %+v", d)
	}
	h.mustReport(first, machine.ReportNotStarted, "") // the same report again: the same answer
	if a := h.describe("pay").PendingActivities[0]; a.LeaseEpoch != again.LeaseEpoch || a.State != api.ActivityStateStarted {
		t.Fatalf("a repeated give-back moved the current attempt: %+v", a)
	}
	// Attempt 1 loses its lease for good; a lookup finds nothing; attempt
	// 2 runs. A give-back of attempt 1 arriving now is stale: it records
	// that attempt 1 did nothing and leaves attempt 2 alone.
	h.loseLease("q")
	h.mustReport(h.pollActivity("q"), machine.ReportNotHappened, "")
	second := h.pollActivity("q")
	wantErr(t, h.report(again, machine.ReportNotStarted, ""), api.ErrStaleAttempt)
	if a := h.describe("pay").PendingActivities[0]; a.LeaseEpoch != second.LeaseEpoch || a.State != api.ActivityStateStarted || a.Attempt != 2 {
		t.Fatalf("a stale give-back moved the current attempt: %+v", a)
	}
	h.mustReport(second, machine.ReportCompleted, `"pay_2"`)
	if evs := h.history("pay"); count(evs, history.TypeActivityDuplicateDetected) != 0 || count(evs, history.TypeActivityCompleted) != 1 {
		t.Fatalf("history:\n%s", types(evs))
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

// A Reconcile lookup that reports after it lost its lease proves nothing
// about the attempts of the action: refused, never judged (here the
// action's own late success decided it while the lookup still ran).
func TestStaleLookupIsNoAttempt(t *testing.T) {
	h := newHarness(t)
	h.startPayment("pay", true, heartbeatLease)
	first := h.pollActivity("q")
	h.loseLease("q")
	lookup := h.pollActivity("q")
	h.mustReport(first, machine.ReportCompleted, `"pay_1"`) // the frozen attempt wakes up: it paid
	wantErr(t, h.report(lookup, machine.ReportCompleted, `"pay_1"`), api.ErrStaleAttempt)
	evs := h.history("pay")
	if count(evs, history.TypeActivityDuplicateDetected) != 0 || count(evs, history.TypeActivityLateReport) != 0 {
		t.Fatalf("the stale lookup's answer was judged:\n%s", types(evs))
	}
	c, _ := find[*history.ActivityCompleted](t, evs)
	if string(c.Result.Data) != `"pay_1"` {
		t.Fatalf("completed %+v", c)
	}
}
