package client

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/wire"
)

// The session transport: one connection per RemoteService, upgraded from
// HTTP/1.1 (so the bearer token and TLS apply as for plain requests), over
// which every call is a frame and many calls are in flight at once. See
// package internal/wire for the format and the measurements behind it.

const (
	// sessionDialTimeout bounds connecting, the TLS handshake and the upgrade.
	sessionDialTimeout = 10 * time.Second
	// maxResponseFrame bounds a response the client accepts (a whole history
	// can be large; the server is trusted, this only stops a runaway peer).
	maxResponseFrame = 1 << 30
	// redialPause is how long a failed dial is reported to later calls
	// without dialing again, so that callers queued behind a dial that timed
	// out do not each wait for their own.
	redialPause = 100 * time.Millisecond
)

// errNoSession reports a server that does not serve sessions (it answered
// the upgrade with 404): the client falls back to plain requests.
var errNoSession = errors.New("server does not serve sessions")

// sessionDialer opens sessions to one server and keeps the current one.
type sessionDialer struct {
	base   *url.URL
	token  string
	tls    *tls.Config
	header http.Header

	dialing  chan struct{} // holds a token while a dial is in progress: one at a time
	mu       sync.Mutex
	cur      *clientSession
	lastErr  error
	lastFail time.Time
}

func newSessionDialer(base string, token string, tlsConf *tls.Config, header http.Header) (*sessionDialer, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: bad server address %q", api.ErrInvalidArgument, base)
	}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	return &sessionDialer{base: u, token: token, tls: tlsConf, header: header, dialing: make(chan struct{}, 1)}, nil
}

// get returns the open session, dialing one when there is none.
func (d *sessionDialer) get(ctx context.Context) (*clientSession, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s := d.current(); s != nil {
		return s, nil
	}
	// Wait for a dial in progress without outliving the caller's context
	// (a heartbeat should not wait ten seconds for someone else's dial).
	select {
	case d.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-d.dialing }()
	if s := d.current(); s != nil {
		return s, nil
	}
	d.mu.Lock()
	if d.lastErr != nil && time.Since(d.lastFail) < redialPause {
		err := d.lastErr
		d.mu.Unlock()
		return nil, err
	}
	d.mu.Unlock()
	s, err := d.dial(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			d.lastErr, d.lastFail = err, time.Now()
		}
		return nil, err
	}
	d.cur, d.lastErr = s, nil
	return s, nil
}

func (d *sessionDialer) current() *clientSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur != nil && d.cur.alive() {
		return d.cur
	}
	return nil
}

// close ends the current session: its calls in flight fail with
// api.ErrUnavailable; the next call dials a new one.
func (d *sessionDialer) close() {
	d.mu.Lock()
	s := d.cur
	d.cur = nil
	d.mu.Unlock()
	if s != nil {
		s.fail(errors.New("client closed"))
	}
}

// dial connects, upgrades and starts the session's reader.
func (d *sessionDialer) dial(ctx context.Context) (*clientSession, error) {
	ctx, cancel := context.WithTimeout(ctx, sessionDialTimeout)
	defer cancel()
	nd := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}}
	conn, err := nd.DialContext(ctx, "tcp", d.base.Host)
	if err != nil {
		return nil, d.unavailable(ctx, err)
	}
	if d.base.Scheme == "https" {
		conf := d.tls.Clone()
		if conf == nil {
			conf = &tls.Config{}
		}
		if conf.ServerName == "" {
			conf.ServerName = d.base.Hostname()
		}
		tc := tls.Client(conn, conf)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, d.unavailable(ctx, err)
		}
		conn = tc
	}
	br, err := d.upgrade(ctx, conn)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	s := &clientSession{conn: conn, w: wire.NewWriter(conn), pending: make(map[uint32]chan callResult)}
	go s.read(wire.NewReader(br, maxResponseFrame))
	return s, nil
}

// A failure to open a session means no call was sent on it
// (api.ErrNotSent): a client with several servers tries the next.
func (d *sessionDialer) unavailable(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return ctx.Err()
	}
	return fmt.Errorf("%w: session with %s: %w", api.ErrNotSent, d.base.Host, err)
}

// upgrade sends the upgrade request and reads the answer.
func (d *sessionDialer) upgrade(ctx context.Context, conn net.Conn) (*bufio.Reader, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	// (On success the deadline is cleared below only once the AfterFunc can
	// no longer fire, so a late cancel cannot poison the new session.)
	req := &http.Request{Method: http.MethodGet, URL: &url.URL{Scheme: d.base.Scheme, Host: d.base.Host, Path: strings.TrimRight(d.base.Path, "/") + wire.SessionPath}, Host: d.base.Host,
		Header: http.Header{"Connection": {"Upgrade"}, "Upgrade": {wire.Protocol}}}
	for k, v := range d.header {
		req.Header[k] = v
	}
	if d.token != "" {
		req.Header.Set("Authorization", "Bearer "+d.token)
	}
	if err := req.Write(conn); err != nil {
		return nil, d.unavailable(ctx, err)
	}
	br := bufio.NewReaderSize(conn, 64<<10)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, d.unavailable(ctx, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		_ = resp.Body.Close()
		if err := notTheAPI(d.base.Host, resp.StatusCode, resp.Header); err != nil {
			return nil, err
		}
		if resp.StatusCode == http.StatusNotFound {
			return nil, errNoSession
		}
		return nil, remoteError("session", resp.StatusCode, body)
	}
	if !stop() {
		return nil, d.unavailable(ctx, ctx.Err())
	}
	_ = conn.SetDeadline(time.Time{})
	return br, nil
}

