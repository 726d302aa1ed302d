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

// DescribeWorkflowRequest names a run (the current one when RunID is empty).
type DescribeWorkflowRequest struct {
	WorkflowID string
	RunID      string
}

// WorkflowInfo is a run's summary, as listed and described.
type WorkflowInfo struct {
	WorkflowID    string
	RunID         string
	WorkflowType  string
	TaskQueue     string
	Status        Status
	StartTime     time.Time
	CloseTime     time.Time
	HistoryLength int64
	// ParentWorkflowID and ParentRunID are set for child workflows.
	ParentWorkflowID string
	ParentRunID      string
	// ContinuedAsNewRunID is the next run of a continued-as-new run.
	ContinuedAsNewRunID string
	// Pause explains a paused run.
	Pause *PauseInfo
	// Corrupt is set when the run is quarantined because its stored data
	// is damaged: it says what was found, and where. Such a run is not
	// served (its writes fail with ErrDataCorrupt) and its other fields
	// are its last known good state, or only its ids when that state is
	// what was damaged. Empty for a healthy run.
	Corrupt string
	// Duplicates counts the effects of this run judged duplicates or
	// possible duplicates (see EffectReport); EffectConflicts those judged
	// conflicts. Either nonzero needs a person's look.
	Duplicates      int32 `msgpack:",omitempty" json:",omitempty"`
	EffectConflicts int32 `msgpack:",omitempty" json:",omitempty"`
}

// PauseInfo says why a run is paused and what resolving it needs.
type PauseInfo struct {
	ScheduledEventID int64
	ActivityID       string
	ActivityType     string
	IdempotencyKey   string
	Attempt          int32
	Input            Payload
	Reason           string
	Since            time.Time
	// Kind says what the run waits for: PauseOutcomeUnknown (resolve the
	// activity), PauseBudget (raise the budget or stop the run) or
	// PauseApproval (approve or reject the tool call).
	Kind string
	// Effect is the effect class of the action the run waits on: the
	// paused activity's, or, for an approval, the tool's as its workers
	// declared it. EffectKnown is false when no declaration of the tool is
	// known yet (Effect then says nothing).
	Effect      history.EffectClass
	EffectKnown bool
	// CallID and Signal are set for PauseApproval: the tool call's id,
	// which an approval names (sdk/agent's Approval.CallID), and the
	// signal that carries approvals. ActivityType is then the tool,
	// ActivityID the activity id the call will run as, Input (describe
	// only) the model's arguments, and Approvals counts the run's calls
	// awaiting approval (DescribeWorkflowResponse.PendingApprovals lists
	// them; this is the oldest).
	CallID    string
	Signal    string
	Approvals int32
}

// The pause kinds.
const (
	PauseOutcomeUnknown = "outcome_unknown"
	PauseBudget         = "budget"
	PauseApproval       = "approval"
)

// PendingApproval is an agent's tool call (sdk/agent) waiting for a
// person's approval. Answer it with an agent.Approval naming CallID, sent
// as the signal Signal (cairn workflow approve and reject do).
type PendingApproval struct {
	// CallID is the tool call's id, which an approval names.
	CallID string
	// Key is the call's key in the run (history.ToolCallKey): its approval
	// markers' id; the call runs as activity history.ToolActivityPrefix+Key.
	Key string
	// Tool is the tool (its activity type), empty for a call recorded by
	// an agent before the marker named it.
	Tool string
	// Arguments are the model's arguments (JSON), when known.
	Arguments string
	// Effect is the tool's effect class as its workers declared it
	// (EffectKnown false: no declaration known yet).
	Effect      history.EffectClass
	EffectKnown bool
	// Signal is the signal that carries approvals for the call.
	Signal string
	// EventID is the approval-requested marker's; Since when it was recorded.
	EventID int64
	Since   time.Time
}

// ActivityState is where a pending activity stands.
type ActivityState uint8

// The pending activity states.
const (
	ActivityStateScheduled   ActivityState = iota + 1 // waiting for a worker
	ActivityStateStarted                              // leased to a worker
	ActivityStateBackoff                              // waiting for its retry timer
	ActivityStateUnknown                              // outcome unknown: run paused
	ActivityStateReconciling                          // the Reconcile lookup is running
	ActivityStateHeld                                 // a metered activity waiting for a budget raise: run paused
)

