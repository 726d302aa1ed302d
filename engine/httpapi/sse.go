package httpapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cairnflow/cairn/engine/api"
)

// StreamPath serves a run's live stream as Server-Sent Events:
//
//	GET /api/v1/stream/<workflow id>?run=<run id>&after=<seq>
//
// Each event is `id: <seq>`, `event: <kind>` (text, tool_call, done,
// superseded) and `data: <api.StreamEvent as JSON>`; `event: gap` says
// events were dropped before the window (re-read the transcript), and
// `event: closed` that the run closed (the stream then ends). A reconnecting
// EventSource resumes after its Last-Event-ID. A comment line is sent every
// 15 s to keep proxies from closing an idle stream. Browsers cannot set an
// Authorization header on an EventSource: with a token configured, pass it
// as ?access_token=.
const StreamPath = Prefix + "stream/"

// sseKeepAlive is how often an idle stream gets a comment line.
const sseKeepAlive = 15 * time.Second

func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request) {
	if h.opts.Token != "" {
		got := r.Header.Get("Authorization")
		if tok := r.URL.Query().Get("access_token"); tok != "" {
			got = "Bearer " + tok
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+h.opts.Token)) != 1 {
			writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "missing or wrong bearer token")
			return
		}
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, api.CodeInvalidArgument, "the stream takes GET")
		return
	}
	id := strings.TrimPrefix(r.URL.Path, StreamPath)
	if id == "" {
		writeError(w, http.StatusBadRequest, api.CodeInvalidArgument, "no workflow id in the path")
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	if le := r.Header.Get("Last-Event-ID"); le != "" {
		after, _ = strconv.ParseInt(le, 10, 64)
	}
	req := &api.WatchStreamRequest{WorkflowID: id, RunID: r.URL.Query().Get("run"), AfterSeq: after, Wait: true}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "streaming unsupported by the connection")
		return
	}
	// The first read checks the run exists before the 200 goes out.
	first, err := h.watch(r.Context(), req, false)
	if err != nil {
		h.fail(w, "stream", err)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	resp := first
	for {
		if resp.RunID != "" {
			req.RunID = resp.RunID // follow the run it started on
		}
		if resp.Gap {
			fmt.Fprintf(w, "event: gap\ndata: {\"after\":%d}\n\n", req.AfterSeq)
		}
		for _, ev := range resp.Events {
			b, _ := json.Marshal(ev) // plain struct: cannot fail
			fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Kind, b)
			req.AfterSeq = ev.Seq
		}
		if resp.Closed {
			fmt.Fprint(w, "event: closed\ndata: {}\n\n")
			flusher.Flush()
			return
		}
		if len(resp.Events) == 0 && !resp.Gap {
			fmt.Fprint(w, ": keep-alive\n\n")
		}
		flusher.Flush()
		if resp, err = h.watch(r.Context(), req, true); err != nil {
			b, _ := json.Marshal(api.ErrorBody{Code: api.ErrorCode(err), Message: err.Error()})
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", b)
			flusher.Flush()
			return
		}
	}
}

// watch reads the stream, waiting at most sseKeepAlive when wait is set.
func (h *Handler) watch(ctx context.Context, req *api.WatchStreamRequest, wait bool) (*api.WatchStreamResponse, error) {
	r := *req
	r.Wait = wait
	ctx, cancel := context.WithTimeout(ctx, sseKeepAlive)
	defer cancel()
	resp, err := h.svc.WatchStream(ctx, &r)
	if err != nil && ctx.Err() != nil && wait {
		return &api.WatchStreamResponse{RunID: req.RunID}, nil // the keep-alive tick
	}
	return resp, err
}
