package api

// ResetWorkflowRequest resets a run: a new run of the same workflow id
// whose history is the run's up to a workflow task, from where the
// workflow's code runs again. The run is terminated (when open) and the
// two are linked. Actions the run performed after the point are answered
// from the effects ledger when the new run schedules them again, never
// performed again; an action whose outcome is unknown pauses the new run.
type ResetWorkflowRequest struct {
	WorkflowID string
	// RunID names the run (empty: the workflow id's current run). A closed
	// run can be reset while no run of the id is open.
	RunID string
	// The point: exactly one of ToEventID (a WorkflowTaskCompleted
	// event's id: the new run keeps the events before it), ToLastTask and
	// ToFirstTask.
	ToEventID   int64
	ToLastTask  bool
	ToFirstTask bool
	// NoReapply drops the signals the run received after the point
	// (by default they are delivered to the new run again).
	NoReapply bool
	// Reason is required: it is recorded in both runs.
	Reason   string
	Identity string
	// RequestID makes a retried reset return the run the first one made.
	RequestID string
}

// ResetWorkflowResponse names the run a reset made.
type ResetWorkflowResponse struct {
	RunID     string
	BaseRunID string
	// AtEventID is the point: the base's WorkflowTaskCompleted event
	// before which its history was copied.
	AtEventID int64
}

// ForkWorkflowRequest forks a run: a copy of its history up to a workflow
// task under a new workflow id, from where the (possibly changed) code
// runs — on another task queue, say, served by a new build. The base run
// goes on untouched. An action of the fork that the base's effects ledger
// completed (same key, computed in the base's key space) is answered from
// it; any other action with an effect is never performed silently: it is
// held for a person (ResolveActivity with history.ResolvedPerform, or a
// result to use instead), or, with Effects "sandbox:QUEUE", sent to that
// task queue.
type ForkWorkflowRequest struct {
	WorkflowID string
	RunID      string
	// AtEventID is a WorkflowTaskCompleted event of the base (0: its last
	// workflow task).
	AtEventID     int64
	NewWorkflowID string
	// TaskQueue is the fork's task queue (empty: the base's).
	TaskQueue string
	// Effects is "" or "hold" (the default), or "sandbox:QUEUE".
	Effects string
	// NoReapply: as in ResetWorkflowRequest.
	NoReapply bool
	Reason    string
	Identity  string
	RequestID string
}

// ForkWorkflowResponse names the fork's run.
type ForkWorkflowResponse struct {
	WorkflowID string
	RunID      string
	AtEventID  int64
}