// String returns the state's name.
func (s ActivityState) String() string {
	switch s {
	case ActivityStateScheduled:
		return "scheduled"
	case ActivityStateStarted:
		return "started"
	case ActivityStateBackoff:
		return "backoff"
	case ActivityStateUnknown:
		return "unknown"
	case ActivityStateReconciling:
		return "reconciling"
	case ActivityStateHeld:
		return "held"
	}
	return "?"
}

// PendingActivity describes one activity that has not closed.
type PendingActivity struct {
	ScheduledEventID int64
	ActivityID       string
	ActivityType     string
	State            ActivityState
	Attempt          int32
	LeaseEpoch       int64
	LeaseExpires     time.Time
	NextAttemptAt    time.Time
	LastFailure      *Failure
	LastHeartbeat    time.Time
	HeartbeatDetails Payload
	Effect           history.EffectClass
	IdempotencyKey   string
	CancelRequested  bool
	// InDoubt says why the action's outcome is in doubt after a recovery
	// of the store (a restore, an accepted data loss): it is not
	// dispatched again before its Reconcile lookup or a person decides.
	InDoubt string
}

// PendingTimer describes one running timer.
type PendingTimer struct {
	TimerID        string
	StartedEventID int64
	FireAt         time.Time
}

// PendingChild describes one child workflow that has not closed.
type PendingChild struct {
	InitiatedEventID int64
	WorkflowID       string
	RunID            string
	WorkflowType     string
}

// PendingWorkflowTask describes the run's workflow task, if any.
type PendingWorkflowTask struct {
	Attempt     int32
	Started     bool
	LastFailure *Failure
	StickyQueue string
}

// DescribeWorkflowResponse is a run's status with its pending work.
type DescribeWorkflowResponse struct {
	Info              WorkflowInfo
	PendingActivities []PendingActivity
	PendingTimers     []PendingTimer
	PendingChildren   []PendingChild
	WorkflowTask      *PendingWorkflowTask
	CancelRequested   bool
	// EffectReports are the judged late reports of this run's actions
	// (duplicates, possible duplicates, confirmations, conflicts).
	EffectReports []EffectReport `json:",omitempty"`
	// Usage is what the run's activities reported (tokens and cost),
	// failed and retried attempts included, by model.
	Usage *UsageSummary
	// WorkflowUsage is the same over every run of the workflow id.
	WorkflowUsage *UsageSummary
	// Budget is the run's budget and where it stands.
	Budget *BudgetStatus
	// PendingApprovals are the agent's tool calls awaiting a person's
	// approval, oldest first.
	PendingApprovals []PendingApproval `json:",omitempty"`
}

// UsageSummary totals usage, overall and by model.
type UsageSummary struct {
	Total   history.Usage
	ByModel []history.Usage
	// Calls counts the metered activities scheduled (turns).
	Calls int64
	// Unpriced lists models with usage but no price in the engine's table.
	Unpriced []string
}

// BudgetStatus is a run's budget, what it used, and whether it is
// exhausted (then Exceeded says why, and a held model call waits).
type BudgetStatus struct {
	Budget   history.Budget
	Used     history.Usage
	Turns    int64
	Exceeded string
	// Held lists the scheduled event ids of the metered activities held.
	Held []int64
}

// GetHistoryRequest reads a run's events.
type GetHistoryRequest struct {
	WorkflowID  string
	RunID       string // empty: the current run
	FromEventID int64  // 0 or 1: from the start
	MaxEvents   int    // 0: all
	// WaitNewEvents long-polls until an event with ID ≥ FromEventID exists
	// or the run closes (bounded by the context and the server's poll limit).
	WaitNewEvents bool
}

// GetHistoryResponse holds the events read.
type GetHistoryResponse struct {
	RunID       string
	Events      []history.Event
	NextEventID int64 // the id the next event of the run will get
	Closed      bool
}

// GetResultRequest asks for a run's outcome.
type GetResultRequest struct {
	WorkflowID string
	RunID      string // empty: the current run
	Wait       bool   // long-poll while the run is open
}

// GetResultResponse is a run's outcome. Closed is false when the run was
// still open at the end of the poll.
type GetResultResponse struct {
	RunID  string
	Closed bool
	Status Status
	Result Payload
	// Failure is set for failed, canceled, terminated and timed-out runs.
	Failure *Failure
	// ContinuedAsNewRunID names the next run of a continued-as-new run.
	ContinuedAsNewRunID string
}

