// Package client starts, signals, queries and inspects workflows. One
// Client interface serves both ways of reaching an engine: NewLocal wraps an
// embedded engine (any api.Service), and Dial (with the server) reaches one
// over HTTP.
//
//	c := client.NewLocal(eng, client.Options{})
//	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "invoice-INV-9", TaskQueue: "agents"}, PayInvoice, inv)
//	var receipt Receipt
//	err = run.Get(ctx, &receipt)
package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/tracing"
	"github.com/cairnflow/cairn/sdk"
)

// Client is how applications talk to Cairn.
type Client interface {
	// StartWorkflow starts a run of workflow (a function or a type name)
	// with input. With a run already open for opts.ID it fails with an error
	// wrapping api.ErrAlreadyStarted, unless opts.ConflictPolicy says to
	// use the existing run.
	StartWorkflow(ctx context.Context, opts StartOptions, workflow any, input any) (Run, error)
	// ExecuteWorkflow starts a run and waits for its result in valuePtr
	// (nil to discard it).
	ExecuteWorkflow(ctx context.Context, opts StartOptions, workflow any, input any, valuePtr any) (Run, error)
	// SignalWorkflow sends a signal to a run (the current one when runID is
	// empty).
	SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error
	// SignalWithStartWorkflow signals the open run of opts.ID, or starts
	// one and signals it, atomically.
	SignalWithStartWorkflow(ctx context.Context, opts StartOptions, signalName string, signalArg any, workflow any, input any) (Run, error)
	// QueryWorkflow asks a run a question; the answer is decoded into
	// valuePtr.
	QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args any, valuePtr any) error
	// UpdateWorkflow sends an update to a run: its validator, if any,
	// accepts it or rejects it (an error wrapping api.ErrUpdateRejected;
	// nothing is recorded), then its handler runs as workflow code. It
	// returns once the update reaches opts.WaitForStage (by default, once
	// the handler completed: UpdateHandle.Get returns at once).
	UpdateWorkflow(ctx context.Context, opts UpdateOptions) (UpdateHandle, error)
	// UpdateWithStartWorkflow updates the open run of start.ID, or starts
	// one (workflow, input) and updates it. A run it started stays
	// started if the update is rejected.
	UpdateWithStartWorkflow(ctx context.Context, start StartOptions, workflow any, input any, opts UpdateOptions) (UpdateHandle, error)
	// CancelWorkflow asks a run to cancel; the workflow code decides how.
	CancelWorkflow(ctx context.Context, workflowID, runID, reason string) error
	// TerminateWorkflow closes a run at once.
	TerminateWorkflow(ctx context.Context, workflowID, runID, reason string) error
	// DeleteWorkflow deletes a closed run (runID "": the current run) —
	// its history, state and list entries; not its effects-ledger entries.
	// An open run is refused (api.ErrFailedPrecondition) unless force,
	// which terminates it first. It returns the run id deleted.
	DeleteWorkflow(ctx context.Context, workflowID, runID string, force bool) (string, error)
	// DescribeWorkflow returns a run's status and pending work.
	DescribeWorkflow(ctx context.Context, workflowID, runID string) (*api.DescribeWorkflowResponse, error)
	// GetWorkflow returns a handle on a run.
	GetWorkflow(ctx context.Context, workflowID, runID string) Run
	// GetHistory returns a run's whole history.
	GetHistory(ctx context.Context, workflowID, runID string) ([]history.Event, error)
	// ListWorkflows lists runs newest first.
	ListWorkflows(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error)
	// CountWorkflows counts runs by status, with ListWorkflows' filters.
	CountWorkflows(ctx context.Context, req *api.CountWorkflowsRequest) (*api.CountWorkflowsResponse, error)
	// DescribeTaskQueue returns a task queue's backlog and its recent
	// pollers.
	DescribeTaskQueue(ctx context.Context, taskQueue string) (*api.TaskQueueInfo, error)
	// ListTaskQueues describes the task queues with a backlog or a recent
	// poller.
	ListTaskQueues(ctx context.Context) ([]api.TaskQueueInfo, error)
	// SetActivityLimit sets a concurrency/rate limit on the activities of
	// a task queue (api.ActivityLimit) and returns the queue's limits.
	SetActivityLimit(ctx context.Context, limit api.ActivityLimit) ([]api.ActivityLimit, error)
	// ClearActivityLimit removes the limit of (task queue, activity type,
	// limit key) and returns the queue's limits.
	ClearActivityLimit(ctx context.Context, taskQueue, activityType, limitKey string) ([]api.ActivityLimit, error)
	// ListEffects reads the effects ledger: the actions with an
	// idempotency key, their state, attempts, duplicates and results.
	ListEffects(ctx context.Context, req *api.ListEffectsRequest) (*api.ListEffectsResponse, error)
	// ResetWorkflow makes a new run of a workflow id from a run's history
	// up to a workflow task and terminates the run; what the run performed
	// after the point is answered from the effects ledger, never performed
	// again. A request id is generated when req has none, so that a
	// retried call makes one run.
	ResetWorkflow(ctx context.Context, req api.ResetWorkflowRequest) (*api.ResetWorkflowResponse, error)
	// ForkWorkflow copies a run's history up to a workflow task under a
	// new workflow id; its effects are answered from the base's ledger or
	// held for a person (or sent to a sandbox task queue).
	ForkWorkflow(ctx context.Context, req api.ForkWorkflowRequest) (*api.ForkWorkflowResponse, error)
	// ResolveActivity decides an activity whose outcome is unknown: it
	// happened (with its result, encoded by the client's converter), it did
	// not happen (retry with the same key), or it failed.
	ResolveActivity(ctx context.Context, req ResolveRequest) error
	// CompleteActivity reports the success of an activity attempt whose
	// activity returned activities.ErrResultPending, with its result
	// (encoded by the client's converter; nil for none). The report takes
	// the path of a worker's: an attempt that no longer holds its lease (its
	// timeout passed, or another attempt runs) is refused with an error
	// wrapping api.ErrStaleAttempt after what it proves was recorded (a
	// late report); by id, an activity that is no longer pending is
	// api.ErrNotFound. A repeated identical report is acknowledged again.
	CompleteActivity(ctx context.Context, ref ActivityRef, result any) error
	// FailActivity reports the failure of such an attempt (retried per the
	// activity's retry policy; an *sdk.ApplicationError's NonRetryable and
	// activities.ErrOutcomeUnknown keep their meaning).
	FailActivity(ctx context.Context, ref ActivityRef, err error) error
	// HeartbeatActivity extends such an attempt's lease (its heartbeat
	// timeout) and records progress details; it returns whether the
	// workflow asked the activity to cancel.
	HeartbeatActivity(ctx context.Context, ref ActivityRef, details any) (cancelRequested bool, err error)
	// UpdateBudget raises (or lowers) an agent run's budget, or stops its
	// held model calls, and returns the budget's new status.
	UpdateBudget(ctx context.Context, u BudgetUpdate) (*api.BudgetStatus, error)
	// GetTranscript returns an agent run's conversation: messages, model
	// calls and tool calls with their states, usage and budget.
	GetTranscript(ctx context.Context, workflowID, runID string) (*api.GetTranscriptResponse, error)
	// WatchStream follows a run's live stream (the tokens its model calls
	// stream) from after afterSeq; read it with Stream.Next.
	WatchStream(ctx context.Context, workflowID, runID string, afterSeq int64) *Stream
	// CreateSchedule creates a schedule (docs/schedules.md): an error
	// wrapping api.ErrAlreadyStarted when the id is taken,
	// api.ErrInvalidArgument for a bad spec.
	CreateSchedule(ctx context.Context, opts ScheduleOptions) error
	// UpdateSchedule replaces a schedule's spec, action and policies
	// (opts.Paused and Note are ignored: PatchSchedule changes them).
	UpdateSchedule(ctx context.Context, opts ScheduleOptions) error
	// DescribeSchedule returns a schedule, its recent and next actions.
	DescribeSchedule(ctx context.Context, id string) (*api.ScheduleInfo, error)
	// ListSchedules lists schedules by id.
	ListSchedules(ctx context.Context, req *api.ListSchedulesRequest) (*api.ListSchedulesResponse, error)
	// PatchSchedule pauses or unpauses a schedule (with a note), triggers
	// an action now, or backfills time ranges.
	PatchSchedule(ctx context.Context, req api.PatchScheduleRequest) error
	// DeleteSchedule deletes a schedule; the runs it started stay.
	DeleteSchedule(ctx context.Context, id string) error
	// Service returns the service contract underneath (workers use it).
	Service() api.Service
	// Converter returns the payload converter.
	Converter() sdk.Converter
	// Close releases the client's resources (not the engine's).
	Close() error
}

