package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cairnflow/cairn/engine/api"
)

// DialOptions configure the HTTP transport of Dial.
type DialOptions struct {
	// Token is sent as "Authorization: Bearer <token>" when set.
	Token string
	// TLS configures https:// addresses (default: the system roots).
	TLS *tls.Config
	// HTTPClient replaces the transport's client (tests); it implies
	// PlainHTTP.
	HTTPClient *http.Client
	// PlainHTTP makes every call its own HTTP/1.1 request instead of a
	// frame on the multiplexed session (see Dial).
	PlainHTTP bool
	// Header is sent with every request and with the session's upgrade (a
	// server forwarding a call to another marks it so).
	Header http.Header
}

// Dial returns a Client for the server at address ("127.0.0.1:7233",
// "http://host:7233" or "https://host:7233"). No connection is made until
// the first call; calls that cannot reach the server fail with an error
// wrapping api.ErrUnavailable, which workers retry with backoff.
//
// Calls travel as frames on one long-lived connection (a session, upgraded
// from HTTP/1.1 with the same token and TLS), many in flight at once: about
// a sixth of the CPU of one HTTP request per call, which is what lets one
// worker process keep up with the server. A server that does not serve
// sessions gets plain HTTP requests (as does DialOptions.PlainHTTP). When
// the session's connection breaks, the calls in flight fail with
// api.ErrUnavailable and the next call opens a new session.
func Dial(address string, opts Options, dial DialOptions) (Client, error) {
	svc, err := NewRemoteService(address, dial)
	if err != nil {
		return nil, err
	}
	c := NewLocal(svc, opts).(*serviceClient)
	c.closer = svc.Close
	return c, nil
}

// RemoteService implements api.Service over HTTP with msgpack bodies.
//
// Its address may name several servers of a cluster, separated by commas
// ("10.0.0.5:7233,10.0.0.6:7233"): calls go to one of them, and move to the
// next when it cannot be reached (a call that could not be sent is sent to
// the next at once; one whose answer was lost is the caller's to retry).
// Any server of a cluster serves any call (docs/scale-out.md).
type RemoteService struct {
	eps    []*endpoint
	cur    atomic.Int32 // the endpoint calls go to first
	route  router       // which endpoint serves which shard (route.go)
	token  string
	hc     *http.Client
	header http.Header
}

// endpoint is one server's address and its session.
type endpoint struct {
	base  string
	sess  *sessionDialer // nil: plain HTTP requests
	plain atomic.Bool    // the server does not serve sessions
}

// NewRemoteService returns the HTTP transport Dial uses.
func NewRemoteService(address string, opts DialOptions) (*RemoteService, error) {
	hc := opts.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 1024 // long polls hold connections: keep them all for reuse
		tr.MaxIdleConns = 1024
		tr.ResponseHeaderTimeout = 0 // long polls hold the response for up to a minute
		if opts.TLS != nil {
			tr.TLSClientConfig = opts.TLS
		}
		hc = &http.Client{Transport: tr}
	}
	r := &RemoteService{token: opts.Token, hc: hc, header: opts.Header}
	for _, a := range strings.Split(address, ",") {
		ep, err := newEndpoint(strings.TrimSpace(a), opts)
		if err != nil {
			return nil, err
		}
		r.eps = append(r.eps, ep)
	}
	return r, nil
}

func newEndpoint(address string, opts DialOptions) (*endpoint, error) {
	base := strings.TrimRight(address, "/")
	if base == "" {
		return nil, fmt.Errorf("%w: empty server address", api.ErrInvalidArgument)
	}
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	ep := &endpoint{base: base}
	if !opts.PlainHTTP && opts.HTTPClient == nil {
		d, err := newSessionDialer(base, opts.Token, opts.TLS, opts.Header)
		if err != nil {
			return nil, err
		}
		ep.sess = d
	}
	return ep, nil
}

// Close closes the sessions and the idle HTTP connections. Calls still in
// flight on a session fail with api.ErrUnavailable; the service remains
// usable (new calls open new connections).
func (r *RemoteService) Close() error {
	for _, ep := range r.eps {
		if ep.sess != nil {
			ep.sess.close()
		}
	}
	r.hc.CloseIdleConnections()
	return nil
}

