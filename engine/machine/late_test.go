package machine

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// How the machine takes reports of attempts that do not hold the lease
// (report.go, late.go, closed.go), the drift margin before a lost attempt
// is treated as unable to act, Reconcile lookups and tasks given back
// unstarted, scripted as the engine's tests drove them through the
// service (see newServiceScript).

// heartbeatLease is the lease of the activities below: a heartbeat
// timeout of 10 s within a start-to-close of an hour.
var heartbeatLease = history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second}

// startPayment starts run id with one SideEffect SendPayment (event 3).
func (s *script) startPayment(id string, reconcile bool, opts history.ActivityOptions) {
	s.t.Helper()
	s.start(api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "PayInvoice", TaskQueue: "q", Input: jsonPayload(`"in"`)})
	c := schedule("1", "SendPayment", history.SideEffect, opts)
	c.ScheduleActivity.HasReconcile = reconcile
	s.complete(c)
}

// loseLease lets the lease of the attempt in hand expire (heartbeatLease)
// and then the drift margin pass, after checking that nothing is
// dispatched a millisecond before the margin is over.
func (s *script) loseLease() {
	s.t.Helper()
	s.wait(heartbeatLease.HeartbeatTimeout)
	s.wait(driftMargin - time.Millisecond)
	s.noActivity()
	s.wait(time.Millisecond)
}

// A lost attempt is unable to act only after its lease deadline plus the
// drift margin; the Reconcile lookup is dispatched only then, and so is
// the next attempt after "did not happen".
func TestReconcileWaitsForTheDriftMargin(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", true, heartbeatLease)
	first := s.poll()
	s.wait(5 * time.Second)
	if deadline, _, err := s.heartbeat(first, `"half"`); err != nil || !deadline.Equal(testStart.Add(15*time.Second)) {
		t.Fatalf("heartbeat deadline %v (%v)", deadline, err)
	}
	s.wait(10 * time.Second) // the lease (renewed to +15 s) expires
	if a := s.st.Activities[3]; describedState(a) != api.ActivityStateReconciling ||
		!a.NextAttemptAt.Equal(testStart.Add(15*time.Second+driftMargin)) {
		t.Fatalf("after the lease: %+v, want reconciling from lease end + margin", a)
	}
	s.wait(driftMargin - time.Millisecond)
	s.noActivity()
	s.wait(time.Millisecond)
	lookup := s.poll()
	if !lookup.lookup || lookup.attempt != 1 {
		t.Fatalf("lookup task %+v", lookup)
	}
	s.mustReport(lookup, ReportNotHappened, "")
	// The lookup ran after the margin: the next attempt goes at once.
	if second := s.poll(); second.lookup || second.attempt != 2 {
		t.Fatalf("second attempt %+v", second)
	}
	s.golden()
}

// An attempt that reports an unknown outcome before its lease ends has
// stopped, but its request may still be on its way: the lookup waits the
// margin from the report.
func TestReportedUnknownWaitsForTheMarginToo(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", true, heartbeatLease)
	first := s.poll()
	s.wait(2 * time.Second)
	s.mustReport(first, ReportUnknown, "vendor timed out")
	s.wait(driftMargin - time.Millisecond)
	s.noActivity()
	s.wait(time.Millisecond)
	if l := s.poll(); !l.lookup {
		t.Fatalf("lookup task %+v", l)
	}
	s.golden()
}

// A Reconcile lookup is a read. One that loses its lease, or fails with
// an error, is asked again; the run pauses only when the lookup says it
// cannot tell, or after maxLookups tries.
func TestReconcileLookupIsAskedAgain(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", true, heartbeatLease)
	s.poll()
	s.loseLease()
	lookup := s.poll()
	s.wait(heartbeatLease.HeartbeatTimeout) // the lookup's worker died
	again := s.poll()
	if !again.lookup || again.epoch == lookup.epoch {
		t.Fatalf("the lookup was not dispatched again: %+v", again)
	}
	s.mustReport(again, ReportFailed, "provider API 503")
	s.wait(2 * time.Second) // the retry policy's backoff after the second lookup
	third := s.poll()
	if !third.lookup {
		t.Fatalf("third lookup %+v", third)
	}
	if count(s.history, history.TypeActivityOutcomeUnknown) != 0 {
		t.Fatalf("paused on a lookup that can be asked again:\n%s", types(s.history))
	}
	s.mustReport(third, ReportUnknown, "the provider cannot tell")
	if got := s.st.EffectiveStatus(); got != api.StatusPaused {
		t.Fatalf("status %s after the lookup said it cannot tell, want paused", got)
	}
	s.golden()
}

