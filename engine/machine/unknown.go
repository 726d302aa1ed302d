package machine

import (
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Unknown outcomes: an attempt of a SideEffect action that lost its lease
// or could not tell what it did leaves the action in question until a
// Reconcile lookup, a person or a later report decides it (see
// report.go for the reports that decide it).

// maxLookups bounds the Reconcile lookups dispatched for one unknown
// outcome: after that many failed or lost lookups the run pauses.
const maxLookups = 10

// notHappenedBy resolves the action the run waits on as not happened,
// because an attempt's own report proves it (and no other attempt may
// have performed it), and dispatches the next attempt.
func (t *transition) notHappenedBy(a *ActivityInfo, by, reason string) {
	if a.Doubt != "" {
		return // an attempt of the lost range may have performed it: only a lookup or a person decides (doubt.go)
	}
	for i := range a.Attempts {
		if a.Attempts[i].Fate.mayHave() {
			return // another attempt may have performed it: it stays to be decided
		}
	}
	t.add(&history.ActivityResolved{ScheduledEventID: a.ScheduledEventID, Resolution: history.ResolvedNotHappened, By: by, Reason: reason})
	t.ledger(a, LedgerNotHappened, history.Payload{})
	a.Reconciling, a.UnknownReason = false, ""
	a.Doubt, a.DoubtSince = "", time.Time{} // decided by a lookup or a person
	a.Attempt++
	a.StartedEventID = 0
	t.after(a, a.QuietUntil)
}

// after dispatches a's next attempt (or its lookup) at at: now when at has
// passed, else once the activity has waited in ActivityStateBackoff.
func (t *transition) after(a *ActivityInfo, at time.Time) {
	if !at.After(t.now) {
		t.readyActivity(a)
		return
	}
	a.State, a.NextAttemptAt, a.QuietWait = api.ActivityStateBackoff, at, true
	a.LeaseEpoch, a.LeaseDeadline = 0, time.Time{}
	t.deadline(Deadline{At: at, Kind: DeadlineQuiet, ID: a.ScheduledEventID, Epoch: int64(a.Attempt)})
}

// leaseLost decides what an attempt whose outcome is unknown means, by
// effect class: Read and Idempotent retry (Idempotent with the same key),
// SideEffect reconciles or pauses. from is when the attempt was last able
// to act (the report's arrival, or the lease's end): no lookup and no next
// attempt is dispatched before from (at the latest, its lease deadline)
// plus the drift margin.
func (t *transition) leaseLost(a *ActivityInfo, reason string, from time.Time) {
	if rec := a.record(a.LeaseEpoch); rec != nil && rec.Fate == FateRunning {
		rec.Fate = FateUnknown
	}
	if a.Effect != history.SideEffect {
		t.retryOrFail(a, &history.Failure{Type: "LeaseLost", Message: reason}, "start_to_close")
		return
	}
	if len(a.Late) > 0 {
		t.completeLate(a, a.Late[0]) // an earlier attempt performed it: that is the outcome
		return
	}
	if !a.LeaseDeadline.IsZero() && a.LeaseDeadline.Before(from) {
		from = a.LeaseDeadline
	}
	if q := from.Add(t.m.DriftMargin); q.After(a.QuietUntil) {
		a.QuietUntil = q
	}
	if a.HasReconcile {
		a.Reconciling, a.Lookups = true, 0
		a.StartedEventID = 0
		t.after(a, a.QuietUntil)
		return
	}
	t.pause(a, reason)
}

// pause records an unknown outcome: the run waits for a person.
func (t *transition) pause(a *ActivityInfo, reason string) {
	a.State = api.ActivityStateUnknown
	a.Reconciling, a.QuietWait = false, false
	a.UnknownReason = reason
	a.UnknownSince = t.now
	t.add(&history.ActivityOutcomeUnknown{ScheduledEventID: a.ScheduledEventID, StartedEventID: a.StartedEventID,
		Attempt: a.Attempt, Reason: reason, IdempotencyKey: a.IdempotencyKey})
	t.ledger(a, LedgerUnknown, history.Payload{})
}

// lookupAnswer acts on what a Reconcile lookup reported.
func (t *transition) lookupAnswer(a *ActivityInfo, r AttemptReport) {
	f := r.Failure
	switch r.Kind {
	case ReportCompleted:
		a.Reconciling = false
		t.add(&history.ActivityResolved{ScheduledEventID: a.ScheduledEventID, Resolution: history.ResolvedHappened, Result: r.Result,
			By: "reconcile", Reason: "the Reconcile lookup found the action", ResultOmitted: r.ResultOmitted})
		t.happened(a, r.Result)
		t.omitted(a, r.ResultOmitted)
	case ReportNotHappened:
		t.add(&history.ActivityResolved{ScheduledEventID: a.ScheduledEventID, Resolution: history.ResolvedNotHappened,
			By: "reconcile", Reason: "the Reconcile lookup found no trace of the action"})
		t.notHappened(a)
	case ReportUnknown:
		t.pause(a, "the Reconcile lookup could not tell whether the action happened: "+fmtFailure(&f))
	case ReportNotStarted:
		a.LeaseEpoch, a.LeaseDeadline = 0, time.Time{}
		t.readyActivity(a)
	default: // the lookup failed: it is a read, so it is asked again
		a.LastFailure = &f
		t.lookupAgain(a, t.m.backoff(a.Options.RetryPolicy, a.Lookups), "failed: "+fmtFailure(&f))
	}
}

// lookupAgain dispatches the Reconcile lookup again after wait, or pauses
// the run once maxLookups lookups have failed or lost their lease.
func (t *transition) lookupAgain(a *ActivityInfo, wait time.Duration, why string) {
	if a.Lookups >= maxLookups {
		t.pause(a, fmt.Sprintf("the Reconcile lookup did not answer after %d tries (the last %s)", a.Lookups, why))
		return
	}
	t.after(a, t.now.Add(wait))
}

// happened finishes the action as performed with result, attributed to the
// attempt in question (the latest one that may have performed it); the
// others that may have are possible duplicates.
func (t *transition) happened(a *ActivityInfo, result history.Payload) {
	var performer *AttemptRecord
	for i := len(a.Attempts) - 1; i >= 0; i-- {
		if a.Attempts[i].Fate.mayHave() {
			performer = &a.Attempts[i]
			break
		}
	}
	if performer != nil {
		performer.Fate, performer.ResultSum = FatePerformed, resultSum(result)
	}
	t.judgeOthers(a, performer, outcomeCompleted)
	t.finishActivity(a, LedgerCompleted, result)
}

// notHappened applies "the action did not happen" (by a lookup or a
// person): every attempt in question did not perform it, and the next
// attempt runs with the same key once they can no longer act.
func (t *transition) notHappened(a *ActivityInfo) {
	for i := range a.Attempts {
		if a.Attempts[i].Fate.mayHave() {
			a.Attempts[i].Fate = FateNotPerformed
		}
	}
	t.ledger(a, LedgerNotHappened, history.Payload{})
	a.Reconciling, a.UnknownReason = false, ""
	a.Doubt, a.DoubtSince = "", time.Time{} // decided by a lookup or a person
	a.Attempt++
	a.StartedEventID = 0
	t.after(a, a.QuietUntil)
}
