package httpapi

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/wire"
	"github.com/cairnflow/cairn/sdk/client"
)

// gatedService blocks DescribeWorkflow until release is closed or the
// call's context ends, reporting which on ended.
type gatedService struct {
	*stubService
	entered chan struct{}
	release chan struct{}
	ended   chan error
}

func newGatedService() *gatedService {
	return &gatedService{stubService: &stubService{}, entered: make(chan struct{}, 16),
		release: make(chan struct{}), ended: make(chan error, 16)}
}

func (g *gatedService) DescribeWorkflow(ctx context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		g.ended <- nil
		return &api.DescribeWorkflowResponse{}, nil
	case <-ctx.Done():
		g.ended <- ctx.Err()
		return nil, ctx.Err()
	}
}

// sessionServer serves h and counts the connections upgraded to sessions.
func sessionServer(t *testing.T, h http.Handler) (addr string, hijacked func() []net.Conn) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateHijacked {
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return srv.URL, func() []net.Conn {
		mu.Lock()
		defer mu.Unlock()
		return append([]net.Conn(nil), conns...)
	}
}

func remote(t *testing.T, addr string) *client.RemoteService {
	t.Helper()
	rs, err := client.NewRemoteService(addr, client.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Close() })
	return rs
}

// describeAsync calls DescribeWorkflow in the background.
func describeAsync(ctx context.Context, rs *client.RemoteService) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := rs.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "w"})
		done <- err
	}()
	return done
}

// blockedCall serves a gatedService and returns with one DescribeWorkflow
// call blocked in it.
func blockedCall(t *testing.T) (*gatedService, *Handler, *client.RemoteService, func() []net.Conn, <-chan error) {
	t.Helper()
	svc := newGatedService()
	h := NewHandler(svc, Options{Token: token})
	addr, hijacked := sessionServer(t, h)
	rs := remote(t, addr)
	done := describeAsync(context.Background(), rs)
	<-svc.entered
	return svc, h, rs, hijacked, done
}

// TestSessionCarriesConcurrentCalls: many goroutines share one session;
// every call gets its own answer and typed errors keep their type.
func TestSessionCarriesConcurrentCalls(t *testing.T) {
	stub := &stubService{}
	addr, hijacked := sessionServer(t, NewHandler(stub, Options{Token: token}))
	rs := remote(t, addr)
	var (
		wg   sync.WaitGroup
		fail atomic.Value
	)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if _, err := rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: fmt.Sprint(g, "-", i)}); err != nil {
					fail.Store(err)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := fail.Load().(error); err != nil {
		t.Fatal(err)
	}
	if n := len(stub.calls); n != 32*25 {
		t.Fatalf("%d calls served, want %d", n, 32*25)
	}
	if n := len(hijacked()); n != 1 {
		t.Fatalf("%d sessions opened, want 1", n)
	}
	stub.setErr(api.Errorf(api.ErrNotFound, "no such workflow"))
	_, err := rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "x"})
	if !errors.Is(err, api.ErrNotFound) || !strings.Contains(err.Error(), "no such workflow") {
		t.Fatalf("error over the session: %v, want ErrNotFound with its message", err)
	}
}

// TestSessionCancelReachesServer: a call the client stops waiting for is
// canceled on the server (a long poll must not keep a task for a poller
// that left).
func TestSessionCancelReachesServer(t *testing.T) {
	svc := newGatedService()
	addr, _ := sessionServer(t, NewHandler(svc, Options{Token: token}))
	rs := remote(t, addr)
	ctx, cancel := context.WithCancel(context.Background())
	done := describeAsync(ctx, rs)
	<-svc.entered
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("client: %v, want context.Canceled", err)
	}
	if err := <-svc.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("server side of the call ended with %v, want context.Canceled", err)
	}
}

