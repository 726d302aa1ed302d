package engine

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Reports of activity attempts, and what they prove.
//
// Every attempt of an Idempotent or SideEffect action whose intent was
// recorded has an AttemptRecord: what it reported about itself and what
// the engine holds it did (its fate). A report from the attempt that holds
// the lease decides the attempt as always. A report from any other attempt
// (a "late report": its lease was lost, a lookup or a person decided for
// it, or its action closed) is judged against the records:
//
//   - a second identical report of one attempt is acknowledged again with
//     the outcome of the first (reports are idempotent);
//   - a success of the attempt the action is attributed to is a
//     confirmation (a conflict if its result differs);
//   - a success while no other attempt performed the action decides it: the
//     action completes with that result, also after its run closed (the
//     ledger entry then says completed, so the next run of the workflow id
//     is deduplicated with it); while another attempt still runs, it waits
//     for that attempt's outcome (ActivityInfo.Late);
//   - only when two different attempts may both have performed the action
//     is a duplicate declared: proven when both reported success, possible
//     when one of them reported an unknown outcome or lost its lease;
//   - Idempotent actions count attempts and never raise a duplicate: the
//     downstream deduplicates on the key by contract.

// AttemptFate is what the engine holds an attempt did.
type AttemptFate uint8

// The fates.
const (
	// FateRunning: dispatched, no news yet.
	FateRunning AttemptFate = iota + 1
	// FatePerformed: it performed the action — its success was recorded,
	// or the action was resolved as happened while it was in question.
	FatePerformed
	// FateNotPerformed: it did not — it failed with an error, was canceled
	// or given back unstarted, or the action was resolved as not happened
	// after it.
	FateNotPerformed
	// FateUnknown: it may have — it lost its lease or reported an unknown
	// outcome, and nothing has decided it yet.
	FateUnknown
)

// mayHave reports whether an attempt of this fate may have performed the
// action.
func (f AttemptFate) mayHave() bool { return f == FateRunning || f == FateUnknown }

// ReportKind is what an attempt reported about itself.
type ReportKind uint8

// The report kinds.
const (
	ReportNone ReportKind = iota
	// ReportCompleted: it succeeded (a lookup: the action happened).
	ReportCompleted
	// ReportFailed: it failed with an error (the action did not happen).
	ReportFailed
	// ReportUnknown: it cannot tell whether the action took effect.
	ReportUnknown
	// ReportCanceled: it stopped because cancellation was requested.
	ReportCanceled
	// ReportNotStarted: the worker gave the task back without starting it:
	// the lease was over by its clock when the task reached it.
	ReportNotStarted
	// ReportNotHappened: a Reconcile lookup found no trace of the action.
	ReportNotHappened
)

var reportNames = [...]string{"none", outcomeCompleted, "failed", outcomeUnknown, "canceled", "not_started", "not_happened"}

func (k ReportKind) String() string {
	if int(k) < len(reportNames) {
		return reportNames[k]
	}
	return fmt.Sprintf("ReportKind(%d)", uint8(k))
}

// AttemptRecord is what the engine knows about one attempt of an action
// whose intent was recorded. Fields may only be appended.
type AttemptRecord struct {
	Attempt  int32
	Epoch    int64
	Identity string `msgpack:",omitempty"`
	Fate     AttemptFate
	// Report is the attempt's own first report (ReportNone: none yet);
	// Accepted says whether it decided the outcome, so that the same
	// report again gets the same answer.
	Report   ReportKind `msgpack:",omitempty"`
	Accepted bool       `msgpack:",omitempty"`
	// ResultSum identifies the result it reported (or was resolved with).
	ResultSum []byte `msgpack:",omitempty"`
	// RunID names the attempt's run on an effects-ledger entry (which
	// holds the attempts of every run of the workflow id).
	RunID string `msgpack:",omitempty"`
}

// LateReport is a success reported by an attempt that no longer held the
// lease while another attempt of the action runs. Fields may only be
// appended.
type LateReport struct {
	Attempt  int32
	Epoch    int64
	Identity string `msgpack:",omitempty"`
	Result   history.Payload
	At       time.Time
	// ResultOmitted: the result was over the limit and is not recorded.
	ResultOmitted string `msgpack:",omitempty"`
}

// AttemptReport is one report of an attempt, as the service received it.
type AttemptReport struct {
	ScheduledEventID int64
	Epoch            int64
	Attempt          int32
	Kind             ReportKind
	Result           history.Payload
	Failure          history.Failure
	Identity         string
	// HeartbeatDetails are the attempt's last heartbeat details, flushed
	// with its outcome (zero: none newer than those already sent).
	HeartbeatDetails history.Payload
	// Lookup: the report comes from a Reconcile lookup's dispatch.
	Lookup bool
	// KeyMaterial answers a key task (machine_keys.go).
	KeyMaterial []byte
	// ResultOmitted is the worker's reason for sending no result (it is
	// over the limit); Usage is what the attempt consumed; RetryAfter,
	// when positive, replaces the retry policy's backoff.
	ResultOmitted string
	Usage         history.Usage
	RetryAfter    time.Duration
}