// roundTripFrom sends one encoded request and returns the encoded
// response, to the endpoint at index first (-1: the one calls go to), and
// on to the next while one cannot be reached.
func (r *RemoteService) roundTripFrom(ctx context.Context, first int, method string, body []byte) ([]byte, error) {
	start := int(r.cur.Load())
	routed := first >= 0 && first < len(r.eps)
	if routed {
		start = first
	}
	var err error
	for i := range r.eps {
		k := (start + i) % len(r.eps)
		var data []byte
		data, err = r.eps[k].roundTrip(ctx, r, method, body)
		if !errors.Is(err, api.ErrNotSent) {
			if k != start && !routed {
				r.cur.Store(int32(k))
			}
			return data, err
		}
	}
	return nil, err
}

// roundTrip sends one encoded request to this server.
func (ep *endpoint) roundTrip(ctx context.Context, r *RemoteService, method string, body []byte) ([]byte, error) {
	if ep.sess != nil && !ep.plain.Load() {
		s, err := ep.sess.get(ctx)
		if err == nil {
			return s.call(ctx, method, body)
		}
		if !errors.Is(err, errNoSession) {
			return nil, err
		}
		ep.plain.Store(true)
	}
	return r.httpCall(ctx, ep.base, method, body)
}

// call posts req to method and decodes the response into a new Resp.
func call[Req, Resp any](ctx context.Context, r *RemoteService, method string, req *Req) (*Resp, error) {
	return callAbout[Req, Resp](ctx, r, method, "", req)
}

// callAbout is call for a call about workflowID's run: it goes first to
// the server that serves the run, as far as the client knows (route.go).
func callAbout[Req, Resp any](ctx context.Context, r *RemoteService, method, workflowID string, req *Req) (*Resp, error) {
	body, err := api.MarshalMsgpack(req)
	if err != nil {
		return nil, fmt.Errorf("%w: encode %s request: %w", api.ErrInvalidArgument, method, err)
	}
	data, err := r.roundTripFrom(ctx, r.endpointFor(workflowID), method, body)
	if err != nil {
		return nil, err
	}
	resp := new(Resp)
	if err := api.CheckMsgpack(data, api.MaxMsgpackDepth); err != nil {
		return nil, fmt.Errorf("%w: %s: malformed response: %w", api.ErrInternal, method, err)
	}
	if err := api.UnmarshalMsgpack(data, resp); err != nil { // a server of another version may send more or fewer fields
		return nil, fmt.Errorf("%w: %s: decode response: %w", api.ErrInternal, method, err)
	}
	return resp, nil
}

// httpCall posts one request.
func (r *RemoteService) httpCall(ctx context.Context, base, method string, body []byte) ([]byte, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, base+api.HTTPPrefix+method, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	}
	for k, v := range r.header {
		hreq.Header[k] = v
	}
	hreq.Header.Set("Content-Type", api.ContentMsgpack)
	hreq.Header.Set("Accept", api.ContentMsgpack)
	if r.token != "" {
		hreq.Header.Set("Authorization", "Bearer "+r.token)
	}
	hresp, err := r.hc.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, fmt.Errorf("%w: %s: %w", api.ErrNotSent, method, err)
		}
		return nil, fmt.Errorf("%w: %s: %w", api.ErrUnavailable, method, err)
	}
	defer hresp.Body.Close()
	data, err := io.ReadAll(hresp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: %s: reading response: %w", api.ErrUnavailable, method, err)
	}
	if err := notTheAPI(base, hresp.StatusCode, hresp.Header); err != nil {
		return nil, err
	}
	if hresp.StatusCode != http.StatusOK {
		return nil, remoteError(method, hresp.StatusCode, data)
	}
	return data, nil
}

// ErrNotTheAPI is wrapped when the address answers, but not as Cairn's
// API: Cairn's web UI given as the server's address — its answer says
// where the API is (with api.ErrInvalidArgument) — or another web page
// (with api.ErrInternal; a 5xx page, a proxy's while the server restarts,
// is api.ErrUnavailable as ever).
var ErrNotTheAPI = errors.New("client: not Cairn's API")

