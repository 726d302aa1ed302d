package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
)

// ForwardedHeader marks the HTTP requests (and sessions) one server sends
// another on behalf of a client: the receiver serves them itself, never
// forwarding them again, and answers api.ErrNotOwner when it does not
// serve the run (the sender then reads the table again and retries).
const ForwardedHeader = "Cairn-Forwarded"

type forwardedKey struct{}

// RequestContext marks the calls of a request that carries
// ForwardedHeader: give it to the HTTP handler (httpapi.Options).
func RequestContext(ctx context.Context, r *http.Request) context.Context {
	if r.Header.Get(ForwardedHeader) != "" {
		return context.WithValue(ctx, forwardedKey{}, true)
	}
	return ctx
}

// Forwarded reports whether ctx is a call another server forwarded.
func Forwarded(ctx context.Context) bool {
	v, _ := ctx.Value(forwardedKey{}).(bool)
	return v
}

// Router serves api.Service for the whole cluster from one server: a call
// about a run goes to the server that serves the run's shard — this one's
// engine, or the owner through a forwarded call — so that a client may use
// any server. Reads of the shared store (lists, counts, the effects ledger,
// payload chunks) are answered here; polls wait on this server's queues
// and on every other server's at once (polls.go).
type Router struct {
	node  *Node
	local api.Service
	peers peerPool
	cover coverage // who polls which queue (polls.go)
	// after is the timer of a poll waiting for a Covered answer to expire
	// (tests replace it): a channel, and a function that stops it.
	after func(time.Duration) (<-chan time.Time, func() bool)
}

// NewRouter returns the router of a node, over this server's engine.
func NewRouter(node *Node, local api.Service) *Router {
	return &Router{node: node, local: local, peers: peerPool{dial: node.opts.Dial, svcs: map[string]api.Service{}},
		after: func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		}}
}

// peerPool keeps one client per other server, by address.
type peerPool struct {
	dial func(address string) (api.Service, error)
	mu   sync.Mutex
	svcs map[string]api.Service
}

func (p *peerPool) get(address string) (api.Service, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.svcs[address]; ok {
		return s, nil
	}
	if p.dial == nil {
		return nil, fmt.Errorf("%w: cluster: no way to reach server %s (Options.Dial)", api.ErrUnavailable, address)
	}
	s, err := p.dial(address)
	if err != nil {
		return nil, fmt.Errorf("%w: cluster: reach server %s: %w", api.ErrUnavailable, address, err)
	}
	p.svcs[address] = s
	return s, nil
}

// target returns the service to call about a shard: this server's engine
// when it serves it, else the owner's client.
func (r *Router) target(shard int) (api.Service, bool, error) {
	if _, ok := r.node.lease(shard, false); ok {
		return r.local, true, nil
	}
	r.node.mu.Lock()
	id, addr, ok := r.node.table.owner(shard)
	r.node.mu.Unlock()
	if !ok {
		return nil, false, fmt.Errorf("%w: shard %d has no owner now (a server is taking it over); retry", api.ErrUnavailable, shard)
	}
	if id == r.node.opts.ID {
		return r.local, true, nil // acquired, not yet recorded as held: the engine says
	}
	svc, err := r.peers.get(addr)
	return svc, false, err
}

// byWorkflow runs call on the service that serves workflowID's run.
func (r *Router) byWorkflow(ctx context.Context, workflowID string, call func(context.Context, api.Service) error) error {
	if Forwarded(ctx) {
		return call(ctx, r.local)
	}
	shard := r.node.Of(workflowID)
	// While a shard moves (its server died and its lease has not run out
	// yet, or it is being handed over) the call waits for the next owner,
	// for at most a lease and a few ticks.
	until := time.Now().Add(r.node.opts.LeaseTTL + 3*r.node.opts.Tick)
	var err error
	for attempt := 0; ; attempt++ {
		var svc api.Service
		var local bool
		// Sent again only when it surely was not carried out: no server
		// to send it to, one that could not be reached, or one that says
		// it does not serve the run. A call whose answer was lost is the
		// caller's to judge, as with one server.
		if svc, local, err = r.target(shard); err == nil {
			if !local {
				r.node.stats.forwarded.Add(1)
			}
			if err = call(ctx, svc); !errors.Is(err, api.ErrNotOwner) && !errors.Is(err, api.ErrNotSent) {
				return err
			}
		}
		r.node.poke() // read the table again
		if time.Now().After(until) || !backoff(ctx, attempt) {
			return err
		}
	}
}

