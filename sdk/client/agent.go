package client

import (
	"context"
	"io"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// BudgetUpdate changes a run's budget (see docs/agents.md, "Usage, cost
// and budgets"): either a new Budget — the held model calls go on if it
// covers them — or Stop, which fails the held calls with a non-retryable
// BudgetExceeded error.
type BudgetUpdate struct {
	WorkflowID string
	// RunID names the run; empty: the current one.
	RunID string
	// Budget replaces the run's budget whole (a zero field is no limit):
	// read the current one from DescribeWorkflow's Budget to change one
	// limit only.
	Budget history.Budget
	// Stop fails the held model calls instead; Budget is then ignored. A
	// run that holds none refuses it (api.ErrInvalidArgument).
	Stop bool
	// By names who decided (default: the client's Identity), Reason why;
	// both go into history (BudgetUpdated).
	By     string
	Reason string
}

// UpdateBudget changes a run's budget, or stops its held model calls, and
// returns the budget's new status. Errors wrap api.ErrNotFound (no such
// run), api.ErrWorkflowClosed, or api.ErrInvalidArgument (a stop with no
// held call).
func (c *serviceClient) UpdateBudget(ctx context.Context, u BudgetUpdate) (*api.BudgetStatus, error) {
	by := u.By
	if by == "" {
		by = c.opts.Identity
	}
	resp, err := c.svc.UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: u.WorkflowID, RunID: u.RunID, Budget: u.Budget,
		Stop: u.Stop, Identity: by, Reason: u.Reason})
	if err != nil {
		return nil, err
	}
	return &resp.Budget, nil
}

// GetTranscript returns an agent run's conversation: its messages, model
// calls and tool calls in order with their states, usage, budget, and the
// approvals it ignored (the current run when runID is empty).
func (c *serviceClient) GetTranscript(ctx context.Context, workflowID, runID string) (*api.GetTranscriptResponse, error) {
	return c.svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: workflowID, RunID: runID})
}

// WatchStream follows a run's live stream (the current run when runID is
// empty) from after afterSeq: 0 reads what the server's window still
// holds. Nothing is fetched until the first Next.
func (c *serviceClient) WatchStream(ctx context.Context, workflowID, runID string, afterSeq int64) *Stream {
	return &Stream{svc: c.svc, workflowID: workflowID, runID: runID, after: afterSeq}
}

// StreamEvent is one event of a run's live stream.
type StreamEvent struct {
	api.StreamEvent
	// Gap: events before this one were dropped from the server's window
	// (this reader was too slow or came late); an attempt still streaming
	// had its text so far resent whole. Re-read the transcript for what
	// was recorded meanwhile.
	Gap bool
}

// Stream reads a run's live stream, in order, long-polling the server.
// Only the final answer of a model call is recorded: a reader shows the
// text events of (ScheduledEventID, Attempt), drops that attempt's text on
// StreamSuperseded, and replaces it with the transcript's message on
// StreamDone. A Stream is not safe for concurrent use.
type Stream struct {
	svc        api.Service
	workflowID string
	runID      string
	after      int64
	buf        []api.StreamEvent
	gap        bool // a gap before buf[0], or before the next event
	closed     bool
}

// Next returns the next event, waiting for one. It returns io.EOF once the
// run has closed and every event was read, ctx's error when ctx ends, and
// the service's errors as they are (api.ErrNotFound for no such run).
func (s *Stream) Next(ctx context.Context) (StreamEvent, error) {
	for len(s.buf) == 0 {
		if s.closed {
			return StreamEvent{}, io.EOF
		}
		if err := s.fetch(ctx); err != nil {
			return StreamEvent{}, err
		}
	}
	ev := StreamEvent{StreamEvent: s.buf[0], Gap: s.gap}
	s.buf, s.gap = s.buf[1:], false
	s.after = ev.Seq
	return ev, nil
}

// fetch long-polls for the events after s.after.
func (s *Stream) fetch(ctx context.Context) error {
	resp, err := s.svc.WatchStream(ctx, &api.WatchStreamRequest{WorkflowID: s.workflowID, RunID: s.runID, AfterSeq: s.after, Wait: true})
	if err == nil && len(resp.Events) == 0 && !resp.Closed {
		err = ctx.Err() // a long poll ends empty, without an error, when ctx does
	}
	if err != nil {
		return err
	}
	s.runID = resp.RunID // the run the stream follows from now on
	s.buf, s.closed = resp.Events, resp.Closed
	s.gap = s.gap || resp.Gap
	if len(resp.Events) == 0 && resp.NextSeq > s.after+1 {
		s.after = resp.NextSeq - 1 // dropped events only: go on after them
	}
	return nil
}

// RunID returns the run the stream follows: the one it was opened on, or
// once Next fetched, the current run it found.
func (s *Stream) RunID() string { return s.runID }
