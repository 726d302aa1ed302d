package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// Errors of Decide and Awaited: the decision applies to no call the run
// awaits approval for (nothing is sent). Decide's also wrap
// api.ErrInvalidArgument.
var (
	// ErrNoApprovalAwaited: the run awaits no approval.
	ErrNoApprovalAwaited = errors.New("agent: no tool call awaits approval")
	// ErrCallNotAwaited: the call named awaits no approval.
	ErrCallNotAwaited = errors.New("agent: the call does not await approval")
	// ErrWhichCall: several calls await approval and none was named.
	ErrWhichCall = errors.New("agent: several tool calls await approval: name one")
)

// Decision is a person's answer to a tool call awaiting approval, for
// Decide: the run (its current run when RunID is empty), the call (empty:
// the only one awaiting), the decision, who made it and why. Identity is
// recorded with the signal (default: By).
type Decision struct {
	WorkflowID string
	RunID      string
	CallID     string
	Approved   bool
	By         string
	Reason     string
	Identity   string
	// AsUpdate sends the decision as the agent's approval update instead
	// of its signal: the agent itself answers at once — a call decided by
	// someone else between Decide's check and the send is refused
	// (ErrCallNotAwaited, wrapping api.ErrUpdateRejected) instead of being
	// recorded as ignored. It needs a worker to validate the update; an
	// agent whose code predates the update (no handler) gets the signal.
	AsUpdate bool
}

// Decide sends d as the approval of a call the run awaits, from outside
// the workflow (a person's tool: `cairn workflow approve`, the web UI):
// it describes the run, checks that the call awaits approval, and signals
// the run (that very run, even if a newer one starts) on the signal the
// call's agent takes approvals from, with an Approval naming the call. It
// returns the call it answered.
//
// A decision no call awaits is refused before anything is sent
// (ErrNoApprovalAwaited, ErrCallNotAwaited, ErrWhichCall). A call decided
// by someone else between the check and the signal keeps the first
// decision: the agent records the second as ignored (docs/agents.md).
func Decide(ctx context.Context, svc api.Service, d Decision) (api.PendingApproval, error) {
	desc, err := svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: d.WorkflowID, RunID: d.RunID})
	if err != nil {
		return api.PendingApproval{}, err
	}
	p, err := Awaited(desc.PendingApprovals, d.CallID)
	if err != nil {
		return p, fmt.Errorf("%w: %s (run %s, %s): %w", api.ErrInvalidArgument, d.WorkflowID, desc.Info.RunID, desc.Info.Status, err)
	}
	in, err := sdk.DefaultConverter().ToPayload(Approval{CallID: p.CallID, Approved: d.Approved, By: d.By, Reason: d.Reason})
	if err != nil {
		return p, err
	}
	identity := d.Identity
	if identity == "" {
		identity = d.By
	}
	if d.AsUpdate {
		sent, err := decideByUpdate(ctx, svc, desc.Info.RunID, p, d, in, identity)
		if sent || err != nil {
			return p, err
		}
	}
	_, err = svc.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: d.WorkflowID, RunID: desc.Info.RunID, SignalName: p.Signal,
		Input: in, Identity: identity})
	return p, err
}

// decideByUpdate sends the decision as the approval update; sent is false
// (and err nil) when the run's code has no such update: the caller
// signals instead.
func decideByUpdate(ctx context.Context, svc api.Service, runID string, p api.PendingApproval, d Decision, in api.Payload, identity string) (sent bool, err error) {
	c := client.NewLocal(svc, client.Options{Identity: identity})
	h, err := c.UpdateWorkflow(ctx, client.UpdateOptions{WorkflowID: d.WorkflowID, RunID: runID, Name: p.Signal, Args: in})
	if errors.Is(err, api.ErrUpdateRejected) && strings.Contains(err.Error(), sdk.ErrUnknownUpdate.Error()) {
		return false, nil // an agent built before approvals were updates
	}
	if err == nil {
		var out ApprovalOutcome
		err = h.Get(ctx, &out)
	}
	var app *sdk.ApplicationError
	if errors.Is(err, api.ErrUpdateRejected) || errors.As(err, &app) {
		return true, fmt.Errorf("%w: %w", ErrCallNotAwaited, err)
	}
	return true, err
}

// Awaited returns the call among pending (DescribeWorkflowResponse's
// PendingApprovals) that callID names; with callID empty, the only one.
func Awaited(pending []api.PendingApproval, callID string) (api.PendingApproval, error) {
	switch {
	case len(pending) == 0:
		return api.PendingApproval{}, ErrNoApprovalAwaited
	case callID == "" && len(pending) == 1:
		return pending[0], nil
	case callID == "":
		return api.PendingApproval{}, fmt.Errorf("%w (awaiting: %s)", ErrWhichCall, callIDs(pending))
	}
	for _, p := range pending {
		if p.CallID == callID {
			return p, nil
		}
	}
	return api.PendingApproval{}, fmt.Errorf("%w: %q (awaiting: %s)", ErrCallNotAwaited, callID, callIDs(pending))
}

// callIDs lists the calls awaiting approval, with their tools.
func callIDs(pending []api.PendingApproval) string {
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = p.CallID
		if p.Tool != "" {
			ids[i] += " (" + p.Tool + ")"
		}
	}
	return strings.Join(ids, ", ")
}
