package machine

import (
	"fmt"
	"slices"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Late reports of pending actions: reports of attempts that no longer hold
// the lease while their activity is still pending, judged against the
// attempt records (see report.go).

// decidedByLate finishes an activity whose current attempt did not perform
// it while an earlier attempt reported success late (ActivityInfo.Late):
// that attempt's result is the action's. It reports false when there is
// no such report, or when an attempt whose outcome is unknown may have
// performed it too (then the outcome stays to be decided).
func (t *transition) decidedByLate(a *ActivityInfo) bool {
	if len(a.Late) == 0 {
		return false
	}
	t.completeLate(a, a.Late[0])
	return true
}

// completeLate finishes the activity with the result of late, a success
// reported by an attempt that did not hold the lease, and declares the
// possible duplicates: the other attempts that may have performed it too.
func (t *transition) completeLate(a *ActivityInfo, late LateReport) {
	rec := a.record(late.Epoch)
	if rec != nil {
		rec.Fate, rec.Accepted, rec.ResultSum = FatePerformed, true, resultSum(late.Result)
	}
	// The attempt's ActivityStarted may not be the latest one: the
	// completion names none (StartedEventID 0).
	t.add(&history.ActivityCompleted{ScheduledEventID: a.ScheduledEventID, Result: late.Result, Identity: late.Identity,
		ResultOmitted: late.ResultOmitted, Usage: a.Usage})
	a.Late = slices.DeleteFunc(a.Late, func(l LateReport) bool { return l.Epoch == late.Epoch })
	t.judgeOthers(a, rec, outcomeCompleted)
	t.finishActivity(a, LedgerCompleted, late.Result)
	t.omitted(a, late.ResultOmitted)
}

// judgeOthers declares, once attempt performer has performed the action,
// the duplicates among the other attempts: a late success still held in
// Late is proof; an attempt whose fate is unknown (or still running) may
// have performed it too.
func (t *transition) judgeOthers(a *ActivityInfo, performer *AttemptRecord, _ string) {
	if a.Effect != history.SideEffect || performer == nil {
		return
	}
	for _, l := range a.Late {
		if rec := a.record(l.Epoch); rec != nil {
			rec.Fate, rec.ResultSum = FatePerformed, resultSum(l.Result)
		}
		t.lateReport(a, api.EffectReport{Verdict: api.VerdictDuplicate, Attempt: l.Attempt, LeaseEpoch: l.Epoch, Identity: l.Identity,
			OtherAttempt: performer.Attempt, Outcome: outcomeCompleted, Result: l.Result,
			Detail: fmt.Sprintf("attempt %d reported success after it had lost its lease, and attempt %d performed the action too",
				l.Attempt, performer.Attempt)})
	}
	a.Late = nil
	for i := range a.Attempts {
		rec := &a.Attempts[i]
		if rec.Epoch == performer.Epoch || !rec.Fate.mayHave() {
			continue
		}
		outcome := outcomeLeaseLost
		if rec.Report == ReportUnknown {
			outcome = outcomeUnknown
		}
		t.lateReport(a, api.EffectReport{Verdict: api.VerdictPossibleDuplicate, Attempt: rec.Attempt, LeaseEpoch: rec.Epoch,
			Identity: rec.Identity, OtherAttempt: performer.Attempt, Outcome: outcome,
			Detail: fmt.Sprintf("attempt %d performed the action while attempt %d, whose outcome is unknown (%s), may have performed it too",
				performer.Attempt, rec.Attempt, outcome)})
	}
}

// lateReportOf judges a report of an attempt that does not hold the lease.
func (t *transition) lateReportOf(a *ActivityInfo, key string, le *LedgerEntry, r AttemptReport) (ReportAck, error) {
	st := t.st
	if a == nil {
		if le == nil {
			return 0, r.StaleError(st)
		}
		return t.closedActionReport(key, le, r)
	}
	if a.Effect == history.Read {
		return 0, r.StaleError(st)
	}
	rec := a.record(r.Epoch)
	if rec == nil {
		// No record (the attempt predates records): it may have performed
		// the action, and its next report is the same one.
		a.Attempts = append(a.Attempts, AttemptRecord{Attempt: r.Attempt, Epoch: r.Epoch, Identity: r.Identity, Fate: FateUnknown})
		rec = &a.Attempts[len(a.Attempts)-1]
	}
	if ack, repeated, err := repeatedReport(st, rec, r); repeated {
		return ack, err
	}
	rec.Report = r.Kind
	switch r.Kind {
	case ReportCompleted:
		return t.lateSuccess(a, rec, r), nil
	case ReportUnknown:
		if rec.Fate == FatePerformed {
			break
		}
		rec.Fate = FateUnknown
		t.lateUnknown(a, rec)
	default:
		if rec.Fate.mayHave() {
			rec.Fate = FateNotPerformed
		}
		t.lateNotPerformed(a, rec, r)
	}
	t.ledger(a, 0, history.Payload{}) // the records changed
	return AckStale, nil
}

// repeatedReport answers a report an attempt already made: the same one
// gets the first one's answer; another one is refused.
func repeatedReport(st *RunState, rec *AttemptRecord, r AttemptReport) (ReportAck, bool, error) {
	if rec.Report == ReportNone {
		return 0, false, nil
	}
	same := rec.Report == r.Kind && (r.Kind != ReportCompleted || rec.ResultSum == nil || string(rec.ResultSum) == string(resultSum(r.Result)))
	switch {
	case !same:
		return 0, true, api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: attempt %d already reported %s", r.ScheduledEventID,
			st.WorkflowID, r.Attempt, rec.Report)
	case rec.Accepted:
		return AckAccepted, true, nil
	}
	return 0, true, r.StaleError(st)
}

