package ui

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// The agent's conversation: GET /api/transcript (api.GetTranscript) and
// GET /api/stream/agent, which follows a run's live output:
//
//	event: delta       data: an api.StreamEvent (text or a tool call's pieces; done; superseded)   (id: its seq)
//	event: transcript  data: the run's transcript, after a model call ended or the run moved on
//	event: end         data: {}   the run closed and its last transcript was sent
//
// A reconnecting browser sends Last-Event-ID and resumes after it.

func (h *Handler) apiTranscript(r *http.Request) (any, error) {
	q := r.URL.Query()
	if q.Get("id") == "" {
		return nil, invalid("id is required")
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	return h.svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: q.Get("id"), RunID: q.Get("run")})
}

func (h *Handler) streamAgent(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, run := q.Get("id"), q.Get("run")
	if id == "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidArgument, "id is required")
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "streaming unsupported")
		return
	}
	ctx := r.Context()
	tr, err := h.svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id, RunID: run})
	if err != nil {
		h.reply(w, nil, err)
		return
	}
	after := int64(0)
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		after, _ = strconv.ParseInt(s, 10, 64)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, f: flusher}
	s.send("transcript", "", tr)
	if err := h.followAgent(ctx, s, id, tr.RunID, after); err != nil && ctx.Err() == nil {
		s.send("failure", "", api.ErrorBody{Code: api.TransportCode(err), Message: err.Error()})
	}
}

// followAgent relays the run's stream after seq after, and its transcript
// whenever a model call starts or ends streaming (and every refreshEvery:
// tool calls move on without streaming), until the run closes.
func (h *Handler) followAgent(ctx context.Context, s *stream, id, run string, after int64) error {
	seen := map[[2]int64]bool{} // attempts streaming: a new one shows its call's input in the transcript
	for {
		pctx, cancel := context.WithTimeout(ctx, refreshEvery)
		resp, err := h.svc.WatchStream(pctx, &api.WatchStreamRequest{WorkflowID: id, RunID: run, AfterSeq: after, Wait: true})
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded) // read before cancel, which sets it
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !timedOut { // a real failure: not "no news within refreshEvery"
				return err
			}
			resp = &api.WatchStreamResponse{NextSeq: after}
		}
		ended := resp.Gap || resp.Closed || len(resp.Events) == 0
		for _, ev := range resp.Events {
			s.send("delta", strconv.FormatInt(ev.Seq, 10), ev)
			k := [2]int64{ev.ScheduledEventID, int64(ev.Attempt)}
			if ev.Kind == api.StreamDone || ev.Kind == api.StreamSuperseded || !seen[k] {
				ended = true
			}
			seen[k] = true
		}
		if n := len(resp.Events); n > 0 {
			after = resp.Events[n-1].Seq
		} else if resp.Gap {
			// Everything after `after` was dropped (one delta larger than
			// the engine's window empties it): go on from what is next, or
			// every call would answer the same gap at once.
			after = resp.NextSeq - 1
		}
		if ended {
			tr, err := h.svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id, RunID: run})
			if err != nil {
				return err
			}
			s.send("transcript", "", tr)
			if !tr.Status.Open() {
				s.send("end", "", struct{}{})
				return nil
			}
		}
	}
}

func (h *Handler) apiBudget(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	if a.Reason == "" {
		return nil, invalid("say why: the history records the reason")
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	var b history.Budget
	if !a.Stop { // a limit not given stays as it is, as the CLI's does
		if a.MaxTokens == nil && a.MaxCostUSD == nil && a.MaxTurns == nil {
			return nil, invalid("give a new limit (tokens, cost or model calls), or stop")
		}
		d, err := h.svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID})
		if err != nil {
			return nil, err
		}
		if d.Budget != nil {
			b = d.Budget.Budget
		}
		if a.MaxTokens != nil {
			b.MaxTokens = *a.MaxTokens
		}
		if a.MaxCostUSD != nil {
			b.MaxCostUSD = *a.MaxCostUSD
		}
		if a.MaxTurns != nil {
			b.MaxTurns = *a.MaxTurns
		}
	}
	resp, err := h.svc.UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: a.WorkflowID, RunID: a.RunID, Stop: a.Stop,
		Budget: b, Identity: a.identity(), Reason: a.Reason})
	if err != nil {
		return nil, err
	}
	return resp, nil
}