// ListWorkflowsRequest filters and pages runs, newest first.
type ListWorkflowsRequest struct {
	Status        Status // StatusUnspecified: any
	WorkflowType  string // empty: any
	StartedAfter  time.Time
	StartedBefore time.Time
	PageSize      int // 0: 100
	NextPageToken []byte
	// Corrupt lists only the quarantined runs (WorkflowInfo.Corrupt set),
	// in workflow id order; the other filters still apply.
	Corrupt bool
	// WorkflowIDPrefix keeps runs whose workflow id starts with it (empty:
	// any). A workflow id is its own prefix, so this also lists one id's
	// runs — but by a scan of the list index; WorkflowID does it directly.
	WorkflowIDPrefix string
	// WorkflowID lists only this workflow id's runs (exact), newest first,
	// read from its own records: its cost does not grow with the other
	// runs the store holds. The other filters still apply.
	WorkflowID string
	// PauseKind keeps paused runs waiting for this (PauseInfo.Kind:
	// PauseApproval lists the runs awaiting an approval); empty: any run.
	PauseKind string `json:",omitempty"`
}

// ListWorkflowsResponse is one page of runs.
type ListWorkflowsResponse struct {
	Workflows     []WorkflowInfo
	NextPageToken []byte // nil on the last page
}

// CountWorkflowsRequest filters the runs to count as ListWorkflowsRequest
// does.
type CountWorkflowsRequest struct {
	WorkflowType     string // empty: any
	WorkflowIDPrefix string // empty: any
	StartedAfter     time.Time
	StartedBefore    time.Time
}

// CountWorkflowsResponse holds the counts.
type CountWorkflowsResponse struct {
	Total int64
	// ByStatus has one entry per status with runs, in status order.
	ByStatus []StatusCount
	// Paused counts the paused runs by what they wait for (PauseInfo.Kind),
	// one entry per kind with runs, in kind order.
	Paused []PauseCount `json:",omitempty"`
}

// PauseCount is how many paused runs wait for one kind of decision.
type PauseCount struct {
	Kind  string
	Count int64
}

// StatusCount is how many runs have one status.
type StatusCount struct {
	Status Status
	Count  int64
}

// DescribeTaskQueueRequest names a task queue.
type DescribeTaskQueueRequest struct {
	TaskQueue string
}

// DescribeTaskQueueResponse describes it.
type DescribeTaskQueueResponse struct {
	Queue TaskQueueInfo
}

// ListTaskQueuesRequest filters the queues listed.
type ListTaskQueuesRequest struct {
	NamePrefix string // empty: every queue
}

// ListTaskQueuesResponse describes the known task queues, by name.
type ListTaskQueuesResponse struct {
	Queues []TaskQueueInfo
}

// TaskQueueInfo is a task queue's backlog and its pollers.
type TaskQueueInfo struct {
	Name string
	// WorkflowBacklog and ActivityBacklog count the tasks ready on the
	// queue that no poller has taken (queries included).
	WorkflowBacklog int
	ActivityBacklog int
	// WorkflowPollers and ActivityPollers are the workers that polled the
	// queue within PollerRetention, by identity.
	WorkflowPollers []PollerInfo
	ActivityPollers []PollerInfo
}

// PollerRetention is how long the engine remembers a poller after its last
// poll ended.
const PollerRetention = 5 * time.Minute

// PollerInfo is one worker polling a queue.
type PollerInfo struct {
	Identity string
	// LastSeen is when its last poll began or ended (now, while one waits).
	LastSeen time.Time
	// Polling counts its polls waiting right now.
	Polling int
}

// QueryWorkflowRequest asks a run a question.
type QueryWorkflowRequest struct {
	WorkflowID string
	RunID      string
	QueryType  string
	Args       Payload
}

// QueryWorkflowResponse carries the answer.
type QueryWorkflowResponse struct {
	Result Payload
}

// ResolveActivityRequest decides an activity whose outcome is unknown.
// Identify the activity by ScheduledEventID, or by ActivityID.
type ResolveActivityRequest struct {
	WorkflowID       string
	RunID            string
	ScheduledEventID int64
	ActivityID       string
	Resolution       history.Resolution
	Result           Payload  // for ResolvedHappened
	Failure          *Failure // for ResolvedFailed
	Identity         string   // who decided
	Reason           string   // why
}

