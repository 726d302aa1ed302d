package ui

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history"
)

// The JSON the pages read: GET /api/… answers by internal/view's
// convention; POST /api/… are the actions.
func (h *Handler) apiRoutes() {
	get := func(path string, fn func(r *http.Request) (any, error)) {
		h.mux.Handle("GET "+path, h.apiAuth(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			v, err := fn(r)
			h.reply(w, v, err)
		})))
	}
	post := func(path string, fn func(r *http.Request, body []byte) (any, error)) {
		h.mux.Handle("POST "+path, h.apiAuth(h.action(fn)))
	}
	get("/api/session", h.apiSession)
	get("/api/runs", h.apiRuns)
	get("/api/counts", h.apiCounts)
	get("/api/run", h.apiRun)
	get("/api/paused", h.apiPaused)
	get("/api/pause", h.apiPause)
	get("/api/queues", h.apiQueues)
	get("/api/effects", h.apiEffects)
	get("/api/transcript", h.apiTranscript)
	get("/api/compare", h.apiCompare)
	get("/api/cluster", h.apiCluster)
	get("/api/schedules", h.apiSchedules)
	get("/api/schedule", h.apiSchedule)
	h.mux.Handle("GET /api/stream/run", h.apiAuth(http.HandlerFunc(h.streamRun)))
	h.mux.Handle("GET /api/stream/agent", h.apiAuth(http.HandlerFunc(h.streamAgent)))
	post("/api/signal", h.apiSignal)
	post("/api/cancel", h.apiCancel)
	post("/api/terminate", h.apiTerminate)
	post("/api/delete", h.apiDelete)
	post("/api/reset", h.apiReset)
	post("/api/resolve", h.apiResolve)
	post("/api/budget", h.apiBudget)
	post("/api/approve", h.apiApprove)
	post("/api/schedule", h.apiScheduleAction)
}

// apiAuth refuses API calls that are not signed in (401, JSON).
func (h *Handler) apiAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "sign in first (/login)")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// requestTimeout bounds the calls of one page request.
const requestTimeout = 30 * time.Second

// action checks that a POST comes from the UI's own page (same origin, the
// CSRF header, a JSON body), then runs fn.
func (h *Handler) action(fn func(r *http.Request, body []byte) (any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			writeError(w, http.StatusForbidden, api.CodeUnauthenticated, "cross-site request refused")
			return
		}
		if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, api.CodeInvalidArgument, "actions take a JSON body")
			return
		}
		got := r.Header.Get("X-Cairn-CSRF")
		if got == "" || got != h.csrfToken(r) {
			writeError(w, http.StatusForbidden, api.CodeUnauthenticated, "missing or stale X-Cairn-CSRF token: reload the page")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 4<<20))
		if err != nil {
			writeError(w, http.StatusRequestEntityTooLarge, api.CodeLimitExceeded, "request body too large")
			return
		}
		v, err := fn(r, body)
		h.reply(w, v, err)
	})
}

func (h *Handler) reply(w http.ResponseWriter, v any, err error) {
	if err != nil {
		code := api.TransportCode(err)
		status := httpapi.StatusOf(code)
		if status >= 500 {
			h.log.Error().Err(err).Msg("ui request failed")
		}
		writeError(w, status, code, err.Error())
		return
	}
	b, err := view.Marshal(v)
	if err != nil {
		h.reply(w, nil, fmt.Errorf("%w: %w", api.ErrInternal, err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, code api.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Code: code, Message: msg})
}

func invalid(format string, args ...any) error {
	return api.Errorf(api.ErrInvalidArgument, format, args...)
}

func ctxOf(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), requestTimeout)
}

// sessionView is what the page learns about its session.
type sessionView struct {
	Auth bool   // the server requires a token (a sign-out makes sense)
	CSRF string // the X-Cairn-CSRF header of actions
}

func (h *Handler) apiSession(r *http.Request) (any, error) {
	return sessionView{Auth: h.opts.Token != "", CSRF: h.csrfToken(r)}, nil
}

