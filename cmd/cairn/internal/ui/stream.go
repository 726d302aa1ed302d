package ui

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// A run page follows its run over server-sent events
// (GET /api/stream/run?id=&run=):
//
//	event: history   data: {"rows": [...], "nextEventId": n, "closed": b}   (id: n)
//	event: run       data: the run's page (runView), after every change
//	event: end       data: {}   the run closed and everything was sent
//	event: failure   data: {"code", "message"}
//
// The first history event carries the whole history; later ones what came
// since. A reconnecting browser sends Last-Event-ID and gets only the rest.
// While the run is open, the run event is also sent every refreshEvery
// (leases, heartbeats and backlogs change without events).

// refreshEvery is how often an open run's page is refreshed without an
// event.
const refreshEvery = 3 * time.Second

// eventRow is one history event as the timeline shows it, with the event
// itself for the expanded view.
type eventRow struct {
	view.Row
	Event history.Event
}

// historyBatch is the data of a history event.
type historyBatch struct {
	Rows        []eventRow
	NextEventID int64
	Closed      bool
}

func (h *Handler) streamRun(w http.ResponseWriter, r *http.Request) {
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
	sent := int64(0) // events the browser has
	if s := r.Header.Get("Last-Event-ID"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 1 {
			sent = n - 1
		}
	}
	if run == "" { // follow the run that is current now
		d, err := h.svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: id})
		if err != nil {
			h.reply(w, nil, err)
			return
		}
		run = d.Info.RunID
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, f: flusher}
	if err := h.follow(ctx, s, id, run, sent); err != nil && ctx.Err() == nil {
		s.send("failure", "", api.ErrorBody{Code: api.ErrorCode(err), Message: err.Error()})
	}
}

type stream struct {
	w http.ResponseWriter
	f http.Flusher
}

func (s *stream) send(event, id string, v any) {
	var b []byte
	var err error
	if raw, ok := v.(api.ErrorBody); ok {
		b, err = json.Marshal(raw)
	} else {
		b, err = view.Marshal(v)
	}
	if err != nil {
		b, _ = json.Marshal(api.ErrorBody{Code: api.CodeInternal, Message: err.Error()})
		event = "failure"
	}
	if id != "" {
		fmt.Fprintf(s.w, "id: %s\n", id)
	}
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", event, b)
	s.f.Flush()
}

// follow sends the run's history from event sent+1 on, and its page after
// every change, until the run closes or the browser leaves.
func (h *Handler) follow(ctx context.Context, s *stream, id, run string, sent int64) error {
	tl := view.NewTimeline()
	next := int64(1)
	first := true
	for {
		wait := !first
		pctx, cancel := context.WithTimeout(ctx, refreshEvery)
		resp, err := h.svc.GetHistory(pctx, &api.GetHistoryRequest{WorkflowID: id, RunID: run, FromEventID: next, WaitNewEvents: wait})
		timedOut := errors.Is(pctx.Err(), context.DeadlineExceeded) // read before cancel, which sets it
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !timedOut { // a real failure: not "no news within refreshEvery"
				if first { // the page still shows what the engine says of the run (a quarantined one: why)
					if v, verr := h.runView(ctx, id, run, true); verr == nil {
						s.send("run", "", v)
					}
				}
				return err
			}
			resp = &api.GetHistoryResponse{NextEventID: next} // no news within refreshEvery
		}
		batch := historyBatch{NextEventID: resp.NextEventID, Closed: resp.Closed}
		for _, ev := range resp.Events {
			row := tl.Row(ev) // every event, so that durations know their start
			next = ev.ID + 1
			if ev.ID > sent {
				batch.Rows = append(batch.Rows, eventRow{Row: row, Event: ev})
			}
		}
		more := len(resp.Events) > 0 && next < resp.NextEventID
		if len(batch.Rows) > 0 || first {
			batch.Rows = append([]eventRow{}, batch.Rows...)
			s.send("history", strconv.FormatInt(next, 10), batch)
			sent = next - 1
		}
		if more {
			first = false
			continue // a long history comes in pages
		}
		if len(resp.Events) > 0 || first || !resp.Closed {
			v, err := h.runView(ctx, id, run, first || resp.Closed)
			if err != nil {
				return err
			}
			s.send("run", "", v)
		}
		first = false
		if resp.Closed && next >= resp.NextEventID {
			s.send("end", "", struct{}{})
			return nil
		}
	}
}
