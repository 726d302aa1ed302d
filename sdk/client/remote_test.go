package client_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
)

func TestDialAddressForms(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != api.HTTPPrefix+"DescribeWorkflow" || r.Header.Get("Content-Type") != api.ContentMsgpack ||
			r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unexpected request", http.StatusTeapot)
			return
		}
		w.Header().Set("Content-Type", api.ContentMsgpack)
		_, _ = w.Write([]byte{0x80}) // an empty msgpack map: the zero response
	}))
	defer srv.Close()
	hostPort := strings.TrimPrefix(srv.URL, "http://")
	for _, addr := range []string{srv.URL, srv.URL + "/", hostPort} {
		c, err := client.Dial(addr, client.Options{}, client.DialOptions{Token: "tok", PlainHTTP: true})
		if err != nil {
			t.Fatalf("Dial(%q): %v", addr, err)
		}
		if _, err := c.DescribeWorkflow(context.Background(), "w", ""); err != nil {
			t.Fatalf("Dial(%q): %v", addr, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := client.Dial("", client.Options{}, client.DialOptions{}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("Dial(\"\"): %v", err)
	}
}

func TestRemoteTransportErrors(t *testing.T) {
	// Nothing listens: unavailable (workers retry it with backoff).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, err := client.Dial(addr, client.Options{}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.DescribeWorkflow(context.Background(), "w", "")
	if !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("no server: %v, want ErrUnavailable", err)
	}

	// The caller's context wins over the transport's error.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.DescribeWorkflow(ctx, "w", "")
	if !errors.Is(err, context.Canceled) || errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("canceled call: %v, want context.Canceled", err)
	}

	// Replies that are not the API's: a proxy's 502 is unavailable, a stray
	// 404 page an internal error; neither is mistaken for ErrNotFound.
	for _, tc := range []struct {
		status int
		want   error
	}{{http.StatusBadGateway, api.ErrUnavailable}, {http.StatusNotFound, api.ErrInternal}, {http.StatusOK, api.ErrInternal}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte("<html>not the API</html>"))
		}))
		c, err := client.Dial(srv.URL, client.Options{}, client.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.DescribeWorkflow(context.Background(), "w", "")
		if !errors.Is(err, tc.want) || errors.Is(err, api.ErrNotFound) {
			t.Fatalf("HTTP %d page: %v, want %v", tc.status, err, tc.want)
		}
		_ = c.Close()
		srv.Close()
	}
}

// TestDialFallsBackToPlainHTTP: a server that does not serve sessions (it
// answers the upgrade with 404) gets one HTTP request per call.
func TestDialFallsBackToPlainHTTP(t *testing.T) {
	var upgrades, calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.HTTPPrefix+"DescribeWorkflow" {
			calls.Add(1)
			w.Header().Set("Content-Type", api.ContentMsgpack)
			_, _ = w.Write([]byte{0x80})
			return
		}
		upgrades.Add(1)
		http.NotFound(w, r)
	}))
	defer srv.Close()
	c, err := client.Dial(srv.URL, client.Options{}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := 0; i < 3; i++ {
		if _, err := c.DescribeWorkflow(context.Background(), "w", ""); err != nil {
			t.Fatal(err)
		}
	}
	if upgrades.Load() != 1 || calls.Load() != 3 {
		t.Fatalf("%d upgrade attempts and %d plain calls, want 1 and 3", upgrades.Load(), calls.Load())
	}
}

// TestSeveralAddresses: a client given several servers sends its calls to
// one that answers, moving on at once past one it cannot reach (nothing
// was sent there).
func TestSeveralAddresses(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close() // nothing listens there now: connections are refused
	var calls atomic.Int32
	live := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == api.HTTPPrefix+"session" {
			http.NotFound(w, r) // no sessions here: plain requests
			return
		}
		calls.Add(1)
		w.Header().Set("Content-Type", api.ContentMsgpack)
		b, _ := api.MarshalMsgpack(&api.DescribeClusterResponse{Self: "live"})
		_, _ = w.Write(b)
	}))
	defer live.Close()
	for _, plain := range []bool{false, true} {
		calls.Store(0)
		svc, err := client.NewRemoteService(deadAddr+","+live.URL, client.DialOptions{PlainHTTP: plain})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			resp, err := svc.DescribeCluster(context.Background(), &api.DescribeClusterRequest{})
			if err != nil || resp.Self != "live" {
				t.Fatalf("plain=%v: %+v %v", plain, resp, err)
			}
		}
		if n := calls.Load(); n != 3 {
			t.Fatalf("plain=%v: the live server got %d calls, want 3", plain, n)
		}
		_ = svc.Close()
	}
	// Only unreachable servers: the call fails as not sent, which wraps
	// unavailable.
	svc, err := client.NewRemoteService(deadAddr+","+deadAddr, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	if _, err := svc.DescribeCluster(context.Background(), &api.DescribeClusterRequest{}); !errors.Is(err, api.ErrNotSent) || !errors.Is(err, api.ErrUnavailable) {
		t.Fatalf("no server reachable: %v, want ErrNotSent (ErrUnavailable)", err)
	}
}