// lateSuccess judges a success reported by an attempt that does not hold
// the lease of a pending activity.
func (t *transition) lateSuccess(a *ActivityInfo, rec *AttemptRecord, r AttemptReport) ReportAck {
	rec.Fate, rec.ResultSum = FatePerformed, resultSum(r.Result)
	late := LateReport{Attempt: rec.Attempt, Epoch: rec.Epoch, Identity: r.Identity, Result: r.Result, At: t.now,
		ResultOmitted: r.ResultOmitted}
	if a.Effect == history.SideEffect {
		for i := range a.Attempts {
			if o := &a.Attempts[i]; o.Epoch != rec.Epoch && o.Fate == FatePerformed {
				t.lateReport(a, api.EffectReport{Verdict: api.VerdictDuplicate, Attempt: rec.Attempt, LeaseEpoch: rec.Epoch,
					Identity: r.Identity, OtherAttempt: o.Attempt, Outcome: outcomeCompleted, Result: r.Result,
					Detail: fmt.Sprintf("attempt %d reported success after it had lost its lease; attempt %d had performed the action",
						rec.Attempt, o.Attempt)})
				t.ledger(a, 0, history.Payload{})
				return AckStale
			}
		}
		if a.State == api.ActivityStateStarted && !a.Reconciling {
			// Another attempt runs: its outcome decides what this one means.
			a.Late = append(a.Late, late)
			rec.Accepted = true
			t.ledger(a, 0, history.Payload{})
			return AckAccepted
		}
	}
	// Nothing else performed it (or the downstream deduplicates): this is
	// the action's outcome.
	if a.State == api.ActivityStateUnknown {
		a.State = api.ActivityStateStarted // leaving the pause
	}
	t.completeLate(a, late)
	return AckAccepted
}