// ResolveActivityResponse is empty.
type ResolveActivityResponse struct{}

// PollWorkflowTaskRequest polls a task queue (a normal queue or a worker's
// sticky queue) for a workflow task.
type PollWorkflowTaskRequest struct {
	TaskQueue string
	Identity  string
}

// PollWorkflowTaskResponse holds a task, or nil when the poll timed out.
type PollWorkflowTaskResponse struct {
	Task *WorkflowTask
}

// WorkflowTask asks a worker to advance a run. Events are the whole history
// when FirstEventID is 1, otherwise only the events the sticky worker has
// not seen; a worker whose cache does not end at FirstEventID-1 must fetch
// the full history with GetHistory. A task with Query set is a query task:
// answer it with RespondQueryTask, not CompleteWorkflowTask.
type WorkflowTask struct {
	TaskToken    []byte
	WorkflowID   string
	RunID        string
	WorkflowType string
	TaskQueue    string
	Attempt      int32
	FirstEventID int64
	Events       []history.Event
	// NextEventID is the id the next event of the run will get.
	NextEventID int64
	// ContinueAsNewSuggested is set when the history has grown past the
	// suggestion threshold.
	ContinueAsNewSuggested bool
	// SuggestContinueAsNewAt is that threshold (a history length). Workflow
	// code sees the suggestion as "the history this decision has seen is at
	// least this long", which replays exactly; 0 means unknown.
	SuggestContinueAsNewAt int64
	Query                  *WorkflowQuery
	// MaxPayloadBytes is the engine's payload limit (0: unknown). A worker
	// checks its commands' payloads against it before completing the
	// task, and fails the task with cause CauseLimitExceeded instead of
	// sending what would be refused.
	MaxPayloadBytes int
}

// WorkflowQuery is a query to answer from the run's current state.
type WorkflowQuery struct {
	QueryID   string
	QueryType string
	Args      Payload
}

// CommandType names a command.
type CommandType uint8

// The command types.
const (
	CommandUnspecified CommandType = iota
	CommandScheduleActivity
	CommandRequestCancelActivity
	CommandStartTimer
	CommandCancelTimer
	CommandRecordMarker
	CommandStartChildWorkflow
	CommandSignalExternalWorkflow
	CommandCompleteWorkflow
	CommandFailWorkflow
	CommandCancelWorkflow
	CommandContinueAsNew
	CommandSetBudget
	commandCount
)

var commandNames = [commandCount]string{"Unspecified", "ScheduleActivity", "RequestCancelActivity", "StartTimer", "CancelTimer", "RecordMarker", "StartChildWorkflow", "SignalExternalWorkflow", "CompleteWorkflow", "FailWorkflow", "CancelWorkflow", "ContinueAsNew", "SetBudget"}

// String returns the command type's name.
func (t CommandType) String() string {
	if t < commandCount {
		return commandNames[t]
	}
	return "Command?"
}

// Command is one decision of workflow code. Exactly the field matching Type
// is set. Each command produces exactly one event, in order, after the
// task's WorkflowTaskCompleted event — the invariant replay relies on.
type Command struct {
	Type                   CommandType
	ScheduleActivity       *ScheduleActivityCommand       `msgpack:",omitempty" json:",omitempty"`
	RequestCancelActivity  *RequestCancelActivityCommand  `msgpack:",omitempty" json:",omitempty"`
	StartTimer             *StartTimerCommand             `msgpack:",omitempty" json:",omitempty"`
	CancelTimer            *CancelTimerCommand            `msgpack:",omitempty" json:",omitempty"`
	RecordMarker           *RecordMarkerCommand           `msgpack:",omitempty" json:",omitempty"`
	StartChildWorkflow     *StartChildWorkflowCommand     `msgpack:",omitempty" json:",omitempty"`
	SignalExternalWorkflow *SignalExternalWorkflowCommand `msgpack:",omitempty" json:",omitempty"`
	CompleteWorkflow       *CompleteWorkflowCommand       `msgpack:",omitempty" json:",omitempty"`
	FailWorkflow           *FailWorkflowCommand           `msgpack:",omitempty" json:",omitempty"`
	CancelWorkflow         *CancelWorkflowCommand         `msgpack:",omitempty" json:",omitempty"`
	ContinueAsNew          *ContinueAsNewCommand          `msgpack:",omitempty" json:",omitempty"`
	SetBudget              *SetBudgetCommand              `msgpack:",omitempty" json:",omitempty"`
}