// UIAPIAddressHeader is the header with which Cairn's web UI answers a
// request meant for the API: it names the API's address.
const UIAPIAddressHeader = "Cairn-Api-Address"

// notTheAPI recognises an answer that is not the API's: Cairn's web UI
// (UIAPIAddressHeader names the API) or a web page.
func notTheAPI(addr string, status int, h http.Header) error {
	if a := h.Get(UIAPIAddressHeader); a != "" {
		return fmt.Errorf("%w: %w: %s is Cairn's web UI; the API is on %s (use --address %s, or CAIRN_ADDRESS=%s)",
			api.ErrInvalidArgument, ErrNotTheAPI, addr, a, a, a)
	}
	if ct := h.Get("Content-Type"); strings.HasPrefix(ct, "text/html") && status < 500 {
		return fmt.Errorf("%w: %w: %s answered HTTP %d with a web page, not Cairn's API: is it a web UI's address? (a Cairn server serves its API on port 7233 and its web UI on 8233 by default)",
			api.ErrInternal, ErrNotTheAPI, addr, status)
	}
	return nil
}

// maxErrorBody bounds the bytes of an unexpected answer an error quotes.
const maxErrorBody = 300

func remoteError(method string, status int, data []byte) error {
	var eb api.ErrorBody
	if json.Unmarshal(data, &eb) == nil && eb.Code != "" {
		return errorFromBody(eb)
	}
	body := bytes.TrimSpace(data)
	if len(body) > maxErrorBody {
		body = append(body[:maxErrorBody:maxErrorBody], fmt.Sprintf("… (%d bytes)", len(data))...)
	}
	if status >= 500 {
		return fmt.Errorf("%w: %s: HTTP %d: %s", api.ErrUnavailable, method, status, body)
	}
	return fmt.Errorf("%w: %s: HTTP %d: %s", api.ErrInternal, method, status, body)
}

// errorFromBody turns a server's error body into the typed error.
func errorFromBody(eb api.ErrorBody) error {
	switch eb.Code {
	case api.CodeDeadlineExceeded:
		return fmt.Errorf("%s: %w", eb.Message, context.DeadlineExceeded)
	case api.CodeCanceled:
		return fmt.Errorf("%s: %w", eb.Message, context.Canceled)
	}
	return api.ErrorFromCode(eb.Code, eb.Message)
}

var _ api.Service = (*RemoteService)(nil)

// StartWorkflow implements api.Service.
func (r *RemoteService) StartWorkflow(ctx context.Context, req *api.StartWorkflowRequest) (*api.StartWorkflowResponse, error) {
	return callAbout[api.StartWorkflowRequest, api.StartWorkflowResponse](ctx, r, "StartWorkflow", req.WorkflowID, req)
}

// SignalWorkflow implements api.Service.
func (r *RemoteService) SignalWorkflow(ctx context.Context, req *api.SignalWorkflowRequest) (*api.SignalWorkflowResponse, error) {
	return callAbout[api.SignalWorkflowRequest, api.SignalWorkflowResponse](ctx, r, "SignalWorkflow", req.WorkflowID, req)
}

// SignalWithStartWorkflow implements api.Service.
func (r *RemoteService) SignalWithStartWorkflow(ctx context.Context, req *api.SignalWithStartRequest) (*api.StartWorkflowResponse, error) {
	return callAbout[api.SignalWithStartRequest, api.StartWorkflowResponse](ctx, r, "SignalWithStartWorkflow", req.Start.WorkflowID, req)
}

// RequestCancelWorkflow implements api.Service.
func (r *RemoteService) RequestCancelWorkflow(ctx context.Context, req *api.CancelWorkflowRequest) (*api.CancelWorkflowResponse, error) {
	return callAbout[api.CancelWorkflowRequest, api.CancelWorkflowResponse](ctx, r, "RequestCancelWorkflow", req.WorkflowID, req)
}