// ReportAck says how a report was taken.
type ReportAck uint8

// The acknowledgements.
const (
	// AckAccepted: the report decided (or, held in ActivityInfo.Late, will
	// decide) the outcome.
	AckAccepted ReportAck = iota + 1
	// AckStale: the attempt did not hold the lease; what the report proves
	// was recorded, and the caller answers api.ErrStaleAttempt.
	AckStale
)

// maxLookups bounds the Reconcile lookups dispatched for one unknown
// outcome: after that many failed or lost lookups the run pauses.
const maxLookups = 10

// resultSum identifies a result for comparisons (results may be large).
func resultSum(p history.Payload) []byte {
	h := sha256.New()
	writeField(h, []byte(p.Encoding))
	writeField(h, p.Data)
	return h.Sum(nil)[:16]
}

// record returns the record of the attempt dispatched under epoch.
func (a *ActivityInfo) record(epoch int64) *AttemptRecord {
	return findRecord(a.Attempts, epoch)
}

func findRecord(recs []AttemptRecord, epoch int64) *AttemptRecord {
	for i := range recs {
		if recs[i].Epoch == epoch {
			return &recs[i]
		}
	}
	return nil
}

// Report applies an attempt's report to an open run: the current
// attempt's outcome, or a late report judged against the attempt records.
// le is the action's effects-ledger entry, which the caller reads when the
// activity is no longer pending (nil otherwise, or when it has none). It
// returns api.ErrStaleAttempt when there is nothing to judge (a Read
// activity's stale attempt, an unknown attempt).
func (m *Machine) Report(st *RunState, r AttemptReport, le *LedgerEntry, now time.Time) (Output, ReportAck, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, 0, err
	}
	a := st.Activities[r.ScheduledEventID]
	// Outcomes of work already under way are recorded even past the
	// history limit (the run's next workflow task enforces it), and
	// payloads over the limit are dropped, saying so, rather than refused:
	// a refused report leaves a side effect to look unknown.
	r.Result, r.ResultOmitted = m.fitResult(r.Result, r.ResultOmitted)
	if m.checkPayload("heartbeat details", r.HeartbeatDetails) != nil {
		r.HeartbeatDetails = history.Payload{}
	}
	t := m.begin(st, now)
	if a != nil && a.LeaseEpoch == r.Epoch && (a.State == api.ActivityStateStarted || a.State == api.ActivityStateUnknown) {
		t.addUsage(a, r.Usage)
		t.retryAfter = r.RetryAfter
		t.currentReport(a, r)
		if t.err != nil {
			return Output{}, 0, t.err
		}
		return t.out, AckAccepted, nil
	}
	if r.Lookup {
		// A lookup that lost its lease (another was asked, or the action
		// was decided meanwhile): what it found is no report of an attempt.
		return Output{}, 0, staleAttempt(st, r)
	}
	ack, err := t.lateReportOf(a, le, r)
	if err != nil {
		return Output{}, 0, err
	}
	return t.out, ack, nil
}

func staleAttempt(st *RunState, r AttemptReport) error {
	return api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: lease %d (attempt %d) is not current", r.ScheduledEventID,
		st.WorkflowID, r.Epoch, r.Attempt)
}

// currentReport applies the report of the attempt holding the lease.
func (t *transition) currentReport(a *ActivityInfo, r AttemptReport) {
	if !r.HeartbeatDetails.IsZero() {
		a.HeartbeatDetails = r.HeartbeatDetails
	}
	if a.Reconciling {
		t.lookupAnswer(a, r)
		return
	}
	if a.KeyPending {
		t.keyReport(a, r)
		return
	}
	rec := a.record(r.Epoch)
	if rec != nil && rec.Report == ReportNone {
		rec.Report, rec.Accepted = r.Kind, true
	}
	if r.Kind != ReportNotStarted {
		a.GiveBacks = 0
	}
	f := r.Failure
	switch r.Kind {
	case ReportCompleted:
		if rec != nil {
			rec.Fate, rec.ResultSum = FatePerformed, resultSum(r.Result)
		}
		t.startedForRead(a)
		t.add(&history.ActivityCompleted{ScheduledEventID: a.ScheduledEventID, StartedEventID: a.StartedEventID, Result: r.Result,
			Identity: r.Identity, ResultOmitted: r.ResultOmitted, Usage: a.Usage})
		t.judgeOthers(a, rec, outcomeCompleted)
		t.finishActivity(a, LedgerCompleted, r.Result)
		t.omitted(a, r.ResultOmitted)
	case ReportUnknown:
		if a.State == api.ActivityStateUnknown {
			return // already paused on this attempt
		}
		if rec != nil {
			rec.Fate = FateUnknown
		}
		a.LastFailure = &f
		t.leaseLost(a, "the activity reported that it cannot tell whether the action took effect: "+fmtFailure(&f), t.now)
	case ReportNotStarted:
		if rec != nil {
			rec.Fate = FateNotPerformed
		}
		t.gaveBack(a, r)
	case ReportCanceled:
		if !a.CancelRequested {
			t.failed(a, rec, r)
			return
		}
		if rec != nil {
			rec.Fate = FateNotPerformed
		}
		if t.decidedByLate(a) {
			return
		}
		t.startedForRead(a)
		t.add(&history.ActivityCanceled{ScheduledEventID: a.ScheduledEventID, StartedEventID: a.StartedEventID, Usage: a.Usage})
		t.finishActivity(a, LedgerNotHappened, history.Payload{})
	default:
		t.failed(a, rec, r)
	}
}