// SetBudgetCommand sets the run's budget from workflow code
// (→ BudgetUpdated, By "workflow").
type SetBudgetCommand struct {
	Budget history.Budget
}

// ScheduleActivityCommand schedules an activity (→ ActivityScheduled).
type ScheduleActivityCommand struct {
	ActivityID   string
	ActivityType string
	Input        Payload
	Options      ActivityOptions
	Effect       history.EffectClass
	// KeyMaterial identifies the logical action for the idempotency key:
	// the canonical encoding of the arguments, or the declared business
	// key. Empty means Input.Data. The engine derives the key from
	// (workflow id, activity type, key material, occurrence).
	KeyMaterial []byte
	// HasReconcile says the activity declares a Reconcile lookup.
	HasReconcile bool
	// Metered activities (model calls) report usage and count against the
	// run's budget.
	Metered bool
	// BusinessKey says KeyMaterial is the declared business key (not the
	// canonical encoding of the input).
	BusinessKey bool
	// ShareResult asks the engine to store the result as a payload chunk
	// when it is larger than ShareResultMinBytes, so that other payloads
	// can reference it (see history.ActivityScheduled.ShareResult).
	ShareResult bool
}

// ShareResultMinBytes is the smallest result a ShareResult activity has
// stored as a chunk: below it a reference saves nothing.
const ShareResultMinBytes = 256

// RequestCancelActivityCommand cancels a scheduled activity
// (→ ActivityCancelRequested).
type RequestCancelActivityCommand struct {
	ScheduledEventID int64
}

// StartTimerCommand starts a durable timer (→ TimerStarted).
type StartTimerCommand struct {
	TimerID  string
	Duration time.Duration
}

// CancelTimerCommand cancels a running timer (→ TimerCanceled).
type CancelTimerCommand struct {
	TimerID string
}

// RecordMarkerCommand records a value for replay (→ MarkerRecorded).
type RecordMarkerCommand struct {
	Name string
	ID   string
	Data Payload
}

// StartChildWorkflowCommand starts a child run (→ ChildWorkflowStarted;
// a refused start is followed by ChildWorkflowFailed).
type StartChildWorkflowCommand struct {
	WorkflowID        string
	WorkflowType      string
	TaskQueue         string // empty: the parent's
	Input             Payload
	ExecutionTimeout  time.Duration
	RunTimeout        time.Duration
	TaskTimeout       time.Duration
	ParentClosePolicy history.ParentClosePolicy
	ReusePolicy       ReusePolicy
}

// SignalExternalWorkflowCommand signals another run (→ SignalExternalSent).
type SignalExternalWorkflowCommand struct {
	WorkflowID string
	RunID      string
	SignalName string
	Input      Payload
}

// CompleteWorkflowCommand closes the run with a result.
type CompleteWorkflowCommand struct {
	Result Payload
}

// FailWorkflowCommand closes the run with a failure.
type FailWorkflowCommand struct {
	Failure Failure
}

// CancelWorkflowCommand closes the run as canceled.
type CancelWorkflowCommand struct {
	Details Payload
}

// ContinueAsNewCommand closes the run and starts the next one with the same
// workflow id. Empty fields take the current run's values.
type ContinueAsNewCommand struct {
	WorkflowType string
	TaskQueue    string
	Input        Payload
	RunTimeout   time.Duration
	TaskTimeout  time.Duration
}

// CompleteWorkflowTaskRequest returns a task's commands.
type CompleteWorkflowTaskRequest struct {
	TaskToken []byte
	Commands  []Command
	// StickyQueue, when set, names the worker's own queue: the run's next
	// workflow task goes there first, carrying only new events.
	StickyQueue string
	Identity    string
}

// CompleteWorkflowTaskResponse is empty.
type CompleteWorkflowTaskResponse struct{}

// FailWorkflowTaskRequest reports a failed workflow task.
type FailWorkflowTaskRequest struct {
	TaskToken []byte
	Cause     string // "panic", "nondeterminism", "blocked", CauseLimitExceeded, …
	Failure   Failure
	Identity  string
}