// callResult is a call's answer: a msgpack response or an error.
type callResult struct {
	data []byte
	err  error
}

// clientSession is one upgraded connection with its calls in flight.
type clientSession struct {
	conn net.Conn
	w    *wire.Writer

	mu      sync.Mutex
	next    uint32
	pending map[uint32]chan callResult
	err     error
}

func (s *clientSession) alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err == nil
}

// call sends one call and waits for its answer or ctx. When ctx ends first
// the server is told to stop the call.
func (s *clientSession) call(ctx context.Context, method string, body []byte) ([]byte, error) {
	ch := make(chan callResult, 1)
	s.mu.Lock()
	if s.err != nil {
		err := s.err
		s.mu.Unlock()
		return nil, err
	}
	id := s.nextID()
	s.pending[id] = ch
	s.mu.Unlock()
	if err := s.w.Send(wire.KindCall, id, method, body); err != nil {
		var tooBig *wire.TooLargeError
		if errors.As(err, &tooBig) {
			s.forget(id)
			return nil, fmt.Errorf("%w: %s request of %d bytes is too large to send", api.ErrLimitExceeded, method, tooBig.Size)
		}
		s.fail(err) // answers ch
	}
	select {
	case r := <-ch:
		return r.data, r.err
	case <-ctx.Done():
		if strings.HasPrefix(method, "Poll") {
			return s.cancelPoll(ctx, id, ch)
		}
		if !s.forget(id) {
			// The answer came at the same moment: take it rather than drop
			// a task the server has handed out.
			r := <-ch
			return r.data, r.err
		}
		s.sendCancel(id)
		return nil, ctx.Err()
	}
}

// pollCancelGrace bounds how long a canceled poll waits for the server's
// answer to its cancel.
const pollCancelGrace = 5 * time.Second

// cancelPoll cancels a poll and waits for the server's answer, which it
// always sends: a task the server handed out before it saw the cancel
// comes back in it, and is returned rather than dropped (the caller gives
// it back, or runs it). Only a server that does not answer in
// pollCancelGrace loses it — to its lease, as with a dead connection.
func (s *clientSession) cancelPoll(ctx context.Context, id uint32, ch chan callResult) ([]byte, error) {
	s.sendCancel(id)
	t := time.NewTimer(pollCancelGrace)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err == nil {
			return r.data, nil
		}
	case <-t.C:
		if !s.forget(id) {
			if r := <-ch; r.err == nil {
				return r.data, nil
			}
		}
	}
	return nil, ctx.Err()
}

// sendCancel asks the server to stop call id.
func (s *clientSession) sendCancel(id uint32) {
	go func() {
		if err := s.w.Send(wire.KindCancel, id, "", nil); err != nil {
			s.fail(err) // frames queued behind this write must not wait for the reader to notice
		}
	}()
}

// nextID returns an id not in flight. Called with s.mu held.
func (s *clientSession) nextID() uint32 {
	for {
		s.next++
		if _, busy := s.pending[s.next]; s.next != 0 && !busy {
			return s.next
		}
	}
}

// forget stops waiting for call id; false when its answer already came.
func (s *clientSession) forget(id uint32) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[id]
	delete(s.pending, id)
	return ok
}

// read delivers answers until the connection ends.
func (s *clientSession) read(rd *wire.Reader) {
	for {
		f, err := rd.Read()
		var tooBig *wire.TooLargeError
		if errors.As(err, &tooBig) {
			s.deliver(tooBig.ID, callResult{err: fmt.Errorf("%w: response of %d bytes exceeds the client's limit", api.ErrInternal, tooBig.Size)})
			continue
		}
		if err != nil {
			s.fail(err)
			return
		}
		switch f.Kind {
		case wire.KindReply:
			s.deliver(f.ID, callResult{data: f.Body})
		case wire.KindFail:
			s.deliver(f.ID, callResult{err: failure(f.Body)})
		default:
			s.fail(fmt.Errorf("%w: the server sent a frame of kind %d", wire.ErrProtocol, f.Kind))
			return
		}
	}
}

// failure decodes a KindFail body.
func failure(body []byte) error {
	var eb api.ErrorBody
	if err := json.Unmarshal(body, &eb); err != nil || eb.Code == "" {
		return fmt.Errorf("%w: malformed error from the server: %q", api.ErrInternal, body)
	}
	return errorFromBody(eb)
}

func (s *clientSession) deliver(id uint32, r callResult) {
	s.mu.Lock()
	ch, ok := s.pending[id]
	delete(s.pending, id)
	s.mu.Unlock()
	if ok {
		ch <- r
	}
}

// fail ends the session: the connection is closed and every call in flight
// fails with api.ErrUnavailable (a worker retries it on the next session).
func (s *clientSession) fail(cause error) {
	s.mu.Lock()
	if s.err != nil {
		s.mu.Unlock()
		return
	}
	err := fmt.Errorf("%w: session ended: %w", api.ErrUnavailable, cause)
	s.err = err
	pending := s.pending
	s.pending = make(map[uint32]chan callResult)
	s.mu.Unlock()
	s.w.Fail(cause)
	_ = s.conn.Close()
	for _, ch := range pending {
		ch <- callResult{err: err}
	}
}