// Run is a handle on one run.
type Run interface {
	// WorkflowID returns the workflow id.
	WorkflowID() string
	// RunID returns the run id (the first run of a continue-as-new chain).
	RunID() string
	// Get waits for the run (following continue-as-new) to close and
	// decodes its result into valuePtr (nil to discard it). A run that did
	// not complete returns an error: *sdk.ApplicationError for a failure,
	// *sdk.CanceledError, *sdk.TimeoutError, or ErrTerminated.
	Get(ctx context.Context, valuePtr any) error
}

// ErrTerminated is returned by Run.Get for a terminated run.
var ErrTerminated = errors.New("client: workflow terminated")

// Options configure a Client.
type Options struct {
	// Converter encodes inputs and decodes results (default
	// sdk.DefaultConverter()).
	Converter sdk.Converter
	// Identity names this client in history (default "client").
	Identity string
	// TracerProvider makes the OpenTelemetry span of each run this client
	// starts (cairn.workflow.start), whose W3C trace context the run
	// carries to its workflow tasks, activities and children (default: the
	// global provider, a no-op unless the program installed one).
	TracerProvider trace.TracerProvider
}

// StartOptions describe a run to start.
type StartOptions struct {
	// ID is the workflow id: the caller's business id ("invoice-INV-9").
	ID        string
	TaskQueue string
	// ExecutionTimeout bounds the whole chain of runs; RunTimeout one run;
	// TaskTimeout one workflow task (default 10 s).
	ExecutionTimeout time.Duration
	RunTimeout       time.Duration
	TaskTimeout      time.Duration
	ReusePolicy      api.ReusePolicy
	ConflictPolicy   api.ConflictPolicy
	// RequestID makes a retried start idempotent.
	RequestID string
	// Retention is how long the run is kept once closed (zero: the
	// server's default; negative: until deleted by hand).
	Retention time.Duration
}