// backoff waits before the next attempt (50 ms, doubling up to 500 ms),
// unless ctx ends.
func backoff(ctx context.Context, attempt int) bool {
	t := time.NewTimer(min(50*time.Millisecond<<min(attempt, 4), 500*time.Millisecond))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// byToken runs call on the service that serves the run a task token names.
func (r *Router) byToken(ctx context.Context, token []byte, call func(context.Context, api.Service) error) error {
	id, err := engine.TokenWorkflowID(token)
	if err != nil {
		return err
	}
	return r.byWorkflow(ctx, id, call)
}

// route is byWorkflow for one typed method.
func route[Req, Resp any](r *Router, ctx context.Context, workflowID string, req *Req,
	m func(api.Service, context.Context, *Req) (*Resp, error)) (*Resp, error) {
	var resp *Resp
	err := r.byWorkflow(ctx, workflowID, func(ctx context.Context, svc api.Service) error {
		var err error
		resp, err = m(svc, ctx, req)
		return err
	})
	return resp, err
}

// routeToken is byToken for one typed method.
func routeToken[Req, Resp any](r *Router, ctx context.Context, token []byte, req *Req,
	m func(api.Service, context.Context, *Req) (*Resp, error)) (*Resp, error) {
	var resp *Resp
	err := r.byToken(ctx, token, func(ctx context.Context, svc api.Service) error {
		var err error
		resp, err = m(svc, ctx, req)
		return err
	})
	return resp, err
}

var _ api.Service = (*Router)(nil)

// StartWorkflow implements api.Service.
func (r *Router) StartWorkflow(ctx context.Context, req *api.StartWorkflowRequest) (*api.StartWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.StartWorkflow)
}

// SignalWorkflow implements api.Service.
func (r *Router) SignalWorkflow(ctx context.Context, req *api.SignalWorkflowRequest) (*api.SignalWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.SignalWorkflow)
}

// SignalWithStartWorkflow implements api.Service.
func (r *Router) SignalWithStartWorkflow(ctx context.Context, req *api.SignalWithStartRequest) (*api.StartWorkflowResponse, error) {
	return route(r, ctx, req.Start.WorkflowID, req, api.Service.SignalWithStartWorkflow)
}

// RequestCancelWorkflow implements api.Service.
func (r *Router) RequestCancelWorkflow(ctx context.Context, req *api.CancelWorkflowRequest) (*api.CancelWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.RequestCancelWorkflow)
}

// ResetWorkflow implements api.Service.
func (r *Router) ResetWorkflow(ctx context.Context, req *api.ResetWorkflowRequest) (*api.ResetWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.ResetWorkflow)
}

// ForkWorkflow implements api.Service: the fork's new workflow id decides
// the server (it writes the new run; the base is only read).
func (r *Router) ForkWorkflow(ctx context.Context, req *api.ForkWorkflowRequest) (*api.ForkWorkflowResponse, error) {
	return route(r, ctx, req.NewWorkflowID, req, api.Service.ForkWorkflow)
}

// TerminateWorkflow implements api.Service.
func (r *Router) TerminateWorkflow(ctx context.Context, req *api.TerminateWorkflowRequest) (*api.TerminateWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.TerminateWorkflow)
}

// DeleteWorkflow implements api.Service.
func (r *Router) DeleteWorkflow(ctx context.Context, req *api.DeleteWorkflowRequest) (*api.DeleteWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.DeleteWorkflow)
}

// DescribeWorkflow implements api.Service.
func (r *Router) DescribeWorkflow(ctx context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.DescribeWorkflow)
}

// GetHistory implements api.Service.
func (r *Router) GetHistory(ctx context.Context, req *api.GetHistoryRequest) (*api.GetHistoryResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.GetHistory)
}

// GetResult implements api.Service.
func (r *Router) GetResult(ctx context.Context, req *api.GetResultRequest) (*api.GetResultResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.GetResult)
}

// QueryWorkflow implements api.Service.
func (r *Router) QueryWorkflow(ctx context.Context, req *api.QueryWorkflowRequest) (*api.QueryWorkflowResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.QueryWorkflow)
}

// UpdateWorkflow implements api.Service: the run's owner validates,
// accepts and waits (an update-with-start names its workflow in Start
// when WorkflowID is empty).
func (r *Router) UpdateWorkflow(ctx context.Context, req *api.UpdateWorkflowRequest) (*api.UpdateWorkflowResponse, error) {
	id := req.WorkflowID
	if id == "" && req.Start != nil {
		id = req.Start.WorkflowID
	}
	return route(r, ctx, id, req, api.Service.UpdateWorkflow)
}

// ResolveActivity implements api.Service.
func (r *Router) ResolveActivity(ctx context.Context, req *api.ResolveActivityRequest) (*api.ResolveActivityResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.ResolveActivity)
}

// UpdateBudget implements api.Service.
func (r *Router) UpdateBudget(ctx context.Context, req *api.UpdateBudgetRequest) (*api.UpdateBudgetResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.UpdateBudget)
}

// WatchStream implements api.Service.
func (r *Router) WatchStream(ctx context.Context, req *api.WatchStreamRequest) (*api.WatchStreamResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.WatchStream)
}

// GetTranscript implements api.Service.
func (r *Router) GetTranscript(ctx context.Context, req *api.GetTranscriptRequest) (*api.GetTranscriptResponse, error) {
	return route(r, ctx, req.WorkflowID, req, api.Service.GetTranscript)
}

