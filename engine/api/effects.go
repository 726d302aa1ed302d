package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/history"
)

// EffectState is where an action (one idempotency key of one workflow id)
// stands in the effects ledger.
type EffectState uint8

// The effect states. The values are those the engine stores.
const (
	EffectStateUnspecified EffectState = iota
	// EffectInFlight: an attempt's intent is recorded and no outcome yet.
	EffectInFlight
	// EffectCompleted: the action happened; Result holds its result.
	EffectCompleted
	// EffectUnknown: an attempt's outcome is unknown; its run waits for a
	// person (or closed before anybody knew).
	EffectUnknown
	// EffectNotHappened: the action did not take place (it failed for good,
	// or was resolved as not happened); a later schedule may perform it.
	EffectNotHappened
	effectStateCount
)

var effectStateNames = [effectStateCount]string{"unspecified", "in_flight", "completed", "unknown", "not_happened"}

// String returns the state's name, e.g. "in_flight".
func (s EffectState) String() string {
	if s < effectStateCount {
		return effectStateNames[s]
	}
	return "?"
}

// EffectVerdict is what the engine concluded from a report of an attempt
// that no longer held its lease, or that arrived after its action had
// closed (a "late report"). Only Duplicate and PossibleDuplicate are
// duplicates: two different attempts may both have performed the action.
type EffectVerdict uint8

// The verdicts.
const (
	VerdictUnspecified EffectVerdict = iota
	// VerdictDuplicate: two different attempts both reported success — the
	// effect happened twice.
	VerdictDuplicate
	// VerdictPossibleDuplicate: one attempt performed the action and
	// another reported that its outcome is unknown (or lost its lease
	// without a word): the effect may have happened twice. Check the
	// downstream system.
	VerdictPossibleDuplicate
	// VerdictConfirmation: the attempt the action was attributed to (by
	// its own report, a Reconcile lookup or a person) reported the same
	// outcome late. Nothing is wrong.
	VerdictConfirmation
	// VerdictConflict: a late report contradicts what was recorded — a
	// different result from the attempt the action was attributed to, or a
	// success for an action recorded as not happened. One effect, but the
	// record needs a look.
	VerdictConflict
	verdictCount
)

var verdictNames = [verdictCount]string{"unspecified", "duplicate", "possible_duplicate", "confirmation", "conflict"}

// String returns the verdict's name, e.g. "possible_duplicate".
func (v EffectVerdict) String() string {
	if v < verdictCount {
		return verdictNames[v]
	}
	return "?"
}

// IsDuplicate reports whether the verdict declares a (possible) duplicate.
func (v EffectVerdict) IsDuplicate() bool {
	return v == VerdictDuplicate || v == VerdictPossibleDuplicate
}

// EffectReport is one judged late report of an attempt: a duplicate, a
// possible duplicate, a confirmation or a conflict. It is recorded in the
// run's history while the run is open and on the action's ledger entry
// (and the run's record) in every case.
type EffectReport struct {
	Verdict          EffectVerdict
	WorkflowID       string
	RunID            string
	ScheduledEventID int64
	IdempotencyKey   string
	ActivityType     string
	// Attempt, LeaseEpoch and Identity name the attempt that reported.
	Attempt    int32
	LeaseEpoch int64
	Identity   string
	// OtherAttempt is the attempt whose effect this one duplicates or
	// contradicts (0 when none is known, e.g. a person resolved it).
	OtherAttempt int32
	// Outcome is what the attempt reported: "completed", "outcome_unknown"
	// or "lease_lost" (it never reported and cannot be reached).
	Outcome string
	// Result is the result the attempt reported, if any.
	Result Payload
	// Detail explains the verdict in a sentence.
	Detail string
	// AfterClose: the report arrived after the run had closed, so it is
	// recorded on the ledger entry and the run's record, not in history.
	AfterClose bool
	Time       time.Time
}

// EffectInfo is one effects-ledger entry: an action with an idempotency
// key, across every run of its workflow id.
type EffectInfo struct {
	WorkflowID     string
	IdempotencyKey string
	ActivityType   string
	Effect         history.EffectClass
	State          EffectState
	// RunID and ScheduledEventID name the run and event that last changed
	// the entry.
	RunID            string
	ScheduledEventID int64
	// RunIDs lists the runs that scheduled the action, oldest first
	// (bounded: the first and the most recent ones).
	RunIDs []string
	// Attempts counts the attempts dispatched with their intent recorded,
	// over all runs.
	Attempts int32
	// Duplicates counts the reports judged duplicates or possible
	// duplicates; Conflicts those judged conflicts.
	Duplicates int32
	Conflicts  int32
	// Reports lists the judged late reports, oldest first (bounded).
	Reports []EffectReport
	// Result is the action's result when it happened.
	Result  Payload
	Created time.Time
	Updated time.Time
	// InDoubt says why the action's state is unknown after a recovery of
	// the store (a restore, an accepted data loss), while it is.
	InDoubt string
}

// ListEffectsRequest filters and pages the effects ledger, ordered by
// workflow id then idempotency key.
type ListEffectsRequest struct {
	// WorkflowID restricts the list to one workflow id (empty: all).
	WorkflowID string
	// KeyPrefix keeps only the keys that start with it.
	KeyPrefix string
	// DuplicatesOnly keeps only the entries with a duplicate or possible
	// duplicate.
	DuplicatesOnly bool
	PageSize       int // 0: 100
	NextPageToken  []byte
	// InDoubtOnly keeps only the entries in doubt after a recovery of the
	// store (EffectInfo.InDoubt).
	InDoubtOnly bool
}

// ListEffectsResponse is one page of ledger entries.
type ListEffectsResponse struct {
	Effects       []EffectInfo
	NextPageToken []byte // nil on the last page
}

// MarshalJSON writes the state by name ("in_flight").
func (s EffectState) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON accepts a state name or its number.
func (s *EffectState) UnmarshalJSON(b []byte) error {
	v, err := unmarshalEnum(b, effectStateNames[:], "effect state")
	*s = EffectState(v)
	return err
}

// MarshalJSON writes the verdict by name ("duplicate").
func (v EffectVerdict) MarshalJSON() ([]byte, error) { return json.Marshal(v.String()) }

// UnmarshalJSON accepts a verdict name or its number.
func (v *EffectVerdict) UnmarshalJSON(b []byte) error {
	n, err := unmarshalEnum(b, verdictNames[:], "effect verdict")
	*v = EffectVerdict(n)
	return err
}

func unmarshalEnum(b []byte, names []string, what string) (uint8, error) {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		var n uint8
		if err := json.Unmarshal(b, &n); err != nil || int(n) >= len(names) {
			return 0, fmt.Errorf("%w: %s %s", ErrInvalidArgument, what, b)
		}
		return n, nil
	}
	for i, n := range names {
		if n == name {
			return uint8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown %s %q", ErrInvalidArgument, what, name)
}
