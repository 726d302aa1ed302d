package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/wire"
)

// sessions tracks the open sessions so that Shutdown can end them:
// http.Server.Shutdown does not know hijacked connections.
type sessions struct {
	mu      sync.Mutex
	closing bool
	count   int // connections being upgraded or served (bounded by MaxSessions)
	open    map[*session]struct{}
	wg      sync.WaitGroup
	// busyWakes counts idle timeouts that found calls in flight (the
	// session was kept): for tests.
	busyWakes atomic.Int64
}

// session serves the calls of one upgraded connection.
type session struct {
	h      *Handler
	conn   net.Conn
	w      *wire.Writer
	ctx    context.Context
	cancel context.CancelFunc

	mu    sync.Mutex
	calls map[uint32]context.CancelFunc
	wg    sync.WaitGroup

	// dlMu orders the reader's deadlines with Shutdown's: once Shutdown
	// has set its deadline, the reader sets none.
	dlMu sync.Mutex
}

// errIdle ends a session that stayed silent with no call in flight.
var errIdle = errors.New("session idle")

// serveSession upgrades the request to the session protocol (see package
// internal/wire) and serves its calls until the connection ends.
func (h *Handler) serveSession(w http.ResponseWriter, r *http.Request) {
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), wire.Protocol) {
		w.Header().Set("Upgrade", wire.Protocol)
		writeError(w, http.StatusUpgradeRequired, api.CodeInvalidArgument,
			fmt.Sprintf("this route upgrades to the %s protocol (Connection: Upgrade, Upgrade: %s)", wire.Protocol, wire.Protocol))
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "connection cannot be upgraded")
		return
	}
	if ok, why := h.sess.reserve(h.opts.MaxSessions); !ok {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, why)
		return
	}
	defer h.sess.release()
	conn, rw, err := hj.Hijack()
	if err != nil {
		h.log.Warn().Err(err).Msg("session upgrade failed")
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{}) // the server's read/write timeouts are for plain requests
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+wire.Protocol+"\r\n\r\n"); err != nil {
		return
	}
	ctx, cancel := context.WithCancel(h.requestContext(context.WithoutCancel(r.Context()), r))
	s := &session{h: h, conn: conn, w: wire.NewWriter(conn), ctx: ctx, cancel: cancel, calls: make(map[uint32]context.CancelFunc)}
	if !h.sess.add(s) {
		cancel()
		return
	}
	defer h.sess.remove(s)
	s.serve(rw.Reader)
}

// headerHas reports whether a comma-separated header lists token.
func headerHas(hd http.Header, name, token string) bool {
	for _, v := range hd.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// serve reads frames until the connection ends, then waits for the calls
// it started. A connection that ends abruptly cancels its calls (their
// client is gone); one ended by Shutdown lets them finish and answer.
func (s *session) serve(br *bufio.Reader) {
	defer s.cancel()
	rd := wire.NewReader(br, s.h.opts.MaxBodyBytes)
	for {
		if err := s.awaitFrame(br); err != nil {
			s.end(err)
			return
		}
		f, err := rd.Read()
		var tooBig *wire.TooLargeError
		switch {
		case errors.As(err, &tooBig):
			if tooBig.Kind == wire.KindCall {
				s.reply(tooBig.ID, "", nil, s.h.tooLarge(tooBig.Size))
			}
			continue
		case err != nil:
			s.end(err)
			return
		}
		switch f.Kind {
		case wire.KindCall:
			if err := s.start(f); err != nil {
				s.end(err)
				return
			}
		case wire.KindCancel:
			s.mu.Lock()
			if c, ok := s.calls[f.ID]; ok {
				c()
			}
			s.mu.Unlock()
		default:
			s.end(fmt.Errorf("%w: a client sent a frame of kind %d", wire.ErrProtocol, f.Kind))
			return
		}
	}
}

// awaitFrame waits for the first byte of the next frame, then gives the
// frame SessionFrameTimeout to arrive whole. A session with no call in
// flight that stays silent for SessionIdleTimeout ends with errIdle.
func (s *session) awaitFrame(br *bufio.Reader) error {
	for {
		if err := s.readDeadline(s.h.opts.SessionIdleTimeout); err != nil {
			return err
		}
		_, err := br.Peek(1)
		if err == nil {
			break
		}
		if !isTimeout(err) || s.h.sess.isClosing() {
			return err
		}
		if s.inflight() == 0 {
			return errIdle
		}
		s.h.sess.busyWakes.Add(1)
	}
	return s.readDeadline(s.h.opts.SessionFrameTimeout)
}

// readDeadline sets the connection's read deadline d from now, unless
// Shutdown has begun (its own deadline stands).
func (s *session) readDeadline(d time.Duration) error {
	s.dlMu.Lock()
	defer s.dlMu.Unlock()
	if s.h.sess.isClosing() {
		return net.ErrClosed
	}
	return s.conn.SetReadDeadline(time.Now().Add(d))
}

func (s *session) inflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// end handles the end of the read side: on shutdown the calls in flight
// finish and answer; otherwise they are canceled.
func (s *session) end(err error) {
	if s.h.sess.isClosing() {
		s.wg.Wait()
		return
	}
	remote := s.conn.RemoteAddr().String()
	switch {
	case errors.Is(err, wire.ErrProtocol):
		s.h.log.Warn().Err(err).Str("remote", remote).Msg("session closed")
	case errors.Is(err, errIdle):
		s.h.log.Debug().Str("remote", remote).Dur("idle", s.h.opts.SessionIdleTimeout).Msg("idle session closed")
	case isTimeout(err):
		s.h.log.Warn().Str("remote", remote).Dur("timeout", s.h.opts.SessionFrameTimeout).
			Msg("session closed: a frame did not arrive whole in time")
	}
	s.cancel()
	s.wg.Wait()
}

// start runs one call in its own goroutine (long polls block).
func (s *session) start(f wire.Frame) error {
	ep, ok := routes[f.Method]
	if !ok {
		return s.reply(f.ID, f.Method, nil, api.Errorf(api.ErrNotFound, "no API method %q", f.Method))
	}
	var (
		ctx    context.Context
		cancel context.CancelFunc
	)
	if ep.long {
		ctx, cancel = context.WithCancel(s.ctx)
	} else {
		ctx, cancel = context.WithTimeout(s.ctx, s.h.opts.RequestTimeout)
	}
	s.mu.Lock()
	if _, dup := s.calls[f.ID]; dup {
		s.mu.Unlock()
		cancel()
		return fmt.Errorf("%w: call id %d is already in flight", wire.ErrProtocol, f.ID)
	}
	s.calls[f.ID] = cancel
	s.mu.Unlock()
	s.wg.Add(1)
	s.h.runners.Go(func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.calls, f.ID)
			s.mu.Unlock()
			cancel()
		}()
		start := time.Now()
		resp, err := s.call(ctx, ep, f)
		s.h.metrics.observe(f.Method, api.ErrorCode(err), time.Since(start))
		_ = s.reply(f.ID, f.Method, resp, err)
	})
	return nil
}