// ResolveRequest decides an activity whose outcome is unknown.
type ResolveRequest struct {
	WorkflowID string
	RunID      string
	// ActivityID or ScheduledEventID names the activity; both empty means
	// the activity the run is paused on.
	ActivityID       string
	ScheduledEventID int64
	Resolution       history.Resolution
	// Result is the activity's result when it happened (encoded with the
	// client's converter; an api.Payload is used as it is).
	Result any
	// Failure is used when Resolution is ResolvedFailed.
	Failure *history.Failure
	// By names who decided, Reason why; both go into history.
	By     string
	Reason string
}

// NewLocal returns a Client over an embedded engine or any api.Service.
func NewLocal(svc api.Service, opts Options) Client {
	if opts.Converter == nil {
		opts.Converter = sdk.DefaultConverter()
	}
	if opts.Identity == "" {
		opts.Identity = "client"
	}
	return &serviceClient{svc: svc, opts: opts, tracer: tracing.Tracer(opts.TracerProvider)}
}

type serviceClient struct {
	svc  api.Service
	opts Options
	// closer releases the transport's resources (Dial); nil for NewLocal,
	// whose service belongs to the caller.
	closer func() error
	tracer trace.Tracer
}

func (c *serviceClient) Service() api.Service     { return c.svc }
func (c *serviceClient) Converter() sdk.Converter { return c.opts.Converter }
func (c *serviceClient) Close() error {
	if c.closer != nil {
		return c.closer()
	}
	return nil
}