// lateUnknown applies an unknown outcome reported late: the attempt may
// have performed the action.
func (t *transition) lateUnknown(a *ActivityInfo, rec *AttemptRecord) {
	if a.Effect != history.SideEffect {
		return
	}
	if q := t.now.Add(t.m.DriftMargin); q.After(a.QuietUntil) {
		a.QuietUntil = q
	}
	for i := range a.Attempts {
		if o := &a.Attempts[i]; o.Epoch != rec.Epoch && o.Fate == FatePerformed {
			t.lateReport(a, api.EffectReport{Verdict: api.VerdictPossibleDuplicate, Attempt: rec.Attempt, LeaseEpoch: rec.Epoch,
				Identity: rec.Identity, OtherAttempt: o.Attempt, Outcome: outcomeUnknown,
				Detail: fmt.Sprintf("attempt %d reported after it had lost its lease that its outcome is unknown; attempt %d performed the action",
					rec.Attempt, o.Attempt)})
			return
		}
	}
	switch {
	case a.State == api.ActivityStateBackoff && a.QuietWait:
		if a.NextAttemptAt.Before(a.QuietUntil) {
			t.after(a, a.QuietUntil) // the lookup (or next attempt) waits for this one too
		}
	case a.State == api.ActivityStateScheduled || a.State == api.ActivityStateBackoff:
		// The next attempt has not started: this one may have performed
		// the action, so the outcome is unknown again.
		a.LeaseEpoch = rec.Epoch
		t.leaseLost(a, fmt.Sprintf("attempt %d reported after it had lost its lease that it cannot tell whether the action took effect", rec.Attempt), t.now)
	}
	// Started: the running attempt's outcome decides (the record says this
	// one may have performed it). Unknown or reconciling: already in
	// question.
}

// lateNotPerformed applies a report proving a late attempt did not perform
// the action (an error, a cancellation, a task given back unstarted).
func (t *transition) lateNotPerformed(a *ActivityInfo, rec *AttemptRecord, r AttemptReport) {
	if a.Effect != history.SideEffect {
		return
	}
	switch {
	case a.State == api.ActivityStateUnknown:
		t.notHappenedBy(a, r.Identity, fmt.Sprintf("attempt %d reported after it had lost its lease that it did not perform the action (%s)",
			rec.Attempt, r.Kind))
	case a.Reconciling && a.State == api.ActivityStateBackoff && a.QuietWait:
		t.notHappenedBy(a, r.Identity, fmt.Sprintf("attempt %d reported after it had lost its lease that it did not perform the action (%s)",
			rec.Attempt, r.Kind))
	}
}

// lateReport records a judged late report in an open run: in its history
// (a duplicate as ActivityDuplicateDetected, a confirmation or conflict as
// ActivityLateReport), in the run's counters, and on the action's
// effects-ledger entry.
func (t *transition) lateReport(a *ActivityInfo, r api.EffectReport) {
	st := t.st
	r.WorkflowID, r.RunID, r.Time = st.WorkflowID, st.RunID, t.now
	if a != nil {
		r.ScheduledEventID, r.IdempotencyKey, r.ActivityType = a.ScheduledEventID, a.IdempotencyKey, a.ActivityType
	}
	switch {
	case r.Verdict.IsDuplicate():
		st.Duplicates++
		t.add(&history.ActivityDuplicateDetected{ScheduledEventID: r.ScheduledEventID, Attempt: r.Attempt, LeaseEpoch: r.LeaseEpoch,
			IdempotencyKey: r.IdempotencyKey, Result: r.Result, Identity: r.Identity, Possible: r.Verdict == api.VerdictPossibleDuplicate,
			OtherAttempt: r.OtherAttempt, Outcome: r.Outcome, Detail: r.Detail})
	default:
		if r.Verdict == api.VerdictConflict {
			st.EffectConflicts++
		}
		t.add(&history.ActivityLateReport{ScheduledEventID: r.ScheduledEventID, Attempt: r.Attempt, LeaseEpoch: r.LeaseEpoch,
			IdempotencyKey: r.IdempotencyKey, Verdict: r.Verdict.String(), Outcome: r.Outcome, Result: r.Result, Identity: r.Identity,
			OtherAttempt: r.OtherAttempt, Detail: r.Detail})
	}
	c := LedgerChange{Key: r.IdempotencyKey, KeepState: true, ActivityType: r.ActivityType, Report: &r}
	if a != nil {
		c.Effect = a.Effect
	}
	t.out.Ledger = append(t.out.Ledger, c)
	t.out.Reports = append(t.out.Reports, r)
}