func TestReconcileLookupGivesUpAfterMaxLookups(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", true, heartbeatLease)
	s.poll()
	s.loseLease()
	for i := range maxLookups {
		l := s.poll()
		if !l.lookup {
			t.Fatalf("lookup %d: %+v", i+1, l)
		}
		s.mustReport(l, ReportFailed, "provider API 503")
		s.wait(time.Hour)
	}
	if s.st.EffectiveStatus() != api.StatusPaused || s.st.Paused() == nil {
		t.Fatalf("after %d failed lookups: %s, paused on %+v", maxLookups, s.st.EffectiveStatus(), s.st.Paused())
	}
	s.golden()
}

// The late success of the attempt a Reconcile lookup (or a person)
// resolved as happened is a confirmation; a different result is a
// conflict. Neither is a duplicate.
func TestLateSuccessOfTheResolvedAttemptIsAConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name, late string
		verdict    api.EffectVerdict
	}{{"same result", `"pay_1"`, api.VerdictConfirmation}, {"another result", `"pay_9"`, api.VerdictConflict}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServiceScript(t)
			s.startPayment("pay", true, heartbeatLease)
			first := s.poll()
			s.loseLease()
			s.mustReport(s.poll(), ReportCompleted, `"pay_1"`) // the lookup found it
			wantErr(t, s.report(first, ReportCompleted, tc.late), api.ErrStaleAttempt)
			if count(s.history, history.TypeActivityDuplicateDetected) != 0 {
				t.Fatalf("a duplicate alarm for one payment:\n%s", types(s.history))
			}
			lr, _ := find[*history.ActivityLateReport](t, s.history)
			if lr.Verdict != tc.verdict.String() || lr.Attempt != 1 {
				t.Fatalf("late report %+v, want %s of attempt 1", lr, tc.verdict)
			}
			if s.st.Duplicates != 0 || len(s.reports) != 1 || s.reports[0].Verdict != tc.verdict {
				t.Fatalf("duplicates %d, reports %+v", s.st.Duplicates, s.reports)
			}
			s.golden()
		})
	}
}

// A late success while the retry it raced runs waits for the retry's
// outcome: the retry failing means only the late attempt performed the
// action (its result is the outcome, no alarm); the retry succeeding too
// is a proven duplicate.
func TestLateSuccessWhileTheRetryRuns(t *testing.T) {
	setup := func(t *testing.T) (*script, task) {
		s := newServiceScript(t)
		s.startPayment("pay", true, heartbeatLease)
		first := s.poll()
		s.loseLease()
		s.mustReport(s.poll(), ReportNotHappened, "")
		second := s.poll()
		s.mustReport(first, ReportCompleted, `"pay_1"`) // accepted: held until attempt 2 reports
		return s, second
	}
	t.Run("the retry fails", func(t *testing.T) {
		s, second := setup(t)
		s.mustReport(second, ReportFailed, "card declined")
		c, _ := find[*history.ActivityCompleted](t, s.history)
		if string(c.Result.Data) != `"pay_1"` || count(s.history, history.TypeActivityDuplicateDetected) != 0 {
			t.Fatalf("completed %+v:\n%s", c, types(s.history))
		}
		s.golden()
	})
	t.Run("the retry succeeds too", func(t *testing.T) {
		s, second := setup(t)
		s.mustReport(second, ReportCompleted, `"pay_2"`)
		dup, _ := find[*history.ActivityDuplicateDetected](t, s.history)
		c, _ := find[*history.ActivityCompleted](t, s.history)
		if dup.Attempt != 1 || dup.OtherAttempt != 2 || dup.Possible || string(c.Result.Data) != `"pay_2"` {
			t.Fatalf("duplicate %+v, completed %+v", dup, c)
		}
		s.golden()
	})
}