// CauseNotStarted: the task is given back unstarted (a server of a cluster
// relayed it to a poller that had gone): the engine dispatches it again and
// records nothing.
const CauseNotStarted = "not_started"

// Workflow task failure causes the engine acts on. A task failed (or
// whose completion is refused) with one of them would fail the same way
// on every retry: after Limits.MaxWorkflowTaskRefusals such failures in a
// row the engine terminates the run with the cause as its reason.
const (
	// CauseLimitExceeded: the commands break a limit (a payload, the
	// pending activities, timers or children, the request size).
	CauseLimitExceeded = "limit_exceeded"
	// CauseBadCommands: the commands are malformed.
	CauseBadCommands = "bad_commands"
)

// CauseUnknownWorkflowType: the worker that took the task has no workflow
// registered under the run's type (the failure names the type and those
// it has). Unlike the causes above the task is retried, with backoff: a
// worker that has the type may yet poll the queue (a deploy in progress).
const CauseUnknownWorkflowType = "unknown_workflow_type"

// FailWorkflowTaskResponse is empty.
type FailWorkflowTaskResponse struct{}

// RespondQueryTaskRequest answers a query task.
type RespondQueryTaskRequest struct {
	TaskToken []byte
	Result    Payload
	Failure   *Failure // the query handler failed
}

// RespondQueryTaskResponse is empty.
type RespondQueryTaskResponse struct{}

// PollActivityTaskRequest polls a task queue for an activity task.
type PollActivityTaskRequest struct {
	TaskQueue string
	Identity  string
	// Activities declares the activities the poller runs: the class,
	// business key and Reconcile lookup as registered there. The engine
	// records the declarations of each task queue and applies them when
	// it schedules and dispatches (docs/effects.md, "Declaring effects").
	Activities []ActivityDeclaration
}

// ActivityDeclaration is an activity as the worker that runs it registered
// it.
type ActivityDeclaration struct {
	ActivityType string
	Effect       history.EffectClass
	// BusinessKey: the worker derives the key material from a declared
	// business key (a function of the input only it has).
	BusinessKey bool
	// Reconcile: the worker has a Reconcile lookup for it.
	Reconcile bool
}

// PollActivityTaskResponse holds a task, or nil when the poll timed out.
type PollActivityTaskResponse struct {
	Task *ActivityTask
}

// ActivityTask is one attempt of an activity under a lease.
type ActivityTask struct {
	TaskToken        []byte
	WorkflowID       string
	RunID            string
	WorkflowType     string
	ActivityID       string
	ActivityType     string
	ScheduledEventID int64
	Input            Payload
	Attempt          int32
	LeaseEpoch       int64
	Effect           history.EffectClass
	IdempotencyKey   string
	// Reconcile asks the worker to run the activity's Reconcile lookup
	// instead of the activity itself.
	Reconcile           bool
	ScheduledTime       time.Time
	StartedTime         time.Time
	Deadline            time.Time // when the lease ends without a heartbeat
	StartToCloseTimeout time.Duration
	HeartbeatTimeout    time.Duration
	HeartbeatDetails    Payload
	// MaxResultBytes is the largest result (and heartbeat or failure
	// details) the engine records (0: unknown). A worker whose result is
	// larger completes the attempt with ResultOmitted set instead.
	MaxResultBytes int
	// HardDeadline is when the attempt ends whatever its heartbeats say
	// (start-to-close, or schedule-to-close).
	HardDeadline time.Time
	// Metered says the activity was scheduled as metered (it counts
	// against the run's budget). A worker that declares the activity
	// metered refuses a task scheduled without it (MeteredMismatch).
	Metered bool
	// KeyTask asks the worker only for the activity's key material — its
	// business key, or the canonical encoding of its input — because the
	// worker that scheduled it did not declare it as this one does: answer
	// with CompleteActivity.KeyMaterial, without running the activity.
	KeyTask bool
}

// HeartbeatRequest extends an attempt's lease.
type HeartbeatRequest struct {
	TaskToken []byte
	Details   Payload
}

// HeartbeatResponse says whether the activity should stop.
type HeartbeatResponse struct {
	CancelRequested bool
	Deadline        time.Time
}