// call runs one method. A panic fails that call with an internal error,
// as net/http does for a request, instead of taking the server down.
func (s *session) call(ctx context.Context, ep endpoint, f wire.Frame) (resp any, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.h.log.Error().Str("method", f.Method).Interface("panic", p).Bytes("stack", debug.Stack()).Msg("call panicked")
			resp, err = nil, api.Errorf(api.ErrInternal, "%s panicked: %v", f.Method, p)
		}
	}()
	return ep.call(ctx, s.h.svc, func(v any) error { return decodeBody(ContentMsgpack, f.Body, v) })
}

// reply answers call id with resp or err. A failed write ends the
// connection (the reader then sees it closed).
func (s *session) reply(id uint32, method string, resp any, err error) error {
	var werr error
	if err == nil {
		b, merr := api.MarshalMsgpack(resp)
		if merr != nil {
			err = fmt.Errorf("%w: encode response: %w", api.ErrInternal, merr)
		} else {
			werr = s.w.Send(wire.KindReply, id, "", b)
		}
	}
	if err != nil {
		_, body := s.h.errorBody(method, err)
		b, _ := json.Marshal(body)
		werr = s.w.Send(wire.KindFail, id, "", b)
	}
	if werr != nil {
		_ = s.conn.Close()
	}
	return nil
}

// reserve counts a connection about to be upgraded; false (and why) once
// Shutdown began or max sessions are open. Each reserve that succeeds is
// paired with a release.
func (ss *sessions) reserve(max int) (bool, string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	switch {
	case ss.closing:
		return false, "server is shutting down"
	case ss.count >= max:
		return false, fmt.Sprintf("too many sessions open (%d); retry later", max)
	}
	ss.count++
	ss.wg.Add(1)
	return true, ""
}

func (ss *sessions) release() {
	ss.mu.Lock()
	ss.count--
	ss.mu.Unlock()
	ss.wg.Done()
}

// add registers a session being served; false once Shutdown began.
func (ss *sessions) add(s *session) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.closing {
		return false
	}
	if ss.open == nil {
		ss.open = make(map[*session]struct{})
	}
	ss.open[s] = struct{}{}
	return true
}

func (ss *sessions) remove(s *session) {
	ss.mu.Lock()
	delete(ss.open, s)
	ss.mu.Unlock()
}

func (ss *sessions) isClosing() bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.closing
}

// Shutdown ends the sessions: it stops reading new calls, lets the calls
// in flight finish and answer (close the engine first so that long polls
// return at once), then closes the connections. When ctx ends first, the
// connections are closed at once. Call it alongside http.Server.Shutdown,
// which does not know upgraded connections.
func (h *Handler) Shutdown(ctx context.Context) error {
	ss := &h.sess
	ss.mu.Lock()
	ss.closing = true
	open := make([]*session, 0, len(ss.open))
	for s := range ss.open {
		open = append(open, s)
	}
	ss.mu.Unlock()
	// A reader sets its deadlines under dlMu after checking closing: set
	// this one after any it set, and it sets no more.
	for _, s := range open {
		s.dlMu.Lock()
		_ = s.conn.SetReadDeadline(time.Now()) // the reader stops; calls go on
		s.dlMu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		ss.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		ss.mu.Lock()
		for s := range ss.open {
			s.cancel()
			_ = s.conn.Close()
		}
		ss.mu.Unlock()
		<-done
		return ctx.Err()
	}
}