func (c *serviceClient) payload(v any) (history.Payload, error) {
	if p, ok := v.(history.Payload); ok {
		return p, nil
	}
	p, err := c.opts.Converter.ToPayload(v)
	if err != nil {
		return history.Payload{}, fmt.Errorf("%w: encode: %w", api.ErrInvalidArgument, err)
	}
	return p, nil
}

func (c *serviceClient) startRequest(opts StartOptions, workflow any, input any) (*api.StartWorkflowRequest, error) {
	name := sdk.TypeName(workflow)
	if name == "" {
		return nil, fmt.Errorf("%w: workflow must be a function or a type name, got %T", api.ErrInvalidArgument, workflow)
	}
	in, err := c.payload(input)
	if err != nil {
		return nil, err
	}
	return &api.StartWorkflowRequest{WorkflowID: opts.ID, WorkflowType: name, TaskQueue: opts.TaskQueue, Input: in,
		ExecutionTimeout: opts.ExecutionTimeout, RunTimeout: opts.RunTimeout, TaskTimeout: opts.TaskTimeout,
		ReusePolicy: opts.ReusePolicy, ConflictPolicy: opts.ConflictPolicy, RequestID: opts.RequestID, Identity: c.opts.Identity,
		Retention: opts.Retention}, nil
}

func (c *serviceClient) StartWorkflow(ctx context.Context, opts StartOptions, workflow any, input any) (Run, error) {
	req, err := c.startRequest(opts, workflow, input)
	if err != nil {
		return nil, err
	}
	ctx, span := c.traceStart(ctx, req)
	resp, err := c.svc.StartWorkflow(ctx, req)
	if err != nil {
		endStart(span, "", err)
		return nil, err
	}
	endStart(span, resp.RunID, nil)
	return &run{c: c, workflowID: opts.ID, runID: resp.RunID}, nil
}

// traceStart starts the span of a run's start and puts its W3C trace
// context in req, so that the run's tasks are traced under it.
func (c *serviceClient) traceStart(ctx context.Context, req *api.StartWorkflowRequest) (context.Context, trace.Span) {
	ctx, span := c.tracer.Start(ctx, tracing.SpanWorkflowStart, trace.WithSpanKind(trace.SpanKindProducer))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(tracing.WorkflowID.String(req.WorkflowID), tracing.WorkflowType.String(req.WorkflowType))
	req.TraceParent, req.TraceState = tracing.Inject(ctx)
	return ctx, span
}

// endStart ends a start's span with the run it named or the error.
func endStart(span trace.Span, runID string, err error) {
	if span.IsRecording() {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetAttributes(tracing.RunID.String(runID))
		}
	}
	span.End()
}

func (c *serviceClient) ExecuteWorkflow(ctx context.Context, opts StartOptions, workflow any, input any, valuePtr any) (Run, error) {
	r, err := c.StartWorkflow(ctx, opts, workflow, input)
	if err != nil {
		return nil, err
	}
	return r, r.Get(ctx, valuePtr)
}

func (c *serviceClient) SignalWorkflow(ctx context.Context, workflowID, runID, signalName string, arg any) error {
	in, err := c.payload(arg)
	if err != nil {
		return err
	}
	_, err = c.svc.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: workflowID, RunID: runID, SignalName: signalName,
		Input: in, Identity: c.opts.Identity})
	return err
}