// CompleteActivityRequest records an attempt's result. For a Reconcile task
// Result is the action's result when it happened.
type CompleteActivityRequest struct {
	TaskToken []byte
	Result    Payload
	Identity  string
	// ResultOmitted, with an empty Result, says the activity succeeded but
	// its result is not sent (it is over MaxResultBytes): the engine
	// records it as completed without a result (see
	// history.ActivityCompleted.ResultOmitted). The engine does the same
	// by itself with a result over its limit.
	ResultOmitted string
	// Usage is what the attempt consumed (a model call's tokens).
	Usage history.Usage
	// HeartbeatDetails are the attempt's last heartbeat details, if newer
	// than the last heartbeat sent (flushed with the outcome).
	HeartbeatDetails Payload
	// KeyMaterial answers a KeyTask (empty: the input payload's own bytes,
	// which are canonical).
	KeyMaterial []byte
}

// CompleteActivityResponse is empty.
type CompleteActivityResponse struct{}

// FailActivityRequest records an attempt's failure.
type FailActivityRequest struct {
	TaskToken []byte
	Failure   Failure
	// OutcomeUnknown: the tool cannot tell whether the effect happened (or a
	// Reconcile lookup could not tell).
	OutcomeUnknown bool
	// NotHappened: a Reconcile lookup established that the action did not
	// happen.
	NotHappened bool
	// Canceled: the attempt stopped because cancellation was requested.
	Canceled bool
	Identity string
	// Usage is what the attempt consumed before it failed.
	Usage history.Usage
	// RetryAfter, when positive, is the delay before the next attempt the
	// activity asks for (a provider's Retry-After), instead of the retry
	// policy's backoff; it does not make a non-retryable failure retryable.
	RetryAfter time.Duration
	// NotStarted: the worker gives the task back without having started
	// it, because the lease was over by its clock when the task reached it
	// (it sat in a poll response, or the worker was frozen). The engine
	// dispatches the attempt again; for an attempt that no longer holds
	// the lease it only records that this one did nothing.
	NotStarted bool
	// HeartbeatDetails are the attempt's last heartbeat details, if newer
	// than the last heartbeat sent: the next attempt receives them.
	HeartbeatDetails Payload
}

// FailActivityResponse is empty.
type FailActivityResponse struct{}

// MarshalJSON writes the status by name ("running"), for people and scripts.
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

// GetChunksRequest names payload chunks to read.
type GetChunksRequest struct {
	Hashes [][]byte
	// Ancestors also returns each chunk's parent, its parent's parent …
	// (in that order) up to MaxBytes of data.
	Ancestors bool
	// MaxBytes bounds the data of one answer (0 or more than 4 MiB: 4 MiB);
	// at least one chunk is always returned. Ask again for what is missing.
	MaxBytes int
	// Identity names the caller (a worker, a tool), for logs.
	Identity string
}

// GetChunksResponse holds the chunks found, in the order walked.
type GetChunksResponse struct {
	Chunks []history.Chunk
}

// UpdateBudgetRequest changes a run's budget (the current run when RunID
// is empty): a raise lets the held metered activities go on; Stop fails
// them with a non-retryable BudgetExceeded error, which the agent loop
// reports to the workflow (refused with ErrInvalidArgument when none is
// held: cancel the run to end it).
type UpdateBudgetRequest struct {
	WorkflowID string
	RunID      string
	Budget     history.Budget
	Stop       bool
	Identity   string
	Reason     string
}

// UpdateBudgetResponse is the budget's new status.
type UpdateBudgetResponse struct {
	Budget BudgetStatus
}

// StreamKind names a stream event.
type StreamKind string

// The stream event kinds.
const (
	// StreamText is a piece of the answer's text.
	StreamText StreamKind = "text"
	// StreamToolCall is a piece of a tool call (its name, or a fragment of
	// its JSON arguments).
	StreamToolCall StreamKind = "tool_call"
	// StreamDone: the attempt's answer is complete and recorded (the
	// activity completed).
	StreamDone StreamKind = "done"
	// StreamSuperseded: the attempt ended without an answer (it failed, its
	// lease was lost, another attempt took over); what it streamed is not
	// the answer and must not be shown as part of the next attempt's.
	StreamSuperseded StreamKind = "superseded"
)