// ResetWorkflow implements api.Service.
func (r *RemoteService) ResetWorkflow(ctx context.Context, req *api.ResetWorkflowRequest) (*api.ResetWorkflowResponse, error) {
	return callAbout[api.ResetWorkflowRequest, api.ResetWorkflowResponse](ctx, r, "ResetWorkflow", req.WorkflowID, req)
}

// ForkWorkflow implements api.Service.
func (r *RemoteService) ForkWorkflow(ctx context.Context, req *api.ForkWorkflowRequest) (*api.ForkWorkflowResponse, error) {
	return callAbout[api.ForkWorkflowRequest, api.ForkWorkflowResponse](ctx, r, "ForkWorkflow", req.NewWorkflowID, req)
}

// TerminateWorkflow implements api.Service.
func (r *RemoteService) TerminateWorkflow(ctx context.Context, req *api.TerminateWorkflowRequest) (*api.TerminateWorkflowResponse, error) {
	return callAbout[api.TerminateWorkflowRequest, api.TerminateWorkflowResponse](ctx, r, "TerminateWorkflow", req.WorkflowID, req)
}

// DeleteWorkflow implements api.Service.
func (r *RemoteService) DeleteWorkflow(ctx context.Context, req *api.DeleteWorkflowRequest) (*api.DeleteWorkflowResponse, error) {
	return callAbout[api.DeleteWorkflowRequest, api.DeleteWorkflowResponse](ctx, r, "DeleteWorkflow", req.WorkflowID, req)
}

// DescribeWorkflow implements api.Service.
func (r *RemoteService) DescribeWorkflow(ctx context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	return callAbout[api.DescribeWorkflowRequest, api.DescribeWorkflowResponse](ctx, r, "DescribeWorkflow", req.WorkflowID, req)
}

// GetHistory implements api.Service.
func (r *RemoteService) GetHistory(ctx context.Context, req *api.GetHistoryRequest) (*api.GetHistoryResponse, error) {
	return callAbout[api.GetHistoryRequest, api.GetHistoryResponse](ctx, r, "GetHistory", req.WorkflowID, req)
}

// GetResult implements api.Service.
func (r *RemoteService) GetResult(ctx context.Context, req *api.GetResultRequest) (*api.GetResultResponse, error) {
	return callAbout[api.GetResultRequest, api.GetResultResponse](ctx, r, "GetResult", req.WorkflowID, req)
}

// ListWorkflows implements api.Service.
func (r *RemoteService) ListWorkflows(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	return call[api.ListWorkflowsRequest, api.ListWorkflowsResponse](ctx, r, "ListWorkflows", req)
}

// QueryWorkflow implements api.Service.
func (r *RemoteService) QueryWorkflow(ctx context.Context, req *api.QueryWorkflowRequest) (*api.QueryWorkflowResponse, error) {
	return callAbout[api.QueryWorkflowRequest, api.QueryWorkflowResponse](ctx, r, "QueryWorkflow", req.WorkflowID, req)
}

// ResolveActivity implements api.Service.
func (r *RemoteService) ResolveActivity(ctx context.Context, req *api.ResolveActivityRequest) (*api.ResolveActivityResponse, error) {
	return callAbout[api.ResolveActivityRequest, api.ResolveActivityResponse](ctx, r, "ResolveActivity", req.WorkflowID, req)
}

// CountWorkflows implements api.Service.
func (r *RemoteService) CountWorkflows(ctx context.Context, req *api.CountWorkflowsRequest) (*api.CountWorkflowsResponse, error) {
	return call[api.CountWorkflowsRequest, api.CountWorkflowsResponse](ctx, r, "CountWorkflows", req)
}

// SetActivityLimit implements api.Service.
func (r *RemoteService) SetActivityLimit(ctx context.Context, req *api.SetActivityLimitRequest) (*api.SetActivityLimitResponse, error) {
	return call[api.SetActivityLimitRequest, api.SetActivityLimitResponse](ctx, r, "SetActivityLimit", req)
}

// DescribeTaskQueue implements api.Service.
func (r *RemoteService) DescribeTaskQueue(ctx context.Context, req *api.DescribeTaskQueueRequest) (*api.DescribeTaskQueueResponse, error) {
	return call[api.DescribeTaskQueueRequest, api.DescribeTaskQueueResponse](ctx, r, "DescribeTaskQueue", req)
}