func (c *serviceClient) SignalWithStartWorkflow(ctx context.Context, opts StartOptions, signalName string, signalArg any, workflow any, input any) (Run, error) {
	req, err := c.startRequest(opts, workflow, input)
	if err != nil {
		return nil, err
	}
	sig, err := c.payload(signalArg)
	if err != nil {
		return nil, err
	}
	ctx, span := c.traceStart(ctx, req)
	resp, err := c.svc.SignalWithStartWorkflow(ctx, &api.SignalWithStartRequest{Start: *req, SignalName: signalName, SignalInput: sig})
	if err != nil {
		endStart(span, "", err)
		return nil, err
	}
	endStart(span, resp.RunID, nil)
	return &run{c: c, workflowID: opts.ID, runID: resp.RunID}, nil
}

func (c *serviceClient) QueryWorkflow(ctx context.Context, workflowID, runID, queryType string, args any, valuePtr any) error {
	in, err := c.payload(args)
	if err != nil {
		return err
	}
	resp, err := c.svc.QueryWorkflow(ctx, &api.QueryWorkflowRequest{WorkflowID: workflowID, RunID: runID, QueryType: queryType, Args: in})
	if err != nil {
		return err
	}
	return c.decode(resp.Result, valuePtr)
}

func (c *serviceClient) decode(p history.Payload, valuePtr any) error {
	if valuePtr == nil {
		return nil
	}
	if pp, ok := valuePtr.(*history.Payload); ok {
		*pp = p
		return nil
	}
	if err := c.opts.Converter.FromPayload(p, valuePtr); err != nil {
		return fmt.Errorf("client: decode result into %T: %w", valuePtr, err)
	}
	return nil
}

func (c *serviceClient) CancelWorkflow(ctx context.Context, workflowID, runID, reason string) error {
	_, err := c.svc.RequestCancelWorkflow(ctx, &api.CancelWorkflowRequest{WorkflowID: workflowID, RunID: runID, Reason: reason,
		Identity: c.opts.Identity})
	return err
}

func (c *serviceClient) TerminateWorkflow(ctx context.Context, workflowID, runID, reason string) error {
	_, err := c.svc.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: workflowID, RunID: runID, Reason: reason,
		Identity: c.opts.Identity})
	return err
}

func (c *serviceClient) DeleteWorkflow(ctx context.Context, workflowID, runID string, force bool) (string, error) {
	resp, err := c.svc.DeleteWorkflow(ctx, &api.DeleteWorkflowRequest{WorkflowID: workflowID, RunID: runID, Force: force,
		Identity: c.opts.Identity})
	if err != nil {
		return "", err
	}
	return resp.RunID, nil
}

func (c *serviceClient) DescribeWorkflow(ctx context.Context, workflowID, runID string) (*api.DescribeWorkflowResponse, error) {
	return c.svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: workflowID, RunID: runID})
}

func (c *serviceClient) GetWorkflow(ctx context.Context, workflowID, runID string) Run {
	return &run{c: c, workflowID: workflowID, runID: runID}
}

func (c *serviceClient) GetHistory(ctx context.Context, workflowID, runID string) ([]history.Event, error) {
	var all []history.Event
	from := int64(1)
	for {
		resp, err := c.svc.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: workflowID, RunID: runID, FromEventID: from})
		if err != nil {
			return nil, err
		}
		all = append(all, resp.Events...)
		runID = resp.RunID
		if len(resp.Events) == 0 || resp.NextEventID <= from+int64(len(resp.Events)) {
			return all, nil
		}
		from += int64(len(resp.Events))
	}
}

func (c *serviceClient) ListWorkflows(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	return c.svc.ListWorkflows(ctx, req)
}

func (c *serviceClient) CountWorkflows(ctx context.Context, req *api.CountWorkflowsRequest) (*api.CountWorkflowsResponse, error) {
	return c.svc.CountWorkflows(ctx, req)
}

func (c *serviceClient) DescribeTaskQueue(ctx context.Context, taskQueue string) (*api.TaskQueueInfo, error) {
	resp, err := c.svc.DescribeTaskQueue(ctx, &api.DescribeTaskQueueRequest{TaskQueue: taskQueue})
	if err != nil {
		return nil, err
	}
	return &resp.Queue, nil
}