// failed applies an error from the current attempt: the action did not
// happen by this attempt.
func (t *transition) failed(a *ActivityInfo, rec *AttemptRecord, r AttemptReport) {
	if rec != nil {
		rec.Fate = FateNotPerformed
	}
	f := r.Failure
	a.LastFailure = &f
	if t.decidedByLate(a) {
		return
	}
	t.retryOrFail(a, &f, "")
}

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

// gaveBack applies a task the worker gave back unstarted: its lease was
// over by the worker's clock when the task reached it.
func (t *transition) gaveBack(a *ActivityInfo, r AttemptReport) {
	a.GiveBacks++
	a.LastFailure = &history.Failure{Type: "NotStarted", Message: fmt.Sprintf(
		"worker %s gave the task back unstarted: the lease was over by its clock when the task reached it (%d times in a row; "+
			"a clock far ahead of the server's, or a worker too busy to start tasks in time)", r.Identity, a.GiveBacks)}
	if t.decidedByLate(a) {
		return
	}
	if a.State == api.ActivityStateUnknown {
		t.notHappenedBy(a, r.Identity, fmt.Sprintf("attempt %d was given back unstarted", a.Attempt))
		return
	}
	a.LeaseEpoch, a.LeaseDeadline = 0, time.Time{}
	t.readyActivity(a) // the same attempt, dispatched again
}

// notHappenedBy resolves the action the run waits on as not happened,
// because an attempt's own report proves it (and no other attempt may
// have performed it), and dispatches the next attempt.
func (t *transition) notHappenedBy(a *ActivityInfo, by, reason string) {
	for i := range a.Attempts {
		if a.Attempts[i].Fate.mayHave() {
			return // another attempt may have performed it: it stays to be decided
		}
	}
	t.add(&history.ActivityResolved{ScheduledEventID: a.ScheduledEventID, Resolution: history.ResolvedNotHappened, By: by, Reason: reason})
	t.ledger(a, LedgerNotHappened, history.Payload{})
	a.Reconciling, a.UnknownReason = false, ""
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
	a.Attempt++
	a.StartedEventID = 0
	t.after(a, a.QuietUntil)
}

// lateReportOf judges a report of an attempt that does not hold the lease.
func (t *transition) lateReportOf(a *ActivityInfo, le *LedgerEntry, r AttemptReport) (ReportAck, error) {
	st := t.st
	if a == nil {
		if le == nil {
			return 0, staleAttempt(st, r)
		}
		return t.closedActionReport(le, r)
	}
	if a.Effect == history.Read {
		return 0, staleAttempt(st, r)
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
	return 0, true, staleAttempt(st, r)
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

// closedActionReport judges a late report for an action of an open run
// that is no longer pending, from its effects-ledger entry.
func (t *transition) closedActionReport(le *LedgerEntry, r AttemptReport) (ReportAck, error) {
	j := judgeClosed(le, t.st.RunID, r)
	if j.err != nil {
		return 0, j.err
	}
	if j.repeated {
		return j.ack, nil
	}
	for _, rep := range j.reports {
		rep.ScheduledEventID, rep.IdempotencyKey, rep.ActivityType = r.ScheduledEventID, j.key, le.ActivityType
		t.lateReport(nil, rep)
		t.out.Ledger[len(t.out.Ledger)-1].Effect = le.Effect
	}
	t.out.Ledger = append(t.out.Ledger, j.change(r.ScheduledEventID, le))
	return j.ack, nil
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
// that is no longer pending, from its ledger entry le (whose key the
// caller set in le.key... see ledgerEntryKey).
func judgeClosed(le *LedgerEntry, runID string, r AttemptReport) closedJudgment {
	j := closedJudgment{key: le.key, ack: AckStale}
	stale := api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: attempt %d is not current (the action is %s)",
		r.ScheduledEventID, le.workflowID, r.Attempt, api.EffectState(le.State))
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
				le.workflowID, r.Attempt, rec.Report)
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
