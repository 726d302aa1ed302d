package api

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/history"
)

// Payload, Failure and the activity option types are the history's own.
type (
	// Payload is an encoded value with its encoding name.
	Payload = history.Payload
	// Failure is an error as a plain value.
	Failure = history.Failure
	// ActivityOptions are an activity's timeouts and retry policy.
	ActivityOptions = history.ActivityOptions
	// RetryPolicy governs activity retries.
	RetryPolicy = history.RetryPolicy
)

// DefaultSuggestContinueAsNewAt is the history length from which the engine
// suggests continuing as new, unless configured otherwise.
const DefaultSuggestContinueAsNewAt = 10240

// DefaultSuggestContinueAsNewBytes is the history size (bytes, as
// sdk.WorkflowInfo.HistorySize measures it) from which workflow code is
// told to continue as new, unless configured otherwise: 8 MiB.
const DefaultSuggestContinueAsNewBytes = 8 << 20

// ReusePolicy decides whether a workflow id whose previous run is closed may
// start a new run.
type ReusePolicy uint8

// The id reuse policies.
const (
	// AllowDuplicate: a new run may start whatever the previous one did.
	AllowDuplicate ReusePolicy = iota
	// AllowDuplicateFailedOnly: only if the previous run did not complete
	// successfully (failed, canceled, terminated, timed out).
	AllowDuplicateFailedOnly
	// RejectDuplicate: never start a second run for the id.
	RejectDuplicate
)

// ConflictPolicy decides what StartWorkflow does when a run is open.
type ConflictPolicy uint8

// The conflict policies.
const (
	// ConflictFail returns ErrAlreadyStarted.
	ConflictFail ConflictPolicy = iota
	// ConflictUseExisting returns the open run.
	ConflictUseExisting
)

// Status is a run's lifecycle state.
type Status uint8

// The run statuses. Paused is a running run that waits for a person: an
// activity whose outcome is unknown until a person resolves it, a model
// call held by the run's budget, or an agent's tool call awaiting a
// person's approval (PauseInfo.Kind says which).
const (
	StatusUnspecified Status = iota
	StatusRunning
	StatusPaused
	StatusCompleted
	StatusFailed
	StatusCanceled
	StatusTerminated
	StatusTimedOut
	StatusContinuedAsNew
	statusCount
)

var statusNames = [statusCount]string{"unspecified", "running", "paused", "completed", "failed", "canceled", "terminated", "timed_out", "continued_as_new"}

// String returns the status's name, e.g. "running".
func (s Status) String() string {
	if s < statusCount {
		return statusNames[s]
	}
	return "unknown"
}

// ParseStatus is the inverse of String.
func ParseStatus(name string) (Status, bool) {
	for i, n := range statusNames {
		if n == name && i > 0 {
			return Status(i), true
		}
	}
	return StatusUnspecified, false
}

// Open reports whether the run has not closed (running or paused).
func (s Status) Open() bool { return s == StatusRunning || s == StatusPaused }

// StartWorkflowRequest starts a run.
type StartWorkflowRequest struct {
	WorkflowID   string
	WorkflowType string
	TaskQueue    string
	Input        Payload
	// ExecutionTimeout bounds the whole chain of runs (continue-as-new
	// included); RunTimeout bounds one run; TaskTimeout bounds one workflow
	// task (default 10 s). Zero means no limit / the default.
	ExecutionTimeout time.Duration
	RunTimeout       time.Duration
	TaskTimeout      time.Duration
	ReusePolicy      ReusePolicy
	ConflictPolicy   ConflictPolicy
	// RequestID makes a retried start idempotent: a start with the same
	// workflow id and request id as the open run returns that run.
	RequestID string
	Identity  string
	// Budget bounds what the run may spend on metered activities (model
	// calls); zero: no limit. Workflow code and people can change it
	// later (UpdateBudget).
	Budget history.Budget
	// Child is set by a server of a cluster starting a child run whose
	// workflow id another server serves: the run its parent decided
	// (docs/scale-out.md). Clients leave it nil.
	Child *ChildOf `json:",omitempty"`
	// TraceParent and TraceState are the W3C trace context of the caller
	// (OpenTelemetry), recorded on the run's WorkflowStarted: the run's
	// workflow tasks and activity attempts are traced as its children.
	// Empty: not traced.
	TraceParent string `json:",omitempty"`
	TraceState  string `json:",omitempty"`
	// Retention is how long the run is kept once closed (its history,
	// state and list entries; not its effects-ledger entries, which have
	// their own horizon): after it, the engine's retention sweep deletes
	// it. Zero: the server's default (engine.Options.Retention); negative:
	// kept until deleted by hand.
	Retention time.Duration `json:",omitempty"`
}

