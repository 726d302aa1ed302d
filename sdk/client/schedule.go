package client

import (
	"context"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
)

// ScheduleOptions create a schedule: when (Spec), what (Workflow with
// Input on TaskQueue, under StartOptions' timeouts) and the policies. Each
// action starts a run whose workflow id is "<ID>-<nominal time, RFC 3339
// UTC>" (docs/schedules.md).
type ScheduleOptions struct {
	ID   string
	Spec api.ScheduleSpec
	// Workflow is a workflow function or a type name; Input is encoded
	// with the client's converter (an api.Payload is used as it is).
	Workflow  any
	Input     any
	TaskQueue string
	// ExecutionTimeout, RunTimeout and TaskTimeout of each run.
	ExecutionTimeout, RunTimeout, TaskTimeout time.Duration
	Policies                                  api.SchedulePolicies
	// Paused creates the schedule paused, with Note.
	Paused bool
	Note   string
}

// schedule builds the api.Schedule of opts, encoding its input.
func (c *serviceClient) schedule(opts ScheduleOptions) (api.Schedule, error) {
	name := sdk.TypeName(opts.Workflow)
	if name == "" {
		return api.Schedule{}, fmt.Errorf("%w: workflow must be a function or a type name, got %T", api.ErrInvalidArgument, opts.Workflow)
	}
	in, err := c.payload(opts.Input)
	if err != nil {
		return api.Schedule{}, err
	}
	return api.Schedule{Spec: opts.Spec, Policies: opts.Policies, Paused: opts.Paused, Note: opts.Note,
		Action: api.ScheduleAction{WorkflowType: name, TaskQueue: opts.TaskQueue, Input: in,
			ExecutionTimeout: opts.ExecutionTimeout, RunTimeout: opts.RunTimeout, TaskTimeout: opts.TaskTimeout}}, nil
}

func (c *serviceClient) CreateSchedule(ctx context.Context, opts ScheduleOptions) error {
	s, err := c.schedule(opts)
	if err != nil {
		return err
	}
	_, err = c.svc.CreateSchedule(ctx, &api.CreateScheduleRequest{ScheduleID: opts.ID, Schedule: s, Identity: c.opts.Identity})
	return err
}

func (c *serviceClient) UpdateSchedule(ctx context.Context, opts ScheduleOptions) error {
	s, err := c.schedule(opts)
	if err != nil {
		return err
	}
	_, err = c.svc.UpdateSchedule(ctx, &api.UpdateScheduleRequest{ScheduleID: opts.ID, Schedule: s, Identity: c.opts.Identity})
	return err
}

func (c *serviceClient) DescribeSchedule(ctx context.Context, id string) (*api.ScheduleInfo, error) {
	resp, err := c.svc.DescribeSchedule(ctx, &api.DescribeScheduleRequest{ScheduleID: id})
	if err != nil {
		return nil, err
	}
	return &resp.Info, nil
}

func (c *serviceClient) ListSchedules(ctx context.Context, req *api.ListSchedulesRequest) (*api.ListSchedulesResponse, error) {
	return c.svc.ListSchedules(ctx, req)
}

func (c *serviceClient) PatchSchedule(ctx context.Context, req api.PatchScheduleRequest) error {
	if req.Identity == "" {
		req.Identity = c.opts.Identity
	}
	_, err := c.svc.PatchSchedule(ctx, &req)
	return err
}

func (c *serviceClient) DeleteSchedule(ctx context.Context, id string) error {
	_, err := c.svc.DeleteSchedule(ctx, &api.DeleteScheduleRequest{ScheduleID: id, Identity: c.opts.Identity})
	return err
}