// CompleteWorkflowTask implements api.Service.
func (r *Router) CompleteWorkflowTask(ctx context.Context, req *api.CompleteWorkflowTaskRequest) (*api.CompleteWorkflowTaskResponse, error) {
	return routeToken(r, ctx, req.TaskToken, req, api.Service.CompleteWorkflowTask)
}

// FailWorkflowTask implements api.Service.
func (r *Router) FailWorkflowTask(ctx context.Context, req *api.FailWorkflowTaskRequest) (*api.FailWorkflowTaskResponse, error) {
	return routeToken(r, ctx, req.TaskToken, req, api.Service.FailWorkflowTask)
}

// RespondQueryTask implements api.Service.
func (r *Router) RespondQueryTask(ctx context.Context, req *api.RespondQueryTaskRequest) (*api.RespondQueryTaskResponse, error) {
	return routeToken(r, ctx, req.TaskToken, req, api.Service.RespondQueryTask)
}

// RecordActivityHeartbeat implements api.Service.
func (r *Router) RecordActivityHeartbeat(ctx context.Context, req *api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	return routeToken(r, ctx, req.TaskToken, req, api.Service.RecordActivityHeartbeat)
}

// CompleteActivity implements api.Service.
func (r *Router) CompleteActivity(ctx context.Context, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	return routeToken(r, ctx, req.TaskToken, req, api.Service.CompleteActivity)
}

// FailActivity implements api.Service.
func (r *Router) FailActivity(ctx context.Context, req *api.FailActivityRequest) (*api.FailActivityResponse, error) {
	return routeToken(r, ctx, req.TaskToken, req, api.Service.FailActivity)
}

// PublishStream implements api.Service.
func (r *Router) PublishStream(ctx context.Context, req *api.PublishStreamRequest) (*api.PublishStreamResponse, error) {
	return routeToken(r, ctx, req.TaskToken, req, api.Service.PublishStream)
}

// ListWorkflows implements api.Service: the list indexes are in the shared
// store, so any server answers.
func (r *Router) ListWorkflows(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	return r.local.ListWorkflows(ctx, req)
}

// CountWorkflows implements api.Service (from the shared store).
func (r *Router) CountWorkflows(ctx context.Context, req *api.CountWorkflowsRequest) (*api.CountWorkflowsResponse, error) {
	return r.local.CountWorkflows(ctx, req)
}

// ListEffects implements api.Service (from the shared store).
func (r *Router) ListEffects(ctx context.Context, req *api.ListEffectsRequest) (*api.ListEffectsResponse, error) {
	return r.local.ListEffects(ctx, req)
}

// GetChunks implements api.Service (chunks are content-addressed, in the
// shared store).
func (r *Router) GetChunks(ctx context.Context, req *api.GetChunksRequest) (*api.GetChunksResponse, error) {
	return r.local.GetChunks(ctx, req)
}

// NotifyChildClosed implements api.Service.
func (r *Router) NotifyChildClosed(ctx context.Context, req *api.NotifyChildClosedRequest) (*api.NotifyChildClosedResponse, error) {
	return route(r, ctx, req.ParentWorkflowID, req, api.Service.NotifyChildClosed)
}

// CreateSchedule implements api.Service: on the server that serves the schedule's
// shard (a schedule id is routed like a workflow id).
func (r *Router) CreateSchedule(ctx context.Context, req *api.CreateScheduleRequest) (*api.CreateScheduleResponse, error) {
	return route(r, ctx, req.ScheduleID, req, api.Service.CreateSchedule)
}

// DescribeSchedule implements api.Service: on the server that serves the schedule's
// shard (a schedule id is routed like a workflow id).
func (r *Router) DescribeSchedule(ctx context.Context, req *api.DescribeScheduleRequest) (*api.DescribeScheduleResponse, error) {
	return route(r, ctx, req.ScheduleID, req, api.Service.DescribeSchedule)
}

// ListSchedules implements api.Service (from the shared store).
func (r *Router) ListSchedules(ctx context.Context, req *api.ListSchedulesRequest) (*api.ListSchedulesResponse, error) {
	return r.local.ListSchedules(ctx, req)
}

// UpdateSchedule implements api.Service: on the server that serves the schedule's
// shard (a schedule id is routed like a workflow id).
func (r *Router) UpdateSchedule(ctx context.Context, req *api.UpdateScheduleRequest) (*api.UpdateScheduleResponse, error) {
	return route(r, ctx, req.ScheduleID, req, api.Service.UpdateSchedule)
}

// PatchSchedule implements api.Service: on the server that serves the schedule's
// shard (a schedule id is routed like a workflow id).
func (r *Router) PatchSchedule(ctx context.Context, req *api.PatchScheduleRequest) (*api.PatchScheduleResponse, error) {
	return route(r, ctx, req.ScheduleID, req, api.Service.PatchSchedule)
}

// DeleteSchedule implements api.Service: on the server that serves the schedule's
// shard (a schedule id is routed like a workflow id).
func (r *Router) DeleteSchedule(ctx context.Context, req *api.DeleteScheduleRequest) (*api.DeleteScheduleResponse, error) {
	return route(r, ctx, req.ScheduleID, req, api.Service.DeleteSchedule)
}