// TestSessionOversizedCall: a call over the body limit gets a typed limit
// error and the session goes on serving.
func TestSessionOversizedCall(t *testing.T) {
	stub := &stubService{}
	addr, hijacked := sessionServer(t, NewHandler(stub, Options{Token: token, MaxBodyBytes: 1024}))
	rs := remote(t, addr)
	big := &api.StartWorkflowRequest{WorkflowID: "w", Input: history.Payload{Encoding: "binary/plain", Data: make([]byte, 4096)}}
	_, err := rs.StartWorkflow(context.Background(), big)
	if !errors.Is(err, api.ErrLimitExceeded) || !strings.Contains(err.Error(), "1024 bytes") {
		t.Fatalf("oversized call: %v, want ErrLimitExceeded naming the limit", err)
	}
	if _, err := rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "w"}); err != nil {
		t.Fatalf("call after the oversized one: %v", err)
	}
	if n := len(hijacked()); n != 1 {
		t.Fatalf("%d sessions opened, want the first one to keep serving", n)
	}
	if m, _ := stub.lastCall(); m != "DescribeWorkflow" || len(stub.calls) != 1 {
		t.Fatalf("calls served %v: the oversized one must not run", stub.calls)
	}
}

// rawSession upgrades a plain TCP connection, as a client that speaks the
// protocol by hand would.
func rawSession(t *testing.T, addr string, hdr string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n", wire.SessionPath, hdr)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	return conn, br, resp
}

// TestSessionProtocolViolation: a frame of an unknown kind closes that
// connection; the server goes on serving others.
func TestSessionProtocolViolation(t *testing.T) {
	stub := &stubService{}
	addr, _ := sessionServer(t, NewHandler(stub, Options{Token: token}))
	conn, br, resp := rawSession(t, addr, "Connection: Upgrade\r\nUpgrade: "+wire.Protocol+"\r\nAuthorization: Bearer "+token+"\r\n")
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %s", resp.Status)
	}
	frame := binary.BigEndian.AppendUint32(nil, 5)
	frame = append(frame, 9, 0, 0, 0, 1) // kind 9, id 1
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	if n, err := br.Read(make([]byte, 1)); err == nil {
		t.Fatalf("server answered %d bytes to a bad frame instead of closing", n)
	}
	if _, err := remote(t, addr).DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "w"}); err != nil {
		t.Fatalf("server stopped serving after a bad session: %v", err)
	}
}

// TestSessionUpgradeRefusals: the session route needs the token and an
// Upgrade.
func TestSessionUpgradeRefusals(t *testing.T) {
	addr, _ := sessionServer(t, NewHandler(&stubService{}, Options{Token: token}))
	for _, tc := range []struct {
		name, hdr string
		want      int
		code      api.Code
	}{
		{"no token", "Connection: Upgrade\r\nUpgrade: " + wire.Protocol + "\r\n", 401, api.CodeUnauthenticated},
		{"wrong token", "Connection: Upgrade\r\nUpgrade: " + wire.Protocol + "\r\nAuthorization: Bearer nope\r\n", 401, api.CodeUnauthenticated},
		{"no upgrade", "Authorization: Bearer " + token + "\r\n", 426, api.CodeInvalidArgument},
		{"other protocol", "Connection: Upgrade\r\nUpgrade: websocket\r\nAuthorization: Bearer " + token + "\r\n", 426, api.CodeInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, resp := rawSession(t, addr, tc.hdr)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want || !strings.Contains(string(body), string(tc.code)) {
				t.Fatalf("%s: %s %s, want %d %s", tc.name, resp.Status, body, tc.want, tc.code)
			}
		})
	}
}

// TestSessionShutdownAnswersCallsInFlight: Shutdown lets a call in flight
// finish and answer, then closes the session; later calls are refused.
func TestSessionShutdownAnswersCallsInFlight(t *testing.T) {
	svc, h, rs, _, done := blockedCall(t)
	shut := make(chan error, 1)
	go func() { shut <- h.Shutdown(context.Background()) }()
	for !h.sess.isClosing() {
		runtime.Gosched()
	}
	close(svc.release)
	if err := <-done; err != nil {
		t.Fatalf("call in flight during shutdown: %v, want its answer", err)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	_, err := rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "w"})
	if !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("call after shutdown: %v, want ErrUnavailable", err)
	}
}