// filter reads the list filters of a query string.
func filter(q map[string][]string) (*api.ListWorkflowsRequest, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	req := &api.ListWorkflowsRequest{WorkflowType: get("type"), WorkflowIDPrefix: get("prefix")}
	switch s := get("status"); s {
	case "":
	case quarantined: // the runs whose stored data is damaged, whatever status they had
		req.Corrupt = true
	case awaitingApproval: // the paused runs whose agent awaits a person's approval
		req.Status, req.PauseKind = api.StatusPaused, api.PauseApproval
	default:
		st, ok := api.ParseStatus(s)
		if !ok {
			return nil, invalid("unknown status %q", s)
		}
		req.Status = st
	}
	var err error
	if req.StartedAfter, err = parseTime(get("after")); err != nil {
		return nil, invalid("after: %v", err)
	}
	if req.StartedBefore, err = parseTime(get("before")); err != nil {
		return nil, invalid("before: %v", err)
	}
	if p := get("page"); p != "" {
		if req.NextPageToken, err = base64.RawURLEncoding.DecodeString(p); err != nil {
			return nil, invalid("page: %v", err)
		}
	}
	if s := get("size"); s != "" {
		if req.PageSize, err = strconv.Atoi(s); err != nil || req.PageSize < 1 || req.PageSize > 500 {
			return nil, invalid("size: want 1 to 500")
		}
	}
	return req, nil
}

// parseTime reads an RFC 3339 time or a datetime-local field's value
// ("2026-11-01T09:30", taken as UTC).
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time", s)
}

// runsView is a page of runs.
type runsView struct {
	Workflows []api.WorkflowInfo `view:"keep"`
	// Next is the page token of the next page ("" on the last).
	Next string
}

func (h *Handler) apiRuns(r *http.Request) (any, error) {
	req, err := filter(r.URL.Query())
	if err != nil {
		return nil, err
	}
	if req.PageSize == 0 {
		req.PageSize = 50
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	resp, err := h.svc.ListWorkflows(ctx, req)
	if err != nil {
		return nil, err
	}
	// The engine lists a quarantined run as quarantined (req.Corrupt), not
	// under the status it had when its damage was found, as it counts it.
	return runsView{Workflows: resp.Workflows, Next: base64.RawURLEncoding.EncodeToString(resp.NextPageToken)}, nil
}

// quarantined is the status filter and count of the runs whose stored
// data is damaged (WorkflowInfo.Corrupt).
const quarantined = "quarantined"

// countsView counts the runs by status, as the runs list shows them: a
// quarantined run under "quarantined", not under the status the engine
// recorded before the damage was found.
type countsView struct {
	Total    int64
	ByStatus []statusCount
}

type statusCount struct {
	Status string
	Count  int64
}

func (h *Handler) apiCounts(r *http.Request) (any, error) {
	req, err := filter(r.URL.Query())
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	c, err := h.svc.CountWorkflows(ctx, &api.CountWorkflowsRequest{WorkflowType: req.WorkflowType, WorkflowIDPrefix: req.WorkflowIDPrefix,
		StartedAfter: req.StartedAfter, StartedBefore: req.StartedBefore})
	if err != nil {
		return nil, err
	}
	v := countsView{Total: c.Total, ByStatus: []statusCount{}}
	for _, sc := range c.ByStatus {
		v.ByStatus = append(v.ByStatus, statusCount{sc.Status.String(), sc.Count})
	}
	if c.Quarantined > 0 {
		v.ByStatus = append(v.ByStatus, statusCount{quarantined, c.Quarantined})
	}
	pausedCounts(&v, c)
	return v, nil
}

// runView is a run's page: the engine's description with what the run
// started with and ended with, the workflow id's other runs, its task
// queue and its effects.
type runView struct {
	*api.DescribeWorkflowResponse
	Input            history.Payload
	Result           history.Payload
	Failure          *history.Failure
	ExecutionTimeout time.Duration
	RunTimeout       time.Duration
	TaskTimeout      time.Duration
	Attempt          int32
	FirstRunID       string
	// ContinuedFromRunID is the previous run of a continue-as-new chain.
	ContinuedFromRunID string
	// Runs are the workflow id's runs, newest first (up to 20).
	Runs []api.WorkflowInfo
	// Queue is the run's task queue while the run is open: a queue nobody
	// polls shows as no pollers.
	Queue *api.TaskQueueInfo
	// Effects are the ledger entries of the workflow id that this run
	// scheduled.
	Effects []api.EffectInfo
	// Conversation says the run is an agent's: it has a transcript (the
	// conversation page shows it).
	Conversation bool
}

func (h *Handler) apiRun(r *http.Request) (any, error) {
	id, run := r.URL.Query().Get("id"), r.URL.Query().Get("run")
	if id == "" {
		return nil, invalid("id is required")
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	return h.runView(ctx, id, run, true)
}

// runView builds a run's page; withRuns lists the workflow id's runs too
// (a scan of the list index: not on every refresh).
func (h *Handler) runView(ctx context.Context, id, run string, withRuns bool) (*runView, error) {
	d, err := h.svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: id, RunID: run})
	if err != nil {
		return nil, err
	}
	v := &runView{DescribeWorkflowResponse: d}
	run = d.Info.RunID
	if hist, err := h.svc.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, RunID: run, MaxEvents: 1}); err == nil && len(hist.Events) == 1 {
		if s, ok := hist.Events[0].Attrs.(*history.WorkflowStarted); ok {
			v.Input, v.ExecutionTimeout, v.RunTimeout, v.TaskTimeout = s.Input, s.ExecutionTimeout, s.RunTimeout, s.TaskTimeout
			v.Attempt, v.FirstRunID, v.ContinuedFromRunID = s.Attempt, s.FirstRunID, s.ContinuedFromRunID
		}
	}
	if !d.Info.Status.Open() {
		res, err := h.svc.GetResult(ctx, &api.GetResultRequest{WorkflowID: id, RunID: run})
		if err != nil {
			return nil, err
		}
		v.Result, v.Failure = res.Result, res.Failure
	} else if q, err := h.svc.DescribeTaskQueue(ctx, &api.DescribeTaskQueueRequest{TaskQueue: d.Info.TaskQueue}); err == nil {
		v.Queue = &q.Queue
	}
	if withRuns {
		v.Runs = h.runsOf(ctx, id)
		if tr, err := h.svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id, RunID: run}); err == nil {
			v.Conversation = len(tr.Items) > 0
		}
	}
	v.Effects = h.runEffects(ctx, id, run)
	return v, nil
}

