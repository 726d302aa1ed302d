package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// ActivityRef names an activity attempt whose outcome is reported
// asynchronously (the activity returned activities.ErrResultPending): by
// its task token (activities.Info.TaskToken), or by its ids — the workflow
// id, the run id (empty: the current run) and the activity id (the id the
// workflow gave it: sdk.ActivityOptions.ActivityID, by default "1", "2", …
// in schedule order; `cairn workflow describe` shows it). By id, the
// report is that of the activity's current attempt. Set one form only.
type ActivityRef struct {
	TaskToken  []byte
	WorkflowID string
	RunID      string
	ActivityID string
}

// ByToken names an attempt by its task token.
func ByToken(token []byte) ActivityRef { return ActivityRef{TaskToken: token} }

// ByID names the current attempt of an activity by its ids (runID empty:
// the current run of workflowID).
func ByID(workflowID, runID, activityID string) ActivityRef {
	return ActivityRef{WorkflowID: workflowID, RunID: runID, ActivityID: activityID}
}

// String names the attempt for messages.
func (r ActivityRef) String() string {
	if len(r.TaskToken) > 0 {
		return "task token " + activities.FormatTaskToken(r.TaskToken)
	}
	return fmt.Sprintf("activity %q of workflow %q run %q", r.ActivityID, r.WorkflowID, r.RunID)
}

func (r ActivityRef) check() error {
	if len(r.TaskToken) == 0 && (r.WorkflowID == "" || r.ActivityID == "") {
		return fmt.Errorf("%w: an activity is named by its task token, or by its workflow id and activity id", api.ErrInvalidArgument)
	}
	return nil
}

// CompleteActivity implements Client.
func (c *serviceClient) CompleteActivity(ctx context.Context, ref ActivityRef, result any) error {
	if err := ref.check(); err != nil {
		return err
	}
	var p history.Payload
	if result != nil {
		var err error
		if p, err = c.payload(result); err != nil {
			return err
		}
	}
	_, err := c.svc.CompleteActivity(ctx, &api.CompleteActivityRequest{TaskToken: ref.TaskToken, Result: p, Identity: c.opts.Identity,
		WorkflowID: ref.WorkflowID, RunID: ref.RunID, ActivityID: ref.ActivityID})
	return err
}

// FailActivity implements Client.
func (c *serviceClient) FailActivity(ctx context.Context, ref ActivityRef, cause error) error {
	if err := ref.check(); err != nil {
		return err
	}
	if cause == nil {
		return fmt.Errorf("%w: FailActivity needs an error", api.ErrInvalidArgument)
	}
	req := &api.FailActivityRequest{TaskToken: ref.TaskToken, Failure: sdk.ErrorToFailure(cause), Identity: c.opts.Identity,
		WorkflowID: ref.WorkflowID, RunID: ref.RunID, ActivityID: ref.ActivityID}
	var ra *activities.RetryAfterError
	if errors.As(cause, &ra) {
		req.RetryAfter = ra.Delay
	}
	req.OutcomeUnknown = errors.Is(cause, activities.ErrOutcomeUnknown)
	_, err := c.svc.FailActivity(ctx, req)
	return err
}

// HeartbeatActivity implements Client.
func (c *serviceClient) HeartbeatActivity(ctx context.Context, ref ActivityRef, details any) (bool, error) {
	if err := ref.check(); err != nil {
		return false, err
	}
	var p history.Payload
	if details != nil {
		var err error
		if p, err = c.payload(details); err != nil {
			return false, err
		}
	}
	resp, err := c.svc.RecordActivityHeartbeat(ctx, &api.HeartbeatRequest{TaskToken: ref.TaskToken, Details: p,
		WorkflowID: ref.WorkflowID, RunID: ref.RunID, ActivityID: ref.ActivityID})
	if err != nil {
		return false, err
	}
	return resp.CancelRequested, nil
}
