package machine

import (
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// The effects ledger, as the machine sees it: every input reports the
// changes it makes to the entries of the idempotency keys it touches
// (Output.Ledger, LedgerChange), which the service folds into the stored
// entries (LedgerEntry.Apply) in the same store transaction; a late report
// for an action that is no longer pending is judged from its entry
// (JudgeClosed).

// LedgerState is where an idempotency key stands in the effects ledger.
type LedgerState uint8

// The ledger states.
const (
	// LedgerInFlight: intent recorded, no outcome yet.
	LedgerInFlight LedgerState = iota + 1
	// LedgerCompleted: the action happened; the entry holds its result.
	LedgerCompleted
	// LedgerUnknown: an attempt's outcome is unknown.
	LedgerUnknown
	// LedgerNotHappened: the action did not take place (failed for good,
	// resolved as not happened); a later schedule may perform it.
	LedgerNotHappened
)

// LedgerEntry is one effects-ledger record, keyed by (workflow id,
// idempotency key). It outlives runs. Fields may only be appended
// (the engine's TestMsgpackFieldOrder pins them).
type LedgerEntry struct {
	State            LedgerState
	RunID            string
	ScheduledEventID int64
	ActivityType     string
	Result           history.Payload `msgpack:",omitempty"`
	Updated          time.Time
	// Duplicates counts the late reports judged duplicates or possible
	// duplicates; Conflicts those judged conflicts.
	Duplicates int32               `msgpack:",omitempty"`
	Effect     history.EffectClass `msgpack:",omitempty"`
	// RunIDs are the runs that scheduled the action (bounded: the first
	// and the latest MaxLedgerRuns-1).
	RunIDs []string `msgpack:",omitempty"`
	// Attempts counts dispatches whose intent was recorded, over all runs.
	Attempts  int32 `msgpack:",omitempty"`
	Conflicts int32 `msgpack:",omitempty"`
	// Reports are the judged late reports (bounded: the first
	// MaxLedgerReports).
	Reports []api.EffectReport `msgpack:",omitempty"`
	Created time.Time          `msgpack:",omitempty"`
	// ResultOmitted says why a completed action's result is not recorded
	// (it was over the payload limit); a deduplicated schedule then fails
	// with ResultTooLarge rather than receiving an empty result.
	ResultOmitted string `msgpack:",omitempty"`
	// AttemptRecords are the attempts of every run whose intent was
	// recorded (bounded: the latest MaxLedgerAttempts), to judge their
	// reports once the action or its run has closed.
	AttemptRecords []AttemptRecord `msgpack:",omitempty"`
	// LateState: the state was set by a late report after the action had
	// closed (see judgeClosed), not by an event of the run's history.
	LateState bool `msgpack:",omitempty"`
	// Doubt says why the action's outcome became unknown after a recovery
	// of the store (ActivityInfo.Doubt); empty once the state was set by
	// anything else.
	Doubt string `msgpack:",omitempty"`
}

// Bounds of the lists a ledger entry keeps; the counters keep counting.
const (
	// MaxLedgerRuns bounds LedgerEntry.RunIDs.
	MaxLedgerRuns = 32
	// MaxLedgerReports bounds LedgerEntry.Reports.
	MaxLedgerReports = 64
	// MaxLedgerAttempts bounds LedgerEntry.AttemptRecords.
	MaxLedgerAttempts = 64
)

// LedgerChange records what happened to one idempotency key.
type LedgerChange struct {
	Key              string
	State            LedgerState
	ScheduledEventID int64
	ActivityType     string
	Result           history.Payload
	Effect           history.EffectClass
	// Dispatched: an attempt's intent was recorded (counted in Attempts).
	Dispatched bool
	// KeepState leaves the entry's state, run and result as they are: the
	// change only notes the run and, with Report, a judged late report.
	KeepState bool
	// Report is a judged late report to record.
	Report *api.EffectReport
	// ResultOmitted: the action completed but its result was too large to
	// record (see history.ActivityCompleted).
	ResultOmitted string
	// Attempts, when not nil, replaces the records of the run's attempts.
	Attempts []AttemptRecord
	// LateState: a late report sets the state of a closed action.
	LateState bool
	// Doubt: the state is unknown because of a recovery of the store
	// (ActivityInfo.Doubt).
	Doubt string
}

// Apply folds change c, made by run runID at now, into the entry.
func (le *LedgerEntry) Apply(c LedgerChange, runID string, now time.Time) {
	if le.Created.IsZero() {
		le.Created = now
	}
	if !c.KeepState {
		le.State, le.RunID, le.ScheduledEventID, le.Result, le.ResultOmitted = c.State, runID, c.ScheduledEventID, c.Result, c.ResultOmitted
		le.LateState, le.Doubt = c.LateState, c.Doubt
	}
	if c.ActivityType != "" {
		le.ActivityType = c.ActivityType
	}
	if c.Effect > le.Effect {
		le.Effect = c.Effect
	}
	le.addRun(runID)
	if c.Dispatched {
		le.Attempts++
	}
	if c.Attempts != nil {
		le.setRecords(runID, c.Attempts)
	}
	if r := c.Report; r != nil {
		switch {
		case r.Verdict.IsDuplicate():
			le.Duplicates++
		case r.Verdict == api.VerdictConflict:
			le.Conflicts++
		}
		if len(le.Reports) < MaxLedgerReports {
			le.Reports = append(le.Reports, *r)
		}
	}
	le.Updated = now
}

// setRecords replaces the records of run runID's attempts with recs.
func (le *LedgerEntry) setRecords(runID string, recs []AttemptRecord) {
	out := le.AttemptRecords[:0:0]
	for _, r := range le.AttemptRecords {
		if r.RunID != runID {
			out = append(out, r)
		}
	}
	for _, r := range recs {
		r.RunID = runID
		out = append(out, r)
	}
	if n := len(out) - MaxLedgerAttempts; n > 0 {
		out = out[n:]
	}
	le.AttemptRecords = out
}

func (le *LedgerEntry) addRun(runID string) {
	if runID == "" || (len(le.RunIDs) > 0 && le.RunIDs[len(le.RunIDs)-1] == runID) {
		return
	}
	for _, r := range le.RunIDs {
		if r == runID {
			return
		}
	}
	if len(le.RunIDs) == MaxLedgerRuns {
		le.RunIDs = append(le.RunIDs[:1], le.RunIDs[2:]...) // keep the first run
	}
	le.RunIDs = append(le.RunIDs, runID)
}
