// Package api is the one service contract between Cairn's engine and its
// clients: workers, the CLI and the HTTP server. It holds request and
// response types and the Service interface, and nothing that links Badger,
// so a worker binary that imports it stays small.
//
// Every method has the shape
//
//	Method(ctx context.Context, req *MethodRequest) (*MethodResponse, error)
//
// so that transports can serve and call all of them the same way. Errors
// wrap the sentinels in errors.go.
//
// Use:
//
//	var svc api.Service = eng // *engine.Engine, or a remote client
//	resp, err := svc.StartWorkflow(ctx, &api.StartWorkflowRequest{
//		WorkflowID: "invoice-INV-9", WorkflowType: "PayInvoice", TaskQueue: "agents",
//	})
package api

import "context"

// Service is the engine as its clients see it.
type Service interface {
	// StartWorkflow starts a run. With a run already open it returns
	// ErrAlreadyStarted, unless ConflictPolicy is UseExisting, in which case
	// it returns the open run with Started false. A closed previous run is
	// subject to ReusePolicy.
	StartWorkflow(ctx context.Context, req *StartWorkflowRequest) (*StartWorkflowResponse, error)
	// SignalWorkflow delivers a signal to the run (the current run when
	// RunID is empty). ErrNotFound, ErrWorkflowClosed.
	SignalWorkflow(ctx context.Context, req *SignalWorkflowRequest) (*SignalWorkflowResponse, error)
	// SignalWithStartWorkflow signals the open run, or starts one and
	// signals it, atomically.
	SignalWithStartWorkflow(ctx context.Context, req *SignalWithStartRequest) (*StartWorkflowResponse, error)
	// RequestCancelWorkflow records a cancel request the workflow code sees.
	RequestCancelWorkflow(ctx context.Context, req *CancelWorkflowRequest) (*CancelWorkflowResponse, error)
	// TerminateWorkflow closes the run at once without running code.
	TerminateWorkflow(ctx context.Context, req *TerminateWorkflowRequest) (*TerminateWorkflowResponse, error)
	// DeleteWorkflow deletes a closed run (its history, state, list
	// entries and occurrence counters; not its ledger entries) at once,
	// as the retention sweep does when the run's retention has passed.
	// ErrNotFound; ErrFailedPrecondition for an open run without Force,
	// or for a run a kept reset or fork still reads its history from.
	DeleteWorkflow(ctx context.Context, req *DeleteWorkflowRequest) (*DeleteWorkflowResponse, error)
	// ResetWorkflow makes a new run of the workflow id from a run's
	// history up to a workflow task, and terminates the run
	// (timetravel.go).
	ResetWorkflow(ctx context.Context, req *ResetWorkflowRequest) (*ResetWorkflowResponse, error)
	// ForkWorkflow copies a run's history up to a workflow task under a
	// new workflow id, whose effects are answered from the base's ledger
	// or held (timetravel.go).
	ForkWorkflow(ctx context.Context, req *ForkWorkflowRequest) (*ForkWorkflowResponse, error)
	// DescribeWorkflow returns the run's status and pending work.
	DescribeWorkflow(ctx context.Context, req *DescribeWorkflowRequest) (*DescribeWorkflowResponse, error)
	// GetHistory returns events of a run, optionally long-polling for new
	// ones when there are none past FromEventID.
	GetHistory(ctx context.Context, req *GetHistoryRequest) (*GetHistoryResponse, error)
	// GetResult returns the run's outcome, long-polling while it is open
	// when Wait is set (an open run at the poll's end returns Closed=false).
	GetResult(ctx context.Context, req *GetResultRequest) (*GetResultResponse, error)
	// ListWorkflows lists runs newest first, filtered and paginated.
	ListWorkflows(ctx context.Context, req *ListWorkflowsRequest) (*ListWorkflowsResponse, error)
	// QueryWorkflow asks a worker to answer a query against the run's state.
	// Nothing is written to history.
	QueryWorkflow(ctx context.Context, req *QueryWorkflowRequest) (*QueryWorkflowResponse, error)
	// UpdateWorkflow asks the run's update handler to change the run and
	// answer, after its validator accepted the update (a worker validates
	// against the run's current state). Rejected: ErrUpdateRejected and
	// nothing is written. Accepted: recorded durably, once per UpdateID,
	// and the call waits for the stage the request asks for.
	// ErrNotFound, ErrWorkflowClosed, ErrLimitExceeded.
	UpdateWorkflow(ctx context.Context, req *UpdateWorkflowRequest) (*UpdateWorkflowResponse, error)
	// ResolveActivity decides an activity whose outcome is unknown (the run
	// is paused on it): happened, not happened, or failed.
	ResolveActivity(ctx context.Context, req *ResolveActivityRequest) (*ResolveActivityResponse, error)
	// CountWorkflows counts runs by status (and the paused ones by what
	// they wait for), with ListWorkflows' filters.
	// It reads every matching run's list entry: O(runs matched).
	CountWorkflows(ctx context.Context, req *CountWorkflowsRequest) (*CountWorkflowsResponse, error)
	// DescribeTaskQueue returns a task queue's backlog and the pollers seen
	// on it lately, so that a queue nobody polls shows as such.
	DescribeTaskQueue(ctx context.Context, req *DescribeTaskQueueRequest) (*DescribeTaskQueueResponse, error)
	// ListTaskQueues describes every task queue with a backlog or a poller
	// seen lately (workers' sticky queues left out), by name.
	ListTaskQueues(ctx context.Context, req *ListTaskQueuesRequest) (*ListTaskQueuesResponse, error)
	// SetActivityLimit sets or clears a concurrency/rate limit on the
	// activities of a task queue (ActivityLimit), durably; it applies at
	// the next dispatch. ErrInvalidArgument, ErrLimitExceeded.
	SetActivityLimit(ctx context.Context, req *SetActivityLimitRequest) (*SetActivityLimitResponse, error)
	// ListEffects reads the effects ledger: every action with an
	// idempotency key, its state, attempts, duplicates and result, across
	// the runs of its workflow id.
	ListEffects(ctx context.Context, req *ListEffectsRequest) (*ListEffectsResponse, error)

	// PollWorkflowTask long-polls a task queue for a workflow task (or a
	// query task). On timeout it returns a response with a nil Task.
	PollWorkflowTask(ctx context.Context, req *PollWorkflowTaskRequest) (*PollWorkflowTaskResponse, error)
	// CompleteWorkflowTask applies the task's commands. ErrStaleTask for a
	// token that is no longer current.
	CompleteWorkflowTask(ctx context.Context, req *CompleteWorkflowTaskRequest) (*CompleteWorkflowTaskResponse, error)
	// FailWorkflowTask reports that the workflow code could not produce
	// commands (panic, nondeterminism); the task is retried.
	FailWorkflowTask(ctx context.Context, req *FailWorkflowTaskRequest) (*FailWorkflowTaskResponse, error)
	// RespondQueryTask answers a query task.
	RespondQueryTask(ctx context.Context, req *RespondQueryTaskRequest) (*RespondQueryTaskResponse, error)

	// PollActivityTask long-polls a task queue for an activity task.
	PollActivityTask(ctx context.Context, req *PollActivityTaskRequest) (*PollActivityTaskResponse, error)
	// RecordActivityHeartbeat extends the attempt's lease and stores
	// progress details. ErrStaleAttempt when the lease is no longer current.
	RecordActivityHeartbeat(ctx context.Context, req *HeartbeatRequest) (*HeartbeatResponse, error)
	// CompleteActivity records the attempt's result. ErrStaleAttempt when
	// the lease is no longer current.
	CompleteActivity(ctx context.Context, req *CompleteActivityRequest) (*CompleteActivityResponse, error)
	// FailActivity records the attempt's failure (retried per policy), or
	// with OutcomeUnknown that the tool cannot tell whether it took effect.
	FailActivity(ctx context.Context, req *FailActivityRequest) (*FailActivityResponse, error)

	// GetChunks returns stored payload chunks by hash (and, with
	// Ancestors, the chunks they extend), for workers and tools that
	// resolve payloads recorded by reference. ErrNotFound for an unknown
	// hash.
	GetChunks(ctx context.Context, req *GetChunksRequest) (*GetChunksResponse, error)

	// UpdateBudget raises (or lowers) a run's budget, or stops the run's
	// held model calls. ErrNotFound, ErrWorkflowClosed.
	UpdateBudget(ctx context.Context, req *UpdateBudgetRequest) (*UpdateBudgetResponse, error)
	// PublishStream publishes an activity attempt's live output (tokens)
	// to the run's watchers; nothing is recorded. ErrStaleAttempt when the
	// attempt no longer holds its lease.
	PublishStream(ctx context.Context, req *PublishStreamRequest) (*PublishStreamResponse, error)
	// WatchStream reads a run's live stream, long-polling with Wait.
	WatchStream(ctx context.Context, req *WatchStreamRequest) (*WatchStreamResponse, error)
	// GetTranscript returns an agent run's conversation, model calls and
	// tool calls, with usage and budget.
	GetTranscript(ctx context.Context, req *GetTranscriptRequest) (*GetTranscriptResponse, error)
	// DescribeCluster describes the servers sharing the store and who
	// serves which shard (a server alone on its store describes itself).
	DescribeCluster(ctx context.Context, req *DescribeClusterRequest) (*DescribeClusterResponse, error)
	// NotifyChildClosed tells a parent run that its child, served by
	// another server of a cluster, closed (servers call it).
	NotifyChildClosed(ctx context.Context, req *NotifyChildClosedRequest) (*NotifyChildClosedResponse, error)
	// CreateSchedule creates a schedule (engine/schedule): ErrAlreadyStarted
	// when the id is taken, ErrInvalidArgument for a bad spec or action.
	CreateSchedule(ctx context.Context, req *CreateScheduleRequest) (*CreateScheduleResponse, error)
	// DescribeSchedule returns a schedule, its recent and next actions.
	// ErrNotFound.
	DescribeSchedule(ctx context.Context, req *DescribeScheduleRequest) (*DescribeScheduleResponse, error)
	// ListSchedules lists schedules by id.
	ListSchedules(ctx context.Context, req *ListSchedulesRequest) (*ListSchedulesResponse, error)
	// UpdateSchedule replaces a schedule's spec, action and policies.
	// ErrNotFound, ErrInvalidArgument.
	UpdateSchedule(ctx context.Context, req *UpdateScheduleRequest) (*UpdateScheduleResponse, error)
	// PatchSchedule pauses or unpauses a schedule, triggers an action now,
	// or backfills time ranges. ErrNotFound, ErrInvalidArgument.
	PatchSchedule(ctx context.Context, req *PatchScheduleRequest) (*PatchScheduleResponse, error)
	// DeleteSchedule deletes a schedule; the runs it started stay.
	// ErrNotFound.
	DeleteSchedule(ctx context.Context, req *DeleteScheduleRequest) (*DeleteScheduleResponse, error)
}
