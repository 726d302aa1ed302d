package machine

import (
	"crypto/sha256"
	"fmt"
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

// String names the report kind as effect reports and messages do.
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
	// KeyMaterial answers a key task (keys.go).
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
// le is the action's effects-ledger entry and key its idempotency key,
// which the caller reads when the activity is no longer pending (le nil
// otherwise, or when it has none). It returns api.ErrStaleAttempt when
// there is nothing to judge (a Read activity's stale attempt, an unknown
// attempt).
func (m *Machine) Report(st *RunState, r AttemptReport, key string, le *LedgerEntry, now time.Time) (Output, ReportAck, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, 0, err
	}
	a := st.Activities[r.ScheduledEventID]
	// Outcomes of work already under way are recorded even past the
	// history limit (the run's next workflow task enforces it), and
	// payloads over the limit are dropped, saying so, rather than refused:
	// a refused report leaves a side effect to look unknown.
	r.Result, r.ResultOmitted = m.fitResult(r.Result, r.ResultOmitted)
	if m.CheckPayload("heartbeat details", r.HeartbeatDetails) != nil {
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
		return Output{}, 0, r.StaleError(st)
	}
	ack, err := t.lateReportOf(a, key, le, r)
	if err != nil {
		return Output{}, 0, err
	}
	return t.out, ack, nil
}

// StaleError is the api.ErrStaleAttempt error that refuses r: its attempt
// does not hold the lease of its activity in run st.
func (r AttemptReport) StaleError(st *RunState) error {
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
