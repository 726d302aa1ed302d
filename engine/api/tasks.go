package api

import (
	"time"

	"github.com/cairnflow/cairn/history"
)

// sticky queue) for a workflow task.
type PollWorkflowTaskRequest struct {
	TaskQueue string
	Identity  string
}

// PollWorkflowTaskResponse holds a task, or nil when the poll timed out.
type PollWorkflowTaskResponse struct {
	Task *WorkflowTask
	// Covered is a cluster server's answer, at once and without a task, to
	// a poll another server forwarded while workers poll this server
	// directly: they take its tasks, and the forwarding server stops
	// asking it for a while (docs/scale-out.md, "Polls").
	Covered bool
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
	// SuggestContinueAsNewBytes is the history size from which workflow
	// code sees ContinueAsNewSuggested (sdk.WorkflowInfo.HistorySize: the
	// encoded size of the events the decision has seen, which the SDK
	// measures from the events themselves, so it replays exactly); 0
	// means unknown (no suggestion by size).
	SuggestContinueAsNewBytes int64
}

// WorkflowQuery is a query to answer from the run's current state.
type WorkflowQuery struct {
	QueryID   string
	QueryType string
	Args      Payload
	// Update asks for the validation of an update instead: QueryType is
	// the update's name and Args its input. The worker runs the update's
	// validator against the run's state (writing nothing) and answers
	// with RespondQueryTaskRequest.Rejected when it, or the lack of a
	// handler, rejects the update.
	Update bool
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
	CommandRequestCancelChildWorkflow
	CommandCompleteUpdate
	commandCount
)

var commandNames = [commandCount]string{"Unspecified", "ScheduleActivity", "RequestCancelActivity", "StartTimer", "CancelTimer", "RecordMarker", "StartChildWorkflow", "SignalExternalWorkflow", "CompleteWorkflow", "FailWorkflow", "CancelWorkflow", "ContinueAsNew", "SetBudget",
	"RequestCancelChildWorkflow", "CompleteUpdate"}

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
	// RequestCancelChildWorkflow and CompleteUpdate are last: fields are appended, never
	// reordered (the msgpack field-order golden).
	RequestCancelChildWorkflow *RequestCancelChildWorkflowCommand `msgpack:",omitempty" json:",omitempty"`
	CompleteUpdate             *CompleteUpdateCommand             `msgpack:",omitempty" json:",omitempty"`
}

// CompleteUpdateCommand records the outcome of an accepted update's
// handler (→ WorkflowUpdateCompleted): its result, or its failure.
type CompleteUpdateCommand struct {
	UpdateID string
	Result   Payload
	Failure  *Failure
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

// RequestCancelChildWorkflowCommand asks a child the run started to cancel
// (→ ChildWorkflowCancelRequested): the child's run gets a
// WorkflowCancelRequested, and its outcome reaches the parent as usual
// (ChildWorkflowFailed with a canceled failure when it honours the
// request, ChildWorkflowCompleted when it completes anyway). A child that
// has closed already is not touched: the event is recorded and nothing
// else happens. WorkflowID and RunID name the child as its
// ChildWorkflowStarted did.
type RequestCancelChildWorkflowCommand struct {
	InitiatedEventID int64
	WorkflowID       string
	RunID            string
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
	// Rejected answers an update's validation (WorkflowQuery.Update):
	// the validator rejected the update, or the run has no handler for
	// it; Failure says why. A Failure without Rejected means the worker
	// could not validate (it could not replay the run, for instance).
	Rejected bool
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
	// Covered: see PollWorkflowTaskResponse.Covered.
	Covered bool
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
	// WorkflowID, RunID (empty: the current run) and ActivityID name the
	// activity instead of TaskToken, for asynchronous completion by id
	// (the activity returned activities.ErrResultPending): the report is
	// that of its current attempt. Set them only with an empty TaskToken.
	// ActivityID is the id the workflow gave the activity
	// (sdk.ActivityOptions.ActivityID, by default "1", "2", … in schedule
	// order within a run), shown by DescribeWorkflow.
	WorkflowID string
	RunID      string
	ActivityID string
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
	// WorkflowID, RunID (empty: the current run) and ActivityID name the
	// activity instead of TaskToken, for asynchronous completion by id
	// (the activity returned activities.ErrResultPending): the report is
	// that of its current attempt. Set them only with an empty TaskToken.
	// ActivityID is the id the workflow gave the activity
	// (sdk.ActivityOptions.ActivityID, by default "1", "2", … in schedule
	// order within a run), shown by DescribeWorkflow.
	WorkflowID string
	RunID      string
	ActivityID string
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
	// WorkflowID, RunID (empty: the current run) and ActivityID name the
	// activity instead of TaskToken, for asynchronous completion by id
	// (the activity returned activities.ErrResultPending): the report is
	// that of its current attempt. Set them only with an empty TaskToken.
	// ActivityID is the id the workflow gave the activity
	// (sdk.ActivityOptions.ActivityID, by default "1", "2", … in schedule
	// order within a run), shown by DescribeWorkflow.
	WorkflowID string
	RunID      string
	ActivityID string
}

// FailActivityResponse is empty.
type FailActivityResponse struct{}

// MarshalJSON writes the status by name ("running"), for people and scripts.