// TestSessionShutdownDeadline: when Shutdown's context ends first, the
// calls are canceled and their clients learn the server is unavailable.
func TestSessionShutdownDeadline(t *testing.T) {
	svc, h, _, _, done := blockedCall(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := h.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v, want context.Canceled", err)
	}
	if err := <-svc.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("server side of the call: %v, want canceled", err)
	}
	if err := <-done; !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("client: %v, want ErrUnavailable", err)
	}
}

// TestSessionBrokenConnection: calls in flight on a connection that breaks
// fail with ErrUnavailable (workers retry them); the next call opens a new
// session.
func TestSessionBrokenConnection(t *testing.T) {
	svc, _, rs, hijacked, done := blockedCall(t)
	for _, c := range hijacked() {
		_ = c.Close()
	}
	if err := <-done; !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("call on a broken session: %v, want ErrUnavailable", err)
	}
	if err := <-svc.ended; !errors.Is(err, context.Canceled) {
		t.Fatalf("server side of the call: %v, want canceled with its connection", err)
	}
	close(svc.release)
	if _, err := rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "w"}); err != nil {
		t.Fatalf("call after reconnecting: %v", err)
	}
	if n := len(hijacked()); n != 2 {
		t.Fatalf("%d sessions, want a second one", n)
	}
}

const upgradeHdr = "Connection: Upgrade\r\nUpgrade: " + wire.Protocol + "\r\nAuthorization: Bearer " + token + "\r\n"

// waitClosed waits until the server closes conn (a read returns an error
// other than the client's own deadline, which bounds the wait).
func waitClosed(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := br.ReadByte(); err == nil || isTimeout(err) {
		t.Fatalf("the server did not close the session: %v", err)
	}
}

// TestSessionCap: past MaxSessions an upgrade is refused with 503
// (unavailable); a session closing makes room again.
func TestSessionCap(t *testing.T) {
	h := NewHandler(&stubService{}, Options{Token: token, MaxSessions: 2})
	addr, _ := sessionServer(t, h)
	var conns []net.Conn
	for range 2 {
		c, _, resp := rawSession(t, addr, upgradeHdr)
		if resp.StatusCode != http.StatusSwitchingProtocols {
			t.Fatalf("upgrade: %s", resp.Status)
		}
		conns = append(conns, c)
	}
	_, _, resp := rawSession(t, addr, upgradeHdr)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), string(api.CodeUnavailable)) {
		t.Fatalf("third session: %s %s, want 503 unavailable", resp.Status, body)
	}
	_ = conns[0].Close()
	for {
		h.sess.mu.Lock()
		n := h.sess.count
		h.sess.mu.Unlock()
		if n < 2 {
			break
		}
		runtime.Gosched()
	}
	if _, _, resp := rawSession(t, addr, upgradeHdr); resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade after one closed: %s", resp.Status)
	}
}

// TestSessionIdleIsClosed: a silent session with no call in flight is
// closed after SessionIdleTimeout; one whose call is in flight (a long
// poll) is not, however long it stays silent.
func TestSessionIdleIsClosed(t *testing.T) {
	svc := newGatedService()
	const idle = 20 * time.Millisecond
	h := NewHandler(svc, Options{Token: token, SessionIdleTimeout: idle})
	addr, _ := sessionServer(t, h)
	conn, br, _ := rawSession(t, addr, upgradeHdr)
	waitClosed(t, conn, br)

	busy, bbr, _ := rawSession(t, addr, upgradeHdr)
	w := wire.NewWriter(busy)
	body, _ := api.MarshalMsgpack(&api.DescribeWorkflowRequest{WorkflowID: "w"})
	if err := w.Send(wire.KindCall, 1, "DescribeWorkflow", body); err != nil {
		t.Fatal(err)
	}
	<-svc.entered
	// The call is held over several idle timeouts (the server's reader
	// wakes at each and finds it in flight), then answered on the same
	// session.
	for h.sess.busyWakes.Load() < 3 {
		runtime.Gosched()
	}
	close(svc.release)
	f, err := wire.NewReader(bbr, 1<<20).Read()
	if err != nil || f.Kind != wire.KindReply || f.ID != 1 {
		t.Fatalf("reply on the busy session: %+v %v", f, err)
	}
	waitClosed(t, busy, bbr) // idle again: closed
}

