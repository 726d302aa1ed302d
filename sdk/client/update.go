package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
)

// UpdateOptions describe an update of a run (Client.UpdateWorkflow).
type UpdateOptions struct {
	// WorkflowID names the workflow; RunID the run (empty: the current
	// one). For UpdateWithStartWorkflow, WorkflowID defaults to the start
	// options' ID and RunID must be empty.
	WorkflowID string
	RunID      string
	// UpdateID identifies the update within its run: sent again with the
	// same id, it is applied once and answers the first one's outcome.
	// Empty: the client makes one.
	UpdateID string
	// Name is the update's name (sdk.SetUpdateHandler); Args its input
	// (encoded with the client's converter; an api.Payload is used as it
	// is).
	Name string
	Args any
	// WaitForStage is the stage UpdateWorkflow returns at:
	// api.UpdateStageCompleted (the default: the handler has returned) or
	// api.UpdateStageAccepted (the update is durable and its handler
	// runs; UpdateHandle.Get waits for its result).
	WaitForStage api.UpdateStage
}

// UpdateHandle is an update the run accepted.
type UpdateHandle interface {
	// WorkflowID returns the workflow id.
	WorkflowID() string
	// RunID returns the id of the run that accepted the update.
	RunID() string
	// UpdateID returns the update's id.
	UpdateID() string
	// Get waits for the update's handler to complete and decodes its
	// result into valuePtr (nil to discard it). A handler's error comes
	// back as the error it was recorded as (*sdk.ApplicationError …); a
	// run that closed before the handler completed returns an error
	// wrapping api.ErrWorkflowClosed.
	Get(ctx context.Context, valuePtr any) error
}

// newUpdateID returns a random update id.
func newUpdateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (c *serviceClient) updateRequest(opts UpdateOptions) (*api.UpdateWorkflowRequest, error) {
	in, err := c.payload(opts.Args)
	if err != nil {
		return nil, err
	}
	id := opts.UpdateID
	if id == "" {
		id = newUpdateID()
	}
	return &api.UpdateWorkflowRequest{WorkflowID: opts.WorkflowID, RunID: opts.RunID, UpdateID: id, Name: opts.Name, Input: in,
		Identity: c.opts.Identity, WaitStage: opts.WaitForStage}, nil
}

func (c *serviceClient) UpdateWorkflow(ctx context.Context, opts UpdateOptions) (UpdateHandle, error) {
	req, err := c.updateRequest(opts)
	if err != nil {
		return nil, err
	}
	return c.update(ctx, req)
}

func (c *serviceClient) UpdateWithStartWorkflow(ctx context.Context, start StartOptions, workflow any, input any, opts UpdateOptions) (UpdateHandle, error) {
	sreq, err := c.startRequest(start, workflow, input)
	if err != nil {
		return nil, err
	}
	if opts.WorkflowID == "" {
		opts.WorkflowID = start.ID
	}
	req, err := c.updateRequest(opts)
	if err != nil {
		return nil, err
	}
	req.Start = sreq
	ctx, span := c.traceStart(ctx, sreq)
	h, err := c.update(ctx, req)
	if err != nil {
		endStart(span, "", err)
		return nil, err
	}
	endStart(span, h.RunID(), nil)
	return h, nil
}

// update sends req until the update reaches the stage it waits for (each
// call waits at most the server's poll timeout; the update id makes the
// calls one update).
func (c *serviceClient) update(ctx context.Context, req *api.UpdateWorkflowRequest) (UpdateHandle, error) {
	for {
		resp, err := c.svc.UpdateWorkflow(ctx, req)
		if err != nil {
			return nil, err
		}
		h := &updateHandle{c: c, workflowID: req.WorkflowID, name: req.Name, input: req}
		if h.workflowID == "" && req.Start != nil {
			h.workflowID = req.Start.WorkflowID
		}
		h.runID, h.id = resp.RunID, resp.UpdateID
		if resp.Stage == api.UpdateStageCompleted {
			h.done = resp
		}
		if resp.Stage == api.UpdateStageCompleted || req.WaitStage == api.UpdateStageAccepted {
			return h, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Accepted (or started) already: from now on ask about that run
		// only, and never start another.
		next := *req
		next.RunID, next.Start = resp.RunID, nil
		if next.WorkflowID == "" {
			next.WorkflowID = h.workflowID
		}
		req = &next
	}
}

type updateHandle struct {
	c          *serviceClient
	workflowID string
	runID      string
	id         string
	name       string
	input      *api.UpdateWorkflowRequest
	done       *api.UpdateWorkflowResponse
}

func (h *updateHandle) WorkflowID() string { return h.workflowID }
func (h *updateHandle) RunID() string      { return h.runID }
func (h *updateHandle) UpdateID() string   { return h.id }

func (h *updateHandle) Get(ctx context.Context, valuePtr any) error {
	resp := h.done
	for resp == nil {
		r, err := h.c.svc.UpdateWorkflow(ctx, &api.UpdateWorkflowRequest{WorkflowID: h.workflowID, RunID: h.runID, UpdateID: h.id,
			Name: h.name, Input: h.input.Input, Identity: h.input.Identity})
		if err != nil {
			return err
		}
		if r.Stage == api.UpdateStageCompleted {
			resp = r
			break
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("client: update %q: %w", h.id, err)
		}
	}
	h.done = resp
	if resp.Failure != nil {
		return sdk.FailureToError(*resp.Failure)
	}
	return h.c.decode(resp.Result, valuePtr)
}