// runsOf returns up to 20 runs of a workflow id, newest first.
func (h *Handler) runsOf(ctx context.Context, id string) []api.WorkflowInfo {
	var out []api.WorkflowInfo
	runs, err := h.svc.ListWorkflows(ctx, &api.ListWorkflowsRequest{WorkflowID: id, PageSize: 20})
	if err != nil {
		return nil
	}
	for _, w := range runs.Workflows {
		if w.WorkflowID == id { // a server older than WorkflowID takes it as no filter
			out = append(out, w)
		}
	}
	return out
}

// runEffects returns the ledger entries of id that run scheduled.
func (h *Handler) runEffects(ctx context.Context, id, run string) []api.EffectInfo {
	var out []api.EffectInfo
	req := &api.ListEffectsRequest{WorkflowID: id, PageSize: 200}
	for pages := 0; pages < 10; pages++ {
		resp, err := h.svc.ListEffects(ctx, req)
		if err != nil {
			return out
		}
		for _, e := range resp.Effects {
			if e.RunID == run || slices.Contains(e.RunIDs, run) {
				out = append(out, e)
			}
		}
		if resp.NextPageToken == nil {
			break
		}
		req.NextPageToken = resp.NextPageToken
	}
	return out
}

// pausedRun is one run waiting for a person.
type pausedRun struct {
	Info api.WorkflowInfo
	// Input is the paused action's arguments.
	Input history.Payload
	// Activity is the paused activity as the engine describes it (attempt,
	// last failure).
	Activity *api.PendingActivity
	// Effect is the action's ledger entry.
	Effect *api.EffectInfo
	// Reconcile is what a Reconcile lookup answered, when one ran.
	Reconcile string
	// Budget is the run's budget and what it used (a run paused on its
	// budget: the form shows the current limits).
	Budget *api.BudgetStatus
	// Approvals are the agent's tool calls awaiting approval (a run paused
	// on an approval: each gets Approve and Reject).
	Approvals []api.PendingApproval
}

// pausedView lists the runs waiting for a person, longest waiting first,
// as the list index has them (one scan of the paused runs: the page polls
// it); a card's details are /api/pause's, asked once per card.
type pausedView struct {
	Runs []pausedRun
	More bool // more runs wait than were listed
}