// TestSessionStalledFrameIsCut: a peer that sends part of a frame and
// stops is disconnected after SessionFrameTimeout; the server goes on.
func TestSessionStalledFrameIsCut(t *testing.T) {
	h := NewHandler(&stubService{}, Options{Token: token, SessionFrameTimeout: 20 * time.Millisecond})
	addr, _ := sessionServer(t, h)
	conn, br, _ := rawSession(t, addr, upgradeHdr)
	var head [9]byte
	binary.BigEndian.PutUint32(head[:4], 1<<20)
	head[4] = byte(wire.KindCall)
	if _, err := conn.Write(append(head[:], "\x10DescribeWorkflow"...)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, conn, br)
	if _, err := remote(t, addr).DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "w"}); err != nil {
		t.Fatalf("server stopped serving: %v", err)
	}
}

// describeOfSize returns a DescribeWorkflow request whose encoding, with
// the call frame's method, is exactly n bytes after the frame header.
func describeOfSize(t *testing.T, n int) []byte {
	t.Helper()
	const method = "DescribeWorkflow"
	for k := 0; k < n; k++ {
		body, _ := api.MarshalMsgpack(&api.DescribeWorkflowRequest{WorkflowID: strings.Repeat("y", k)})
		if 1+len(method)+len(body) == n {
			return body
		}
	}
	t.Fatalf("no request of %d bytes", n)
	return nil
}

// TestSessionFrameLimitBoundary: frames of limit−1 and limit bytes are
// served; limit+1 is answered limit_exceeded without reaching the
// service, and the session goes on.
func TestSessionFrameLimitBoundary(t *testing.T) {
	const limit = 1024
	stub := &stubService{}
	addr, _ := sessionServer(t, NewHandler(stub, Options{Token: token, MaxBodyBytes: limit}))
	conn, br, _ := rawSession(t, addr, upgradeHdr)
	w, rd := wire.NewWriter(conn), wire.NewReader(br, 1<<20)
	for i, n := range []int{limit - 1, limit, limit + 1} {
		id := uint32(i + 1)
		if err := w.Send(wire.KindCall, id, "DescribeWorkflow", describeOfSize(t, n)); err != nil {
			t.Fatal(err)
		}
		f, err := rd.Read()
		if err != nil || f.ID != id {
			t.Fatalf("frame of %d: %+v %v", n, f, err)
		}
		served := stub.count()
		switch {
		case n <= limit && (f.Kind != wire.KindReply || served != i+1):
			t.Fatalf("frame of %d bytes (limit %d): kind %d %s, %d calls served", n, limit, f.Kind, f.Body, served)
		case n > limit && (f.Kind != wire.KindFail || !strings.Contains(string(f.Body), string(api.CodeLimitExceeded)) || served != 2):
			t.Fatalf("frame of %d bytes (limit %d): kind %d %s, %d calls served", n, limit, f.Kind, f.Body, served)
		}
	}
}

// TestRequestBodyLimitBoundary: plain requests of limit−1 and limit bytes
// are served; limit+1 is 413 limit_exceeded and never reaches the service.
func TestRequestBodyLimitBoundary(t *testing.T) {
	const limit = 1024
	stub := &stubService{}
	addr, _ := sessionServer(t, NewHandler(stub, Options{Token: token, MaxBodyBytes: limit}))
	for i, n := range []int{limit - 1, limit, limit + 1} {
		body := []byte(`{"WorkflowID":"` + strings.Repeat("y", n-len(`{"WorkflowID":""}`)) + `"}`)
		req, _ := http.NewRequest("POST", addr+Prefix+"DescribeWorkflow", strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", ContentJSON)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		served := stub.count()
		switch {
		case n <= limit && (resp.StatusCode != 200 || served != i+1):
			t.Fatalf("body of %d bytes (limit %d): %s %s", n, limit, resp.Status, out)
		case n > limit && (resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(out), string(api.CodeLimitExceeded)) || served != 2):
			t.Fatalf("body of %d bytes (limit %d): %s %s, %d served", n, limit, resp.Status, out, served)
		}
	}
}
