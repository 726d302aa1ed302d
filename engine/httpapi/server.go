// Package httpapi serves engine/api.Service over HTTP/1.1: every method is
// POST /api/v1/<Method>, with msgpack bodies for workers
// (Content-Type: application/msgpack) and JSON for people and curl
// (application/json). Errors are JSON objects {"code", "message"} with a
// stable code per typed engine error and a matching HTTP status.
//
//	h := httpapi.NewHandler(eng, httpapi.Options{Token: token})
//	srv := &http.Server{Addr: "127.0.0.1:7233", Handler: h}
//
//	curl -s -H 'Content-Type: application/json' \
//	     -d '{"WorkflowID":"invoice-INV-9"}' http://127.0.0.1:7233/api/v1/DescribeWorkflow
package httpapi

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/runpool"
	"github.com/cairnflow/cairn/internal/wire"
)

// Content types (see engine/api/wire.go).
const (
	ContentMsgpack = api.ContentMsgpack
	ContentJSON    = api.ContentJSON
)

// Options configure the handler.
type Options struct {
	// Token, when set, is required as "Authorization: Bearer <token>" on
	// every route but /healthz.
	Token string
	// MaxBodyBytes bounds a request body (default 4 MiB, or twice
	// MaxPayloadBytes when that is more: a payload at the limit plus room
	// for the rest of the request and its encoding). A larger request is
	// refused unread with limit_exceeded, reported against the payload
	// limit (only a payload makes a request that large) with the request's
	// size, or against this limit when it is the lower one.
	MaxBodyBytes int64
	// MaxPayloadBytes is the engine's payload limit, which refusals of
	// oversized requests name. Default: the service's own, when it has a
	// MaxPayloadBytes() int method (*engine.Engine does), else 2 MiB (the
	// engine's default).
	MaxPayloadBytes int
	// Logger receives request errors (default: discarded).
	Logger *zerolog.Logger
	// Registry receives the HTTP metrics (default: a new registry, served
	// on /metrics).
	Registry *prometheus.Registry
	// Collectors are registered too (the engine's gauges).
	Collectors []prometheus.Collector
	// RequestTimeout bounds every call but the long polls (default 30 s;
	// long polls are bounded by the engine's poll timeout).
	RequestTimeout time.Duration
	// UIURL, when set, is where the web UI is served: GET / answers with
	// a pointer to it (the API has no page of its own).
	UIURL string
	// MaxSessions bounds the sessions open at once (default 1,024). An
	// upgrade past it is answered 503 (unavailable); clients retry.
	MaxSessions int
	// SessionIdleTimeout closes a session that has had no call in flight
	// and received no frame for this long (default 5 min). Workers keep
	// long polls in flight, so their sessions are never idle; a client
	// whose session was closed opens a new one at its next call.
	SessionIdleTimeout time.Duration
	// SessionFrameTimeout bounds how long a frame may take to arrive once
	// its first byte has (default 1 min): a peer that stalls in the middle
	// of a frame is disconnected rather than holding the bytes it sent.
	SessionFrameTimeout time.Duration
	// Backup, when set, serves GET BackupPath: it writes a consistent copy
	// of the store to w (badgerstore.Store.Backup), streamed as the
	// response body, for `cairn backup`. The route needs the token.
	Backup func(ctx context.Context, w io.Writer) error
	// RequestContext, when set, derives the context of every call from the
	// HTTP request that carries it (a plain request, or the upgrade that
	// opened a session): a cluster marks the calls another server
	// forwarded, by a header of theirs, so that it does not forward them
	// again.
	RequestContext func(ctx context.Context, r *http.Request) context.Context
}

// requestContext is the context the calls carried by r run under.
func (h *Handler) requestContext(ctx context.Context, r *http.Request) context.Context {
	if h.opts.RequestContext == nil {
		return ctx
	}
	return h.opts.RequestContext(ctx, r)
}

// BackupPath is the route of the online backup (Options.Backup).
const BackupPath = "/api/v1/backup"

// maxIdleRunners bounds the goroutines kept waiting for session calls.
const maxIdleRunners = 128

// Handler serves the API, /healthz, /metrics and /debug/pprof.
type Handler struct {
	svc     api.Service
	opts    Options
	log     zerolog.Logger
	mux     *http.ServeMux
	metrics *httpMetrics
	sess    sessions
	runners *runpool.Pool // runs session calls
}

