package machine

import (
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Late reports of closed actions: reports of attempts whose action is no
// longer pending (its activity closed, or its run did), judged from the
// action's effects-ledger entry (see report.go).

// closedActionReport judges a late report for an action of an open run
// that is no longer pending, from its effects-ledger entry le (key: its
// idempotency key).
func (t *transition) closedActionReport(key string, le *LedgerEntry, r AttemptReport) (ReportAck, error) {
	j, err := JudgeClosed(t.st.WorkflowID, t.st.RunID, key, le, r)
	if err != nil {
		return 0, err
	}
	if j.Repeated {
		return j.Ack, nil
	}
	for _, rep := range j.Reports {
		rep.ScheduledEventID, rep.IdempotencyKey, rep.ActivityType = r.ScheduledEventID, key, le.ActivityType
		t.lateReport(nil, rep)
		t.out.Ledger[len(t.out.Ledger)-1].Effect = le.Effect
	}
	t.out.Ledger = append(t.out.Ledger, j.Change)
	return j.Ack, nil
}

// ClosedJudgment is what a late report means for an action that is no
// longer pending (JudgeClosed).
type ClosedJudgment struct {
	// Ack says how the report was taken.
	Ack ReportAck
	// Repeated: the attempt had made the same report before; Ack is the
	// first one's answer, and there is nothing to record.
	Repeated bool
	// Reports are the judged late reports to record, each with a ledger
	// change of its own; the caller sets their ScheduledEventID,
	// IdempotencyKey and ActivityType.
	Reports []api.EffectReport
	// Change records the judgment on the action's ledger entry, after the
	// reports (zero when Repeated).
	Change LedgerChange
}

// JudgeClosed judges report r, of an attempt of run runID, for an action
// that is no longer pending — its activity closed, or its run did — from
// the action's effects-ledger entry le, stored under (workflowID, key).
// It reports api.ErrStaleAttempt when there is nothing to judge (a Read
// action, a lookup's report) or when the attempt had already made another
// report. The service calls it for a run that has closed; Report calls it
// for an open run.
func JudgeClosed(workflowID, runID, key string, le *LedgerEntry, r AttemptReport) (ClosedJudgment, error) {
	j := judgeClosed(workflowID, key, le, runID, r)
	if j.err != nil {
		return ClosedJudgment{Ack: j.ack}, j.err
	}
	out := ClosedJudgment{Ack: j.ack, Repeated: j.repeated, Reports: j.reports}
	if !j.repeated {
		out.Change = j.change(r.ScheduledEventID, le)
	}
	return out, nil
}

// closedJudgment is what a late report means for an action that is no
// longer pending (its activity closed, or its run did).
type closedJudgment struct {
	key      string
	records  []AttemptRecord // the run's records, updated
	state    LedgerState     // the entry's new state (0: unchanged)
	result   history.Payload
	omitted  string
	reports  []api.EffectReport
	ack      ReportAck
	repeated bool
	err      error
}

// change is the ledger change that records the judgment.
func (j *closedJudgment) change(schedID int64, le *LedgerEntry) LedgerChange {
	c := LedgerChange{Key: j.key, KeepState: j.state == 0, Attempts: j.records, ActivityType: le.ActivityType, Effect: le.Effect}
	if j.state != 0 {
		c.State, c.Result, c.ResultOmitted, c.ScheduledEventID, c.LateState = j.state, j.result, j.omitted, schedID, true
	}
	return c
}

// judgeClosed judges report r, of an attempt of run runID, for an action
// that is no longer pending, from its ledger entry le, stored under
// (workflowID, key).
func judgeClosed(workflowID, key string, le *LedgerEntry, runID string, r AttemptReport) closedJudgment {
	j := closedJudgment{key: key, ack: AckStale}
	stale := api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: attempt %d is not current (the action is %s)",
		r.ScheduledEventID, workflowID, r.Attempt, api.EffectState(le.State))
	if le.Effect == history.Read || r.Lookup {
		j.err = stale
		return j
	}
	for _, rec := range le.AttemptRecords {
		if rec.RunID == runID {
			j.records = append(j.records, rec)
		}
	}
	rec := findRecord(j.records, r.Epoch)
	if rec == nil {
		j.records = append(j.records, AttemptRecord{Attempt: r.Attempt, Epoch: r.Epoch, Identity: r.Identity, Fate: FateUnknown, RunID: runID})
		rec = &j.records[len(j.records)-1]
	}
	if rec.Report != ReportNone {
		same := rec.Report == r.Kind && (r.Kind != ReportCompleted || rec.ResultSum == nil || string(rec.ResultSum) == string(resultSum(r.Result)))
		j.repeated = true
		switch {
		case !same:
			j.err = api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: attempt %d already reported %s", r.ScheduledEventID,
				workflowID, r.Attempt, rec.Report)
		case rec.Accepted:
			j.ack = AckAccepted
		default:
			j.err = stale
		}
		return j
	}
	rec.Report = r.Kind
	base := api.EffectReport{Attempt: r.Attempt, LeaseEpoch: r.Epoch, Identity: r.Identity, Result: r.Result}
	others := func(pred func(AttemptRecord) bool) *AttemptRecord {
		for i := range le.AttemptRecords {
			if o := le.AttemptRecords[i]; o.Epoch != rec.Epoch && pred(o) {
				return &le.AttemptRecords[i]
			}
		}
		return nil
	}
	performed := func(o AttemptRecord) bool { return o.Fate == FatePerformed }
	mayHave := func(o AttemptRecord) bool { return o.Fate.mayHave() }
	switch r.Kind {
	case ReportCompleted:
		sum := resultSum(r.Result)
		wasPerformer := rec.Fate == FatePerformed
		rec.Fate, rec.ResultSum = FatePerformed, sum
		base.Outcome = outcomeCompleted
		switch {
		case wasPerformer || le.Effect == history.Idempotent && le.State == LedgerCompleted:
			base.Verdict, base.Detail = api.VerdictConfirmation, fmt.Sprintf("attempt %d, to which the action is attributed, reported the same result late", r.Attempt)
			if le.State == LedgerCompleted && string(resultSum(le.Result)) != string(sum) && le.Effect == history.SideEffect {
				base.Verdict = api.VerdictConflict
				base.Detail = fmt.Sprintf("attempt %d, to which the action is attributed, reported late a result that differs from the recorded one", r.Attempt)
			}
			j.reports = append(j.reports, base)
		case le.Effect == history.SideEffect && others(performed) != nil:
			o := others(performed)
			base.Verdict, base.OtherAttempt = api.VerdictDuplicate, o.Attempt
			base.Detail = fmt.Sprintf("attempt %d reported success after its action had closed; attempt %d had performed it", r.Attempt, o.Attempt)
			j.reports = append(j.reports, base)
		case le.State == LedgerCompleted:
			if le.Effect == history.SideEffect {
				base.Verdict = api.VerdictPossibleDuplicate
				base.Detail = fmt.Sprintf("attempt %d reported success after its action had been recorded as completed by other means", r.Attempt)
				j.reports = append(j.reports, base)
			}
		case le.State == LedgerNotHappened:
			j.state, j.result, j.omitted = LedgerCompleted, r.Result, r.ResultOmitted
			base.Verdict = api.VerdictConflict
			base.Detail = fmt.Sprintf("attempt %d reported success after the action had been recorded as not happened: it happened; "+
				"the ledger now says completed, so a later run of the workflow id is deduplicated with this result", r.Attempt)
			j.reports = append(j.reports, base)
		default: // in flight or unknown: its run closed before the outcome was known
			j.state, j.result, j.omitted, j.ack = LedgerCompleted, r.Result, r.ResultOmitted, AckAccepted
			rec.Accepted = true
		}
		if o := others(mayHave); o != nil && le.Effect == history.SideEffect && base.Verdict != api.VerdictDuplicate && !wasPerformer {
			j.reports = append(j.reports, api.EffectReport{Verdict: api.VerdictPossibleDuplicate, Attempt: o.Attempt, LeaseEpoch: o.Epoch,
				Identity: o.Identity, OtherAttempt: r.Attempt, Outcome: outcomeLeaseLost,
				Detail: fmt.Sprintf("attempt %d performed the action while attempt %d, whose outcome is unknown, may have performed it too",
					r.Attempt, o.Attempt)})
		}
	case ReportUnknown:
		if rec.Fate == FatePerformed {
			break
		}
		rec.Fate = FateUnknown
		if le.Effect != history.SideEffect {
			break
		}
		base.Outcome = outcomeUnknown
		switch o := others(performed); {
		case o != nil:
			base.Verdict, base.OtherAttempt = api.VerdictPossibleDuplicate, o.Attempt
			base.Detail = fmt.Sprintf("attempt %d reported after its action had closed that its outcome is unknown; attempt %d performed the action",
				r.Attempt, o.Attempt)
			j.reports = append(j.reports, base)
		case le.State == LedgerNotHappened:
			j.state = LedgerUnknown
			base.Verdict = api.VerdictConflict
			base.Detail = fmt.Sprintf("attempt %d reported after the action had been recorded as not happened that its outcome is unknown: "+
				"the ledger now says unknown, so a later run of the workflow id pauses on it", r.Attempt)
			j.reports = append(j.reports, base)
		case le.State == LedgerInFlight:
			j.state = LedgerUnknown
		}
	default:
		if rec.Fate.mayHave() {
			rec.Fate = FateNotPerformed
		}
		if (le.State == LedgerInFlight || le.State == LedgerUnknown) && others(mayHave) == nil && others(performed) == nil {
			j.state = LedgerNotHappened // nobody performed it: a later run may
		}
	}
	return j
}