// A late success while the next attempt waits to be dispatched decides
// the action: no second attempt runs at all.
func TestLateSuccessBeforeTheRetryStarts(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", false, heartbeatLease)
	first := s.poll()
	s.wait(heartbeatLease.HeartbeatTimeout) // paused
	s.resolve(api.ResolveActivityRequest{WorkflowID: "pay", Resolution: history.ResolvedNotHappened, Identity: "clerk",
		Reason: "nothing at the provider"})
	s.mustReport(first, ReportCompleted, `"pay_1"`) // within the margin: the retry has not started
	s.wait(driftMargin)
	s.noActivity()
	c, _ := find[*history.ActivityCompleted](t, s.history)
	if string(c.Result.Data) != `"pay_1"` || count(s.history, history.TypeActivityStarted) != 1 {
		t.Fatalf("completed %+v:\n%s", c, types(s.history))
	}
	s.golden()
}

// A late "did not happen" (error, give-back) of the attempt a run is
// paused on proves the action did not happen: the pause resolves itself.
func TestLateGiveBackResolvesThePause(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", false, heartbeatLease)
	first := s.poll()
	s.wait(heartbeatLease.HeartbeatTimeout) // paused on attempt 1: its report still counts
	s.mustReport(first, ReportNotStarted, "")
	if res, _ := find[*history.ActivityResolved](t, s.history); res.Resolution != history.ResolvedNotHappened {
		t.Fatalf("resolved %+v", res)
	}
	s.wait(driftMargin)
	if second := s.poll(); second.attempt != 2 {
		t.Fatalf("next attempt %+v", second)
	}
	s.golden()
}

// A task given back unstarted by the attempt holding the lease is
// dispatched again, the same attempt, at once; a give-back of an attempt
// that no longer holds the lease changes nothing for the current one.
func TestGiveBack(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", true, heartbeatLease)
	first := s.poll()
	s.mustReport(first, ReportNotStarted, "")
	again := s.poll()
	if again.attempt != 1 || again.epoch == first.epoch || again.lookup {
		t.Fatalf("after the give-back: %+v", again)
	}
	if a := s.st.Activities[3]; a.LastFailure == nil || a.LastFailure.Type != "NotStarted" {
		t.Fatalf("the give-back is not visible: %+v", a)
	}
	s.mustReport(first, ReportNotStarted, "") // the same report again: the same answer
	if a := s.st.Activities[3]; a.LeaseEpoch != again.epoch || a.State != api.ActivityStateStarted {
		t.Fatalf("a repeated give-back moved the current attempt: %+v", a)
	}
	// Attempt 1 loses its lease for good; a lookup finds nothing; attempt
	// 2 runs. A give-back of attempt 1 arriving now is stale: it records
	// that attempt 1 did nothing and leaves attempt 2 alone.
	s.loseLease()
	s.mustReport(s.poll(), ReportNotHappened, "")
	second := s.poll()
	wantErr(t, s.report(again, ReportNotStarted, ""), api.ErrStaleAttempt)
	if a := s.st.Activities[3]; a.LeaseEpoch != second.epoch || a.State != api.ActivityStateStarted || a.Attempt != 2 {
		t.Fatalf("a stale give-back moved the current attempt: %+v", a)
	}
	s.mustReport(second, ReportCompleted, `"pay_2"`)
	if count(s.history, history.TypeActivityDuplicateDetected) != 0 || count(s.history, history.TypeActivityCompleted) != 1 {
		t.Fatalf("history:\n%s", types(s.history))
	}
	s.golden()
}