// NewHandler returns the HTTP handler for svc.
func NewHandler(svc api.Service, opts Options) *Handler {
	if opts.MaxPayloadBytes <= 0 {
		opts.MaxPayloadBytes = defaultMaxPayload
		if l, ok := svc.(interface{ MaxPayloadBytes() int }); ok && l.MaxPayloadBytes() > 0 {
			opts.MaxPayloadBytes = l.MaxPayloadBytes()
		}
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = max(4<<20, 2*int64(opts.MaxPayloadBytes))
	}
	if opts.Logger == nil {
		l := zerolog.Nop()
		opts.Logger = &l
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 30 * time.Second
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 1024
	}
	if opts.SessionIdleTimeout <= 0 {
		opts.SessionIdleTimeout = 5 * time.Minute
	}
	if opts.SessionFrameTimeout <= 0 {
		opts.SessionFrameTimeout = time.Minute
	}
	if opts.Registry == nil {
		opts.Registry = prometheus.NewRegistry()
		opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})) // a fresh registry: cannot clash
	}
	h := &Handler{svc: svc, opts: opts, log: *opts.Logger, mux: http.NewServeMux(), metrics: newHTTPMetrics(opts.Registry), runners: runpool.New(maxIdleRunners)}
	for _, c := range opts.Collectors {
		if err := opts.Registry.Register(c); err != nil {
			h.log.Warn().Err(err).Msg("metrics collector not registered")
		}
	}
	h.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "ok\n")
	})
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if h.opts.UIURL == "" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, "This is Cairn's API (POST "+Prefix+"<Method>); this server has no web UI.\n")
			return
		}
		_, _ = io.WriteString(w, "This is Cairn's API (POST "+Prefix+"<Method>). The web UI is at "+h.opts.UIURL+"\n")
	})
	h.mux.Handle("/metrics", h.auth(promhttp.HandlerFor(opts.Registry, promhttp.HandlerOpts{})))
	h.mux.Handle("/debug/pprof/", h.auth(http.HandlerFunc(pprof.Index)))
	h.mux.Handle("/debug/pprof/profile", h.auth(http.HandlerFunc(pprof.Profile)))
	h.mux.Handle("/debug/pprof/trace", h.auth(http.HandlerFunc(pprof.Trace)))
	h.mux.Handle("/debug/pprof/symbol", h.auth(http.HandlerFunc(pprof.Symbol)))
	h.mux.Handle("/debug/pprof/cmdline", h.auth(http.HandlerFunc(pprof.Cmdline)))
	h.mux.Handle(Prefix, h.auth(http.HandlerFunc(h.serveAPI)))
	h.mux.Handle(StreamPath, http.HandlerFunc(h.serveStream)) // its own auth: EventSource sends no headers
	h.mux.Handle(wire.SessionPath, h.auth(http.HandlerFunc(h.serveSession)))
	h.mux.Handle(BackupPath, h.auth(http.HandlerFunc(h.serveBackup)))
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func (h *Handler) auth(next http.Handler) http.Handler {
	if h.opts.Token == "" {
		return next
	}
	want := []byte("Bearer " + h.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cairn"`)
			writeError(w, http.StatusUnauthorized, api.CodeUnauthenticated, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request) {
	method := strings.TrimPrefix(r.URL.Path, Prefix)
	ep, ok := routes[method]
	if !ok {
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no API method %q", method))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, api.CodeInvalidArgument, "API methods take POST")
		return
	}
	reqType, err := requestType(r)
	if err != nil {
		writeError(w, http.StatusUnsupportedMediaType, api.CodeInvalidArgument, err.Error())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.opts.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, api.CodeLimitExceeded, h.tooLarge(r.ContentLength).Error())
			return
		}
		writeError(w, http.StatusBadRequest, api.CodeInvalidArgument, "reading request body: "+err.Error())
		return
	}
	start := time.Now()
	ctx := h.requestContext(r.Context(), r)
	if !ep.long {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, h.opts.RequestTimeout)
		defer cancel()
	}
	resp, err := ep.call(ctx, h.svc, func(v any) error { return decodeBody(reqType, body, v) })
	h.metrics.observe(method, api.ErrorCode(err), time.Since(start))
	if err != nil {
		h.fail(w, method, err)
		return
	}
	h.respond(w, r, reqType, resp)
}

// serveBackup streams a backup of the store. The copy carries its own
// checksum and end (see badgerstore's backup format): a stream cut short by
// a failure is refused by the client and by restore, so a failure after
// the first byte needs no other signal than the connection closing.
func (h *Handler) serveBackup(w http.ResponseWriter, r *http.Request) {
	if h.opts.Backup == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, "this server does not serve backups")
		return
	}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, api.CodeInvalidArgument, "the backup route takes GET")
		return
	}
	// A backup takes as long as the data needs: no write deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="cairn-`+time.Now().UTC().Format("20060102T150405Z")+`.backup"`)
	start := time.Now()
	err := h.opts.Backup(r.Context(), w)
	h.metrics.observe("Backup", api.ErrorCode(err), time.Since(start))
	if err != nil {
		h.log.Error().Err(err).Msg("backup failed; the client's copy is incomplete and will be refused")
		panic(http.ErrAbortHandler) // close the connection: the copy has no valid end
	}
}

// defaultMaxPayload is the engine's default payload limit
// (machine.DefaultLimits).
const defaultMaxPayload = 2 << 20