// ChildOf is the parent side of a child run started on another server.
type ChildOf struct {
	// RunID is the child run's id, decided by its parent.
	RunID string
	// ParentWorkflowID, ParentRunID and InitiatedEventID name the parent
	// run and its StartChildWorkflow command.
	ParentWorkflowID  string
	ParentRunID       string
	InitiatedEventID  int64
	ParentClosePolicy history.ParentClosePolicy
}

// StartWorkflowResponse names the run.
type StartWorkflowResponse struct {
	RunID   string
	Started bool // false when an existing run was returned
}

// SignalWorkflowRequest delivers a signal.
type SignalWorkflowRequest struct {
	WorkflowID string
	RunID      string // empty: the current run
	SignalName string
	Input      Payload
	Identity   string
	RequestID  string
}

// SignalWorkflowResponse is empty.
type SignalWorkflowResponse struct{}

// SignalWithStartRequest signals the open run or starts one and signals it.
type SignalWithStartRequest struct {
	Start       StartWorkflowRequest
	SignalName  string
	SignalInput Payload
}

// CancelWorkflowRequest requests cancellation.
type CancelWorkflowRequest struct {
	WorkflowID string
	RunID      string
	Reason     string
	Identity   string
}

// CancelWorkflowResponse is empty.
type CancelWorkflowResponse struct{}

// TerminateWorkflowRequest terminates a run.
type TerminateWorkflowRequest struct {
	WorkflowID string
	RunID      string
	Reason     string
	Details    Payload
	Identity   string
}

// TerminateWorkflowResponse is empty.
type TerminateWorkflowResponse struct{}

// DeleteWorkflowRequest deletes a closed run: its history, state and list
// entries (not its effects-ledger entries: a workflow id started again
// is still answered from them). RunID "" names the current run.
type DeleteWorkflowRequest struct {
	WorkflowID string
	RunID      string
	// Force terminates an open run first (as Temporal's
	// DeleteWorkflowExecution does); without it an open run is refused
	// with ErrFailedPrecondition.
	Force    bool
	Reason   string
	Identity string
}

// DeleteWorkflowResponse names the run deleted.
type DeleteWorkflowResponse struct {
	RunID string
	// Terminated: the run was open and Force terminated it first.
	Terminated bool
}

func (s Status) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON accepts a status name or its number.
func (s *Status) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		var n uint8
		if err := json.Unmarshal(b, &n); err != nil || n >= uint8(statusCount) {
			return fmt.Errorf("%w: status %s", ErrInvalidArgument, b)
		}
		*s = Status(n)
		return nil
	}
	if name == statusNames[0] {
		*s = StatusUnspecified
		return nil
	}
	v, ok := ParseStatus(name)
	if !ok {
		return fmt.Errorf("%w: unknown status %q", ErrInvalidArgument, name)
	}
	*s = v
	return nil
}

// MarshalJSON writes the state by name ("started").
func (s ActivityState) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON accepts a state name or its number.
func (s *ActivityState) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err != nil {
		var n uint8
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("%w: activity state %s", ErrInvalidArgument, b)
		}
		*s = ActivityState(n)
		return nil
	}
	for v := ActivityStateScheduled; v <= ActivityStateHeld; v++ {
		if v.String() == name {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("%w: unknown activity state %q", ErrInvalidArgument, name)
}