// A Reconcile lookup that reports after it lost its lease proves nothing
// about the attempts of the action: refused, never judged (here the
// action's own late success decided it while the lookup still ran).
func TestStaleLookupIsNoAttempt(t *testing.T) {
	s := newServiceScript(t)
	s.startPayment("pay", true, heartbeatLease)
	first := s.poll()
	s.loseLease()
	lookup := s.poll()
	s.mustReport(first, ReportCompleted, `"pay_1"`) // the frozen attempt wakes up: it paid
	wantErr(t, s.report(lookup, ReportCompleted, `"pay_1"`), api.ErrStaleAttempt)
	if count(s.history, history.TypeActivityDuplicateDetected) != 0 || count(s.history, history.TypeActivityLateReport) != 0 {
		t.Fatalf("the stale lookup's answer was judged:\n%s", types(s.history))
	}
	if c, _ := find[*history.ActivityCompleted](t, s.history); string(c.Result.Data) != `"pay_1"` {
		t.Fatalf("completed %+v", c)
	}
	s.golden()
}

// payLostThenRetried runs a SideEffect payment whose attempt 1 loses its
// lease; a person says it did not happen; attempt 2 (dispatched only once
// attempt 1 can no longer act) pays and completes. It returns both tasks.
func payLostThenRetried(t *testing.T, s *script) (first, second task) {
	t.Helper()
	s.start(api.StartWorkflowRequest{WorkflowID: "pay", WorkflowType: "PayInvoice", TaskQueue: "q", Input: jsonPayload(`"in"`)})
	s.complete(schedule("1", "SendPayment", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	first = s.poll()
	s.wait(time.Minute) // the lease of attempt 1 expires: outcome unknown, the run pauses
	if st := s.st.EffectiveStatus(); st != api.StatusPaused {
		t.Fatalf("status %s, want paused", st)
	}
	s.resolve(api.ResolveActivityRequest{WorkflowID: "pay", Resolution: history.ResolvedNotHappened, Identity: "clerk",
		Reason: "not at the provider"})
	// The next attempt waits until attempt 1 can no longer act: its lease
	// deadline plus the drift margin.
	s.noActivity()
	s.wait(driftMargin)
	second = s.poll()
	if second.attempt != 2 || second.key != first.key {
		t.Fatalf("retry: attempt %d key %s, want 2 and %s", second.attempt, second.key, first.key)
	}
	if err := s.succeed(second, `"pay_2"`); err != nil {
		t.Fatal(err)
	}
	return first, second
}

// A stale attempt that reports success after the action was completed by
// a later attempt proves the effect happened twice: it is refused and
// recorded in the run's history and on the ledger entry — once: the same
// report again is answered the same way and recorded nothing more.
func TestStaleSuccessIsADuplicate(t *testing.T) {
	s := newServiceScript(t)
	first, _ := payLostThenRetried(t, s)
	for range 2 {
		r := first.report(ReportCompleted)
		r.Result, r.Identity = jsonPayload(`"pay_1"`), "frozen"
		if err := s.send(r); !errors.Is(err, api.ErrStaleAttempt) {
			t.Fatalf("error %v, want %v", err, api.ErrStaleAttempt)
		}
	}
	if n := count(s.history, history.TypeActivityDuplicateDetected); n != 1 {
		t.Fatalf("%d duplicate events, want 1:\n%s", n, types(s.history))
	}
	dup, _ := find[*history.ActivityDuplicateDetected](t, s.history)
	if dup.Attempt != 1 || dup.OtherAttempt != 2 || dup.Possible || dup.IdempotencyKey != first.key ||
		string(dup.Result.Data) != `"pay_1"` || dup.Identity != "frozen" {
		t.Fatalf("duplicate event: %+v", dup)
	}
	if le := s.ledger[first.key]; le == nil || le.Duplicates != 1 || le.State != LedgerCompleted || le.Attempts != 2 ||
		string(le.Result.Data) != `"pay_2"` {
		t.Fatalf("ledger entry %+v; want completed with pay_2 after two attempts, one duplicate", le)
	}
	if s.st.Duplicates != 1 || len(s.reports) != 1 || s.reports[0].Verdict != api.VerdictDuplicate {
		t.Fatalf("duplicates %d, reports %+v", s.st.Duplicates, s.reports)
	}
	s.golden()
}