// maxPaused bounds the paused runs one page lists.
const maxPaused = 200

func (h *Handler) apiPaused(r *http.Request) (any, error) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	resp, err := h.svc.ListWorkflows(ctx, &api.ListWorkflowsRequest{Status: api.StatusPaused, PageSize: maxPaused})
	if err != nil {
		return nil, err
	}
	v := pausedView{Runs: []pausedRun{}, More: resp.NextPageToken != nil}
	for _, w := range resp.Workflows {
		if w.Pause != nil {
			v.Runs = append(v.Runs, pausedRun{Info: w})
		}
	}
	slices.SortStableFunc(v.Runs, func(a, b pausedRun) int { return a.Info.Pause.Since.Compare(b.Info.Pause.Since) })
	return v, nil
}

// apiPause is one paused run's card: the paused action's arguments, the
// activity as the engine describes it, its ledger entry, what Reconcile
// said. A run no longer paused has no Pause.
func (h *Handler) apiPause(r *http.Request) (any, error) {
	id, run := r.URL.Query().Get("id"), r.URL.Query().Get("run")
	if id == "" {
		return nil, invalid("id is required")
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	d, err := h.svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: id, RunID: run})
	if err != nil {
		return nil, err
	}
	p := pausedRun{Info: d.Info, Budget: d.Budget, Approvals: d.PendingApprovals}
	pi := d.Info.Pause
	if pi == nil {
		return p, nil
	}
	p.Input = pi.Input
	for i := range d.PendingActivities {
		if a := &d.PendingActivities[i]; a.ScheduledEventID == pi.ScheduledEventID {
			p.Activity = a
		}
	}
	if strings.Contains(pi.Reason, "Reconcile") {
		p.Reconcile = pi.Reason
	}
	if pi.IdempotencyKey != "" {
		if e, err := h.svc.ListEffects(ctx, &api.ListEffectsRequest{WorkflowID: id, KeyPrefix: pi.IdempotencyKey, PageSize: 1}); err == nil && len(e.Effects) == 1 {
			p.Effect = &e.Effects[0]
		}
	}
	return p, nil
}

func (h *Handler) apiQueues(r *http.Request) (any, error) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	return h.svc.ListTaskQueues(ctx, &api.ListTaskQueuesRequest{})
}

// effectsView is a page of the ledger.
type effectsView struct {
	Effects []api.EffectInfo `view:"keep"`
	Next    string
}

func (h *Handler) apiEffects(r *http.Request) (any, error) {
	q := r.URL.Query()
	req := &api.ListEffectsRequest{WorkflowID: strings.TrimSpace(q.Get("id")), KeyPrefix: strings.TrimSpace(q.Get("key")),
		DuplicatesOnly: q.Get("dups") == "1", PageSize: 100}
	if p := q.Get("page"); p != "" {
		var err error
		if req.NextPageToken, err = base64.RawURLEncoding.DecodeString(p); err != nil {
			return nil, invalid("page: %v", err)
		}
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	resp, err := h.svc.ListEffects(ctx, req)
	if err != nil {
		return nil, err
	}
	return effectsView{Effects: resp.Effects, Next: base64.RawURLEncoding.EncodeToString(resp.NextPageToken)}, nil
}

// actionRequest is the body of every action.
type actionRequest struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	// By names the person acting (recorded as the identity).
	By     string `json:"by"`
	Reason string `json:"reason"`
	// Signal: its name and input (JSON text).
	Name  string `json:"name"`
	Input string `json:"input"`
	// Resolve: the activity, what happened and its result (JSON text).
	ScheduledEventID int64  `json:"scheduledEventId"`
	Resolution       string `json:"resolution"`
	Result           string `json:"result"`
	// Budget: the new limits (absent or null: unchanged; 0: no limit), or
	// stop.
	MaxTokens  *int64   `json:"maxTokens"`
	MaxCostUSD *float64 `json:"maxCostUSD"`
	MaxTurns   *int64   `json:"maxTurns"`
	Stop       bool     `json:"stop"`
	// Approve: the tool call (empty: the only one awaiting) and the decision.
	CallID   string `json:"callId"`
	Approved *bool  `json:"approved"`
	// Reset: the WorkflowTaskCompleted event (0: the last task), whether
	// to drop the later signals, and the request id (a retried click makes
	// one run).
	EventID   int64  `json:"eventId"`
	NoReapply bool   `json:"noReapply"`
	RequestID string `json:"requestId"`
}

