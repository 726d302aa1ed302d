package api

// UpdateStage is how far an update has got, or how far a caller waits
// for it to get.
type UpdateStage uint8

// The stages of an update. The zero stage, as a request's WaitStage,
// waits for the handler to complete.
const (
	// UpdateStageCompleted: the handler returned; its result (or
	// failure) is recorded (history.WorkflowUpdateCompleted).
	UpdateStageCompleted UpdateStage = iota
	// UpdateStageAccepted: the validator accepted the update and it is
	// recorded (history.WorkflowUpdateAccepted): it is durable, and its
	// handler runs, but has not returned yet.
	UpdateStageAccepted
)

// String returns "completed" or "accepted".
func (s UpdateStage) String() string {
	switch s {
	case UpdateStageCompleted:
		return "completed"
	case UpdateStageAccepted:
		return "accepted"
	}
	return "UpdateStage?"
}

// UpdateWorkflowRequest asks a run's update handler Name to change the
// run and answer (docs/sdk.md, "Updates"). The run's validator is asked
// first, by a worker, against the run's current state: a rejected update
// is refused with ErrUpdateRejected and leaves nothing in history. An
// accepted one is recorded, its handler runs as workflow code, and its
// result is recorded and returned.
type UpdateWorkflowRequest struct {
	WorkflowID string
	RunID      string // empty: the current run
	// UpdateID identifies the update within its run: an update sent again
	// with the same id is not applied again; the call returns the first
	// one's outcome (waiting for it when it has not completed yet).
	// Empty: the engine makes one (the response names it).
	UpdateID string
	Name     string
	Input    Payload
	Identity string
	// WaitStage is the stage the call waits for, at most the engine's
	// poll timeout: UpdateStageCompleted (the default) or
	// UpdateStageAccepted. A call that returns before the handler
	// completed says so (Stage); call again with the same UpdateID to
	// keep waiting.
	WaitStage UpdateStage
	// Start, when set, makes this an update-with-start: the workflow's
	// open run is updated, or a run is started as Start describes (its
	// WorkflowID must be WorkflowID or empty, and RunID must be empty)
	// and then updated. A run the call started stays started even when
	// the update is rejected, as in Temporal.
	Start *StartWorkflowRequest
}

// UpdateWorkflowResponse is an update's outcome so far.
type UpdateWorkflowResponse struct {
	RunID    string
	UpdateID string
	// Stage is how far the update has got: UpdateStageCompleted, with
	// Result or Failure set, or UpdateStageAccepted.
	Stage UpdateStage
	// AcceptedEventID is the update's WorkflowUpdateAccepted event.
	AcceptedEventID int64
	// Result is the handler's result; Failure its error (the update was
	// accepted and ran, and the handler failed).
	Result  Payload
	Failure *Failure
	// Started says that an update-with-start started the run.
	Started bool
}