func (c *serviceClient) SetActivityLimit(ctx context.Context, limit api.ActivityLimit) ([]api.ActivityLimit, error) {
	resp, err := c.svc.SetActivityLimit(ctx, &api.SetActivityLimitRequest{Limit: limit})
	if err != nil {
		return nil, err
	}
	return resp.Limits, nil
}

func (c *serviceClient) ClearActivityLimit(ctx context.Context, taskQueue, activityType, limitKey string) ([]api.ActivityLimit, error) {
	resp, err := c.svc.SetActivityLimit(ctx, &api.SetActivityLimitRequest{Clear: true,
		Limit: api.ActivityLimit{TaskQueue: taskQueue, ActivityType: activityType, LimitKey: limitKey}})
	if err != nil {
		return nil, err
	}
	return resp.Limits, nil
}

func (c *serviceClient) ListTaskQueues(ctx context.Context) ([]api.TaskQueueInfo, error) {
	resp, err := c.svc.ListTaskQueues(ctx, &api.ListTaskQueuesRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Queues, nil
}

func (c *serviceClient) ListEffects(ctx context.Context, req *api.ListEffectsRequest) (*api.ListEffectsResponse, error) {
	return c.svc.ListEffects(ctx, req)
}

func (c *serviceClient) ResetWorkflow(ctx context.Context, req api.ResetWorkflowRequest) (*api.ResetWorkflowResponse, error) {
	if req.Identity == "" {
		req.Identity = c.opts.Identity
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	return c.svc.ResetWorkflow(ctx, &req)
}

func (c *serviceClient) ForkWorkflow(ctx context.Context, req api.ForkWorkflowRequest) (*api.ForkWorkflowResponse, error) {
	if req.Identity == "" {
		req.Identity = c.opts.Identity
	}
	if req.RequestID == "" {
		req.RequestID = newRequestID()
	}
	return c.svc.ForkWorkflow(ctx, &req)
}

func (c *serviceClient) ResolveActivity(ctx context.Context, req ResolveRequest) error {
	var result history.Payload
	if req.Resolution == history.ResolvedHappened && req.Result != nil {
		p, err := c.payload(req.Result)
		if err != nil {
			return err
		}
		result = p
	}
	by := req.By
	if by == "" {
		by = c.opts.Identity
	}
	_, err := c.svc.ResolveActivity(ctx, &api.ResolveActivityRequest{WorkflowID: req.WorkflowID, RunID: req.RunID,
		ScheduledEventID: req.ScheduledEventID, ActivityID: req.ActivityID, Resolution: req.Resolution, Result: result,
		Failure: req.Failure, Identity: by, Reason: req.Reason})
	return err
}

type run struct {
	c          *serviceClient
	workflowID string
	runID      string
}

func (r *run) WorkflowID() string { return r.workflowID }
func (r *run) RunID() string      { return r.runID }

func (r *run) Get(ctx context.Context, valuePtr any) error {
	runID := r.runID
	for {
		resp, err := r.c.svc.GetResult(ctx, &api.GetResultRequest{WorkflowID: r.workflowID, RunID: runID, Wait: true})
		if err != nil {
			return err
		}
		if !resp.Closed {
			if err := ctx.Err(); err != nil {
				return err
			}
			runID = resp.RunID
			continue
		}
		switch resp.Status {
		case api.StatusCompleted:
			return r.c.decode(resp.Result, valuePtr)
		case api.StatusContinuedAsNew:
			runID = resp.ContinuedAsNewRunID
		case api.StatusTerminated:
			return fmt.Errorf("%w: %s", ErrTerminated, failureMessage(resp.Failure))
		default:
			if resp.Failure != nil {
				return sdk.FailureToError(*resp.Failure)
			}
			return fmt.Errorf("client: workflow %q closed as %s", r.workflowID, resp.Status)
		}
	}
}

func failureMessage(f *history.Failure) string {
	if f == nil {
		return ""
	}
	return f.Message
}

// newRequestID returns a random request id (a retried call that carries
// it is recognised by the engine).
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