// ListTaskQueues implements api.Service.
func (r *RemoteService) ListTaskQueues(ctx context.Context, req *api.ListTaskQueuesRequest) (*api.ListTaskQueuesResponse, error) {
	return call[api.ListTaskQueuesRequest, api.ListTaskQueuesResponse](ctx, r, "ListTaskQueues", req)
}

// ListEffects implements api.Service.
func (r *RemoteService) ListEffects(ctx context.Context, req *api.ListEffectsRequest) (*api.ListEffectsResponse, error) {
	return call[api.ListEffectsRequest, api.ListEffectsResponse](ctx, r, "ListEffects", req)
}

// PollWorkflowTask implements api.Service.
func (r *RemoteService) PollWorkflowTask(ctx context.Context, req *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	return call[api.PollWorkflowTaskRequest, api.PollWorkflowTaskResponse](ctx, r, "PollWorkflowTask", req)
}

// CompleteWorkflowTask implements api.Service.
func (r *RemoteService) CompleteWorkflowTask(ctx context.Context, req *api.CompleteWorkflowTaskRequest) (*api.CompleteWorkflowTaskResponse, error) {
	return call[api.CompleteWorkflowTaskRequest, api.CompleteWorkflowTaskResponse](ctx, r, "CompleteWorkflowTask", req)
}

// FailWorkflowTask implements api.Service.
func (r *RemoteService) FailWorkflowTask(ctx context.Context, req *api.FailWorkflowTaskRequest) (*api.FailWorkflowTaskResponse, error) {
	return call[api.FailWorkflowTaskRequest, api.FailWorkflowTaskResponse](ctx, r, "FailWorkflowTask", req)
}

// UpdateWorkflow implements api.Service.
func (r *RemoteService) UpdateWorkflow(ctx context.Context, req *api.UpdateWorkflowRequest) (*api.UpdateWorkflowResponse, error) {
	id := req.WorkflowID
	if id == "" && req.Start != nil {
		id = req.Start.WorkflowID
	}
	return callAbout[api.UpdateWorkflowRequest, api.UpdateWorkflowResponse](ctx, r, "UpdateWorkflow", id, req)
}

// RespondQueryTask implements api.Service.
func (r *RemoteService) RespondQueryTask(ctx context.Context, req *api.RespondQueryTaskRequest) (*api.RespondQueryTaskResponse, error) {
	return call[api.RespondQueryTaskRequest, api.RespondQueryTaskResponse](ctx, r, "RespondQueryTask", req)
}

// PollActivityTask implements api.Service.
func (r *RemoteService) PollActivityTask(ctx context.Context, req *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	return call[api.PollActivityTaskRequest, api.PollActivityTaskResponse](ctx, r, "PollActivityTask", req)
}

// RecordActivityHeartbeat implements api.Service.
func (r *RemoteService) RecordActivityHeartbeat(ctx context.Context, req *api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	return callAbout[api.HeartbeatRequest, api.HeartbeatResponse](ctx, r, "RecordActivityHeartbeat", req.WorkflowID, req) // by ids: to the run's server
}

// CompleteActivity implements api.Service.
func (r *RemoteService) CompleteActivity(ctx context.Context, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	return callAbout[api.CompleteActivityRequest, api.CompleteActivityResponse](ctx, r, "CompleteActivity", req.WorkflowID, req) // by ids: to the run's server
}

// FailActivity implements api.Service.
func (r *RemoteService) FailActivity(ctx context.Context, req *api.FailActivityRequest) (*api.FailActivityResponse, error) {
	return callAbout[api.FailActivityRequest, api.FailActivityResponse](ctx, r, "FailActivity", req.WorkflowID, req) // by ids: to the run's server
}

// GetChunks implements api.Service.
func (r *RemoteService) GetChunks(ctx context.Context, req *api.GetChunksRequest) (*api.GetChunksResponse, error) {
	return call[api.GetChunksRequest, api.GetChunksResponse](ctx, r, "GetChunks", req)
}

