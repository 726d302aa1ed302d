package api

import (
	"time"

	"github.com/cairnflow/cairn/history"
)

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
	// Base is set on a run made by a reset or a fork: the run whose
	// history it copied, and up to where.
	Base *BaseRun `msgpack:",omitempty" json:",omitempty"`
	// ResetRunID is set on a run that was reset: the run made from it.
	ResetRunID string `msgpack:",omitempty" json:",omitempty"`
	// LedgerAnswers counts the run's actions answered from the effects
	// ledger (ActivityDeduplicated) instead of performed: after a reset or
	// in a fork, what the base had done already.
	LedgerAnswers int32 `msgpack:",omitempty" json:",omitempty"`
}

// BaseRun names the run a reset or a fork copied its history from.
type BaseRun struct {
	// Kind is "reset" or "fork".
	Kind       string
	WorkflowID string
	RunID      string
	// AtEventID: the base's events before it were copied.
	AtEventID int64
	// Effects is a fork's policy for the actions its base's ledger cannot
	// answer: "hold" or "sandbox:QUEUE".
	Effects string `msgpack:",omitempty" json:",omitempty"`
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
	// PauseHeld: a fork held an action its base's ledger could not
	// answer; perform it, give its result, or fail it (ResolveActivity).
	PauseHeld     = "effect_held"
	PauseBudget   = "budget"
	PauseApproval = "approval"
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
	// LimitKey is the activity's limit key; WaitsForLimit, for a
	// scheduled activity, names the activity limit of its task queue that
	// has no room for it now ("" when none holds it back).
	LimitKey      string
	WaitsForLimit string
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
	// CancelRequested: the parent asked the child to cancel
	// (ChildWorkflowCancelRequested) and it has not closed yet.
	CancelRequested bool
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
	// Unpolled names the task queues the run has a task waiting on that
	// no worker polls (for that kind of task): none is polling now, and
	// none has for UnpolledAfter, or since the engine started. Empty when
	// every waiting task's queue is polled.
	Unpolled []UnpolledQueue `json:",omitempty"`
	// PendingUpdates are the updates the run accepted whose handler has
	// not returned yet, oldest first.
	PendingUpdates []PendingUpdate `json:",omitempty"`
}

// PendingUpdate is an accepted update whose handler runs.
type PendingUpdate struct {
	UpdateID        string
	Name            string
	AcceptedEventID int64
}

// UnpolledAfter is how long a task queue a run's task waits on must have
// gone unpolled before describe says so (DescribeWorkflowResponse.Unpolled):
// a worker re-polls at once after each task, so a longer gap means no
// worker is there, or every one is busy.
const UnpolledAfter = 10 * time.Second

// UnpolledQueue is a task queue a run's task waits on while no worker
// polls it.
type UnpolledQueue struct {
	TaskQueue string
	// Kind is the kind of the waiting task: "workflow" or "activity".
	Kind string
	// LastPoll is when a worker last polled the queue for that kind of
	// task; zero when none has since the engine started (Since).
	LastPoll time.Time
	// Since is when the engine started: it knows of no poll before.
	Since time.Time
	// Message says it for a person, as of the describe: `no worker has
	// polled task queue "payments" for activity tasks in 95 s`, or `no
	// worker has ever polled task queue "payments" for activity tasks
	// (since the engine started 40 s ago)`.
	Message string
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
	// in workflow id order; the other filters still apply. A list by
	// Status leaves them out: a quarantined run is listed, and counted
	// (CountWorkflowsResponse.Quarantined), as quarantined, not under the
	// status it had when its damage was found.
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
	// Total counts every run the filters keep: ByStatus and Quarantined.
	Total int64
	// ByStatus has one entry per status with runs, in status order. A
	// quarantined run is not counted under the status it had when its
	// damage was found, but in Quarantined.
	ByStatus []StatusCount
	// Paused counts the paused runs by what they wait for (PauseInfo.Kind),
	// one entry per kind with runs, in kind order.
	Paused []PauseCount `json:",omitempty"`
	// Quarantined counts the quarantined runs the filters keep
	// (WorkflowInfo.Corrupt): the runs ListWorkflows lists with Corrupt,
	// and skips when it lists by status.
	Quarantined int64 `json:",omitempty"`
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
	// ActivityLimits are the queue's activity limits and their use;
	// ActivityKeys its activity backlog by limit key (the queue serves
	// its keys in turn), the in-flight count of keys under a limit.
	ActivityLimits []ActivityLimitInfo
	ActivityKeys   []LimitKeyInfo
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