func decodeAction(body []byte) (*actionRequest, error) {
	var a actionRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, invalid("malformed request: %v", err)
	}
	if a.WorkflowID == "" {
		return nil, invalid("workflowId is required")
	}
	return &a, nil
}

// identity is who the history records for an action.
func (a *actionRequest) identity() string {
	if by := strings.TrimSpace(a.By); by != "" {
		return by + " (web UI)"
	}
	return "web UI"
}

// done is the answer of an action.
type done struct {
	WorkflowID string
	RunID      string
	Action     string
}

func (h *Handler) apiSignal(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Name) == "" {
		return nil, invalid("a signal needs a name")
	}
	in, err := view.JSONInput("the signal's input", a.Input)
	if err != nil {
		return nil, api.Errorf(api.ErrInvalidArgument, "%v", err)
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	_, err = h.svc.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID, SignalName: a.Name, Input: in,
		Identity: a.identity()})
	return done{a.WorkflowID, a.RunID, "signal"}, err
}

func (h *Handler) apiCancel(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	_, err = h.svc.RequestCancelWorkflow(ctx, &api.CancelWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID, Reason: a.Reason, Identity: a.identity()})
	return done{a.WorkflowID, a.RunID, "cancel"}, err
}

func (h *Handler) apiTerminate(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	_, err = h.svc.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID, Reason: a.Reason, Identity: a.identity()})
	return done{a.WorkflowID, a.RunID, "terminate"}, err
}

// apiDelete deletes a closed run (its history, state and list entries;
// not its effects ledger): docs/retention.md.
func (h *Handler) apiDelete(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	_, err = h.svc.DeleteWorkflow(ctx, &api.DeleteWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID, Reason: a.Reason, Identity: a.identity()})
	return done{a.WorkflowID, a.RunID, "delete"}, err
}

// resetDone answers a reset: the new run, for the page to open.
type resetDone struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
	BaseRunID  string `json:"baseRunId"`
	AtEventID  int64  `json:"atEventId"`
}

func (h *Handler) apiReset(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Reason) == "" {
		return nil, invalid("say why: both runs record the reason")
	}
	req := &api.ResetWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID, ToEventID: a.EventID, ToLastTask: a.EventID == 0,
		NoReapply: a.NoReapply, Reason: a.Reason, Identity: a.identity(), RequestID: a.RequestID}
	ctx, cancel := ctxOf(r)
	defer cancel()
	resp, err := h.svc.ResetWorkflow(ctx, req)
	if err != nil {
		return nil, err
	}
	return resetDone{a.WorkflowID, resp.RunID, resp.BaseRunID, resp.AtEventID}, nil
}

func (h *Handler) apiResolve(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Reason) == "" {
		return nil, invalid("say why: the history records the reason")
	}
	if strings.TrimSpace(a.By) == "" {
		return nil, invalid("say who you are: the history records who decided")
	}
	req := &api.ResolveActivityRequest{WorkflowID: a.WorkflowID, RunID: a.RunID, ScheduledEventID: a.ScheduledEventID,
		Identity: a.identity(), Reason: a.Reason}
	switch a.Resolution {
	case "happened":
		req.Resolution = history.ResolvedHappened
		if req.Result, err = view.JSONInput("the result", a.Result); err != nil {
			return nil, api.Errorf(api.ErrInvalidArgument, "%v", err)
		}
	case "not_happened":
		req.Resolution = history.ResolvedNotHappened
	case "perform":
		req.Resolution = history.ResolvedPerform
	case "failed":
		req.Resolution = history.ResolvedFailed
		req.Failure = &history.Failure{Type: "ResolvedFailed", Message: a.Reason, NonRetryable: true}
	default:
		return nil, invalid("resolution must be happened, not_happened, perform or failed, not %q", a.Resolution)
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	_, err = h.svc.ResolveActivity(ctx, req)
	return done{a.WorkflowID, a.RunID, "resolve"}, err
}