// UpdateBudget implements api.Service.
func (r *RemoteService) UpdateBudget(ctx context.Context, req *api.UpdateBudgetRequest) (*api.UpdateBudgetResponse, error) {
	return callAbout[api.UpdateBudgetRequest, api.UpdateBudgetResponse](ctx, r, "UpdateBudget", req.WorkflowID, req)
}

// PublishStream implements api.Service.
func (r *RemoteService) PublishStream(ctx context.Context, req *api.PublishStreamRequest) (*api.PublishStreamResponse, error) {
	return call[api.PublishStreamRequest, api.PublishStreamResponse](ctx, r, "PublishStream", req)
}

// WatchStream implements api.Service.
func (r *RemoteService) WatchStream(ctx context.Context, req *api.WatchStreamRequest) (*api.WatchStreamResponse, error) {
	return callAbout[api.WatchStreamRequest, api.WatchStreamResponse](ctx, r, "WatchStream", req.WorkflowID, req)
}

// GetTranscript implements api.Service.
func (r *RemoteService) GetTranscript(ctx context.Context, req *api.GetTranscriptRequest) (*api.GetTranscriptResponse, error) {
	return callAbout[api.GetTranscriptRequest, api.GetTranscriptResponse](ctx, r, "GetTranscript", req.WorkflowID, req)
}

// DescribeCluster implements api.Service.
func (r *RemoteService) DescribeCluster(ctx context.Context, req *api.DescribeClusterRequest) (*api.DescribeClusterResponse, error) {
	return call[api.DescribeClusterRequest, api.DescribeClusterResponse](ctx, r, "DescribeCluster", req)
}

// NotifyChildClosed implements api.Service.
func (r *RemoteService) NotifyChildClosed(ctx context.Context, req *api.NotifyChildClosedRequest) (*api.NotifyChildClosedResponse, error) {
	return call[api.NotifyChildClosedRequest, api.NotifyChildClosedResponse](ctx, r, "NotifyChildClosed", req)
}

// CreateSchedule implements api.Service.
func (r *RemoteService) CreateSchedule(ctx context.Context, req *api.CreateScheduleRequest) (*api.CreateScheduleResponse, error) {
	return callAbout[api.CreateScheduleRequest, api.CreateScheduleResponse](ctx, r, "CreateSchedule", req.ScheduleID, req)
}

// DescribeSchedule implements api.Service.
func (r *RemoteService) DescribeSchedule(ctx context.Context, req *api.DescribeScheduleRequest) (*api.DescribeScheduleResponse, error) {
	return callAbout[api.DescribeScheduleRequest, api.DescribeScheduleResponse](ctx, r, "DescribeSchedule", req.ScheduleID, req)
}

// ListSchedules implements api.Service.
func (r *RemoteService) ListSchedules(ctx context.Context, req *api.ListSchedulesRequest) (*api.ListSchedulesResponse, error) {
	return call[api.ListSchedulesRequest, api.ListSchedulesResponse](ctx, r, "ListSchedules", req)
}

// UpdateSchedule implements api.Service.
func (r *RemoteService) UpdateSchedule(ctx context.Context, req *api.UpdateScheduleRequest) (*api.UpdateScheduleResponse, error) {
	return callAbout[api.UpdateScheduleRequest, api.UpdateScheduleResponse](ctx, r, "UpdateSchedule", req.ScheduleID, req)
}

// PatchSchedule implements api.Service.
func (r *RemoteService) PatchSchedule(ctx context.Context, req *api.PatchScheduleRequest) (*api.PatchScheduleResponse, error) {
	return callAbout[api.PatchScheduleRequest, api.PatchScheduleResponse](ctx, r, "PatchSchedule", req.ScheduleID, req)
}

// DeleteSchedule implements api.Service.
func (r *RemoteService) DeleteSchedule(ctx context.Context, req *api.DeleteScheduleRequest) (*api.DeleteScheduleResponse, error) {
	return callAbout[api.DeleteScheduleRequest, api.DeleteScheduleResponse](ctx, r, "DeleteSchedule", req.ScheduleID, req)
}