// tooLarge is the refusal of a request over MaxBodyBytes, of size bytes
// (-1: unknown, it was cut off unread). Only a payload makes a request
// that large, so it names the payload limit; a transport limit below it
// is named instead.
func (h *Handler) tooLarge(size int64) error {
	what := fmt.Sprintf("the request is %d bytes", size)
	if size < 0 {
		what = fmt.Sprintf("the request is over %d bytes", h.opts.MaxBodyBytes)
	}
	if h.opts.MaxBodyBytes < int64(h.opts.MaxPayloadBytes) {
		return api.Errorf(api.ErrLimitExceeded, "request too large: %s, over this server's request limit of %d bytes (httpapi.Options.MaxBodyBytes)",
			what, h.opts.MaxBodyBytes)
	}
	return api.Errorf(api.ErrLimitExceeded, "payload too large: %s, and a payload may be at most %d bytes (the engine's Limits.MaxPayloadBytes; a request over %d bytes is not read)",
		what, h.opts.MaxPayloadBytes, h.opts.MaxBodyBytes)
}

// requestType returns the body's content type: msgpack or JSON (the
// default for an empty Content-Type).
func requestType(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return ContentJSON, nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", fmt.Errorf("bad Content-Type %q: %v", ct, err)
	}
	switch mt {
	case ContentJSON, ContentMsgpack:
		return mt, nil
	}
	return "", fmt.Errorf("unsupported Content-Type %q: use %s or %s", mt, ContentJSON, ContentMsgpack)
}

func decodeBody(contentType string, body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil // an empty body is the zero request
	}
	var err error
	if contentType == ContentMsgpack {
		if err = api.CheckMsgpack(body, api.MaxMsgpackDepth); err == nil {
			err = api.UnmarshalMsgpack(body, v) // a peer of another version may send more or fewer fields
		}
	} else {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil && dec.More() {
			err = errors.New("trailing data after the JSON object")
		}
	}
	if err != nil {
		return api.Errorf(api.ErrInvalidArgument, "malformed %s body: %v", contentType, err)
	}
	return nil
}

func (h *Handler) respond(w http.ResponseWriter, r *http.Request, reqType string, resp any) {
	out := reqType
	if accept := r.Header.Get("Accept"); strings.Contains(accept, ContentMsgpack) {
		out = ContentMsgpack
	} else if strings.Contains(accept, ContentJSON) {
		out = ContentJSON
	}
	var (
		b   []byte
		err error
	)
	if out == ContentMsgpack {
		b, err = api.MarshalMsgpack(resp)
	} else {
		b, err = json.Marshal(resp)
	}
	if err != nil {
		h.fail(w, "encode", fmt.Errorf("%w: encode response: %w", api.ErrInternal, err))
		return
	}
	w.Header().Set("Content-Type", out)
	_, _ = w.Write(b)
}

func (h *Handler) fail(w http.ResponseWriter, method string, err error) {
	status, body := h.errorBody(method, err)
	writeError(w, status, body.Code, body.Message)
}

// errorBody maps err to its HTTP status and error body, logging server
// errors.
func (h *Handler) errorBody(method string, err error) (int, api.ErrorBody) {
	code := api.TransportCode(err)
	status := StatusOf(code)
	if status >= 500 {
		h.log.Error().Err(err).Str("method", method).Msg("request failed")
	}
	return status, api.ErrorBody{Code: code, Message: err.Error()}
}

// StatusOf maps an error code to its HTTP status:
//
//	not_found                                                         404
//	already_started, stale_task, stale_attempt, workflow_closed,
//	not_paused                                                        409
//	invalid_argument                                                  400
//	limit_exceeded, query_failed                                      422
//	unavailable                                                       503
//	unauthenticated                                                   401
//	deadline_exceeded                                                 504
//	canceled                                                          499
//	internal, data_corrupt, and any other                             500
//
// Errors raised before a method runs have their own status: an unknown
// method 404 (not_found), a method other than POST 405, an unsupported
// Content-Type 415 (both invalid_argument), a body over
// Options.MaxBodyBytes 413 (limit_exceeded, naming the payload limit), a malformed body 400
// (invalid_argument).
func StatusOf(code api.Code) int {
	switch code {
	case api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeAlreadyStarted, api.CodeStaleTask, api.CodeStaleAttempt, api.CodeWorkflowClosed, api.CodeNotPaused:
		return http.StatusConflict
	case api.CodeInvalidArgument:
		return http.StatusBadRequest
	case api.CodeLimitExceeded, api.CodeQueryFailed, api.CodeUpdateRejected:
		return http.StatusUnprocessableEntity
	case api.CodeUnavailable, api.CodeNotOwner:
		return http.StatusServiceUnavailable
	case api.CodeResourceExhausted:
		return http.StatusInsufficientStorage
	case api.CodeUnauthenticated:
		return http.StatusUnauthorized
	case api.CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case api.CodeCanceled:
		return 499
	}
	return http.StatusInternalServerError
}

func writeError(w http.ResponseWriter, status int, code api.Code, msg string) {
	w.Header().Set("Content-Type", ContentJSON)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(api.ErrorBody{Code: code, Message: msg})
}
