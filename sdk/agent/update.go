package agent

import (
	"errors"
	"fmt"

	"github.com/cairnflow/cairn/sdk"
)

// ApprovalOutcome is the answer to an approval sent as an update (see
// Agent.listen): the call it decided, and how — or that it is held for a
// call the model's answer, still in flight, may ask for.
type ApprovalOutcome struct {
	CallID   string
	Approved bool
	// Held: no call awaits it yet; it decides the call it names if the
	// model's answer asks for it (else it is recorded as ignored).
	Held bool
}

// The failure types of an approval update the agent accepted but could
// not apply (what it had validated changed before the handler ran).
const (
	FailureNotAnApproval  = "NotAnApproval"
	FailureAlreadyDecided = "AlreadyDecided"
	FailureNotAwaiting    = "NotAwaiting"
)

// errNotRunning rejects an approval update while the agent's Run is not
// running: no call of its own awaits one.
var errNotRunning = errors.New("the agent is not running: no tool call is awaiting approval")

// registerApprovalUpdate registers the update named like the approval
// signal: the same Approval, answered synchronously. Its validator
// rejects, leaving nothing in history, an approval that is not an
// Approval, one for a call already decided and one for no call awaiting
// approval — the person hears why at once; an accepted one decides the
// call and answers the decision. Registering records nothing, so runs
// recorded before it replay as they were.
func (a *Agent) registerApprovalUpdate(ctx sdk.Context) {
	_ = sdk.SetUpdateHandler(ctx, a.opts.ApprovalSignal, a.approveByUpdate, sdk.UpdateHandlerOptions{Validator: a.validateApproval})
}

// validateApproval decides, reading the agent's state only, whether an
// approval update applies.
func (a *Agent) validateApproval(_ sdk.Context, v any) error {
	ap, err := decodeApproval(v)
	switch {
	case err != nil:
		return fmt.Errorf("the update is not an agent.Approval: %w", err)
	case !a.active:
		return errNotRunning
	case a.awaiting(ap) != "":
		return nil
	case ap.CallID != "" && a.wasDecided(ap.CallID):
		return errors.New(a.alreadyDecided(ap.CallID))
	case ap.CallID != "" && a.inFlight:
		return nil // held for the answer's calls, as a signal would be
	}
	return errors.New(a.notAwaiting(ap.CallID))
}

// approveByUpdate applies an accepted approval update as receive applies
// a signal, and answers what it decided.
func (a *Agent) approveByUpdate(ctx sdk.Context, v any) (ApprovalOutcome, error) {
	ap, err := a.readApproval(ctx, v)
	if err != nil {
		why := "the update is not an agent.Approval: " + err.Error()
		a.ignore(ctx, ap, why)
		return ApprovalOutcome{}, sdk.NewNonRetryableError(why, FailureNotAnApproval)
	}
	if id := a.awaiting(ap); id != "" && a.assign(ap) {
		return ApprovalOutcome{CallID: id, Approved: ap.Approved}, nil
	}
	switch {
	case ap.CallID != "" && a.wasDecided(ap.CallID):
		why := a.alreadyDecided(ap.CallID)
		a.ignore(ctx, ap, why)
		return ApprovalOutcome{}, sdk.NewNonRetryableError(why, FailureAlreadyDecided)
	case ap.CallID != "" && a.inFlight:
		a.early = append(a.early, ap)
		return ApprovalOutcome{CallID: ap.CallID, Approved: ap.Approved, Held: true}, nil
	}
	why := a.notAwaiting(ap.CallID)
	a.ignore(ctx, ap, why)
	return ApprovalOutcome{}, sdk.NewNonRetryableError(why, FailureNotAwaiting)
}

// awaiting returns the id of the call awaiting approval that ap would
// decide (assign's choice), or "".
func (a *Agent) awaiting(ap Approval) string {
	for _, w := range a.waiting {
		if w.ap == nil && (ap.CallID == "" || ap.CallID == w.callID) {
			return w.callID
		}
	}
	return ""
}