// StreamDelta is a piece of live output an activity attempt publishes.
type StreamDelta struct {
	Kind StreamKind
	Text string
	// ToolCallIndex, ToolCallID and ToolName identify the tool call a
	// StreamToolCall delta belongs to.
	ToolCallIndex int
	ToolCallID    string
	ToolName      string
}

// PublishStreamRequest publishes an attempt's live output. Nothing is
// written to history; the engine keeps a bounded window per run in memory.
type PublishStreamRequest struct {
	TaskToken []byte
	Deltas    []StreamDelta
}

// PublishStreamResponse says whether the attempt should stop.
type PublishStreamResponse struct {
	CancelRequested bool
}

// StreamEvent is one event of a run's live stream, numbered per run.
type StreamEvent struct {
	Seq              int64
	Time             time.Time
	ScheduledEventID int64
	Attempt          int32
	ActivityType     string
	StreamDelta
}

// WatchStreamRequest reads a run's live stream after AfterSeq, long-polling
// with Wait until there is something or the run closes.
type WatchStreamRequest struct {
	WorkflowID string
	RunID      string
	AfterSeq   int64
	Wait       bool
}

// WatchStreamResponse holds stream events in order. Gap is set when events
// after AfterSeq were dropped from the window (the reader was too slow or
// arrived late); the text of an attempt still streaming is then resent
// whole, as one event. Closed: the run has closed; nothing more will come.
type WatchStreamResponse struct {
	RunID   string
	Events  []StreamEvent
	NextSeq int64
	Gap     bool
	Closed  bool
}

// GetTranscriptRequest names a run (the current one when RunID is empty).
type GetTranscriptRequest struct {
	WorkflowID string
	RunID      string
}

// GetTranscriptResponse is an agent run's conversation as a list of items
// in order: messages, the model calls that answered, and the tool calls
// they asked for with what became of them.
type GetTranscriptResponse struct {
	RunID  string
	Status Status
	Items  []TranscriptItem
	Usage  UsageSummary
	Budget *BudgetStatus
	// Ignored lists, in the order received, the approval signals that
	// applied to no tool call (sdk/agent records them; see docs/agents.md).
	Ignored []IgnoredApproval `json:",omitempty"`
}

// IgnoredApproval is an approval signal the agent received and ignored:
// what it said, why it applied to no call, and the event that records it.
type IgnoredApproval struct {
	EventID  int64
	CallID   string
	Approved bool
	By       string
	Reason   string
	Why      string
}

// The transcript item kinds.
const (
	ItemMessage   = "message"
	ItemModelCall = "model_call"
	ItemToolCall  = "tool_call"
)

// TranscriptItem is one item: exactly the field Kind names is set.
type TranscriptItem struct {
	Kind      string
	Message   *history.ChatMessage `json:",omitempty"`
	ModelCall *ModelCallInfo       `json:",omitempty"`
	ToolCall  *ToolCallInfo        `json:",omitempty"`
}

// The states of model and tool calls in a transcript.
const (
	CallScheduled        = "scheduled"
	CallRunning          = "running"
	CallRetrying         = "retrying"
	CallCompleted        = "completed"
	CallFailed           = "failed"
	CallHeld             = "held" // a model call waiting for a budget raise
	CallAwaitingApproval = "awaiting_approval"
	CallRejected         = "rejected"
	CallUnknown          = "outcome_unknown" // paused for a person
)

// ModelCallInfo describes one model call (a metered activity).
type ModelCallInfo struct {
	ScheduledEventID int64
	ActivityType     string
	Model            string
	State            string
	Attempt          int32
	Usage            history.Usage
	LastFailure      *Failure `json:",omitempty"`
}

// ToolCallInfo describes one tool call the model asked for.
type ToolCallInfo struct {
	ID        string
	Name      string
	Arguments string
	// ScheduledEventID is the tool's activity (0 before it is scheduled,
	// e.g. while it awaits approval or after a rejection).
	ScheduledEventID int64
	State            string
	Effect           history.EffectClass
	IdempotencyKey   string `json:",omitempty"`
	Result           string `json:",omitempty"` // what the model is told
	ApprovedBy       string `json:",omitempty"`
	// EffectKnown says Effect is the call's class: the one its activity
	// was recorded with, or, before it is scheduled (awaiting approval,
	// rejected), its tool's as the tool's workers declared it. False:
	// neither is known (Effect then says nothing).
	EffectKnown bool `json:",omitempty"`
}
