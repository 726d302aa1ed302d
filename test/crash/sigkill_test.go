//go:build unix

package crash_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/internal/crashpoint"
	"github.com/cairnflow/cairn/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// startServer starts `cairn server` on dir, with crashAt (if set) armed,
// and waits until it is ready (Addr is set) or has died (Addr is "").
func startServer(t *testing.T, dir, crashAt string) *testkit.Server {
	t.Helper()
	var env []string
	if crashAt != "" {
		env = append(env, crashpoint.EnvVar+"="+crashAt)
	}
	s := testkit.LaunchServer(t, testkit.ServerOptions{Data: dir, Env: env})
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := s.Ready(ctx); err != nil && !errors.Is(err, testkit.ErrExited) {
		t.Fatalf("cairn server did not start: %v\n%s", err, s.Output())
	}
	return s
}

// killedAtPoint waits for the server to die at its crash point.
func killedAtPoint(t *testing.T, s *testkit.Server, point string) {
	t.Helper()
	select {
	case <-s.Exited():
	case <-time.After(waitFor):
		t.Fatalf("the server did not reach %s:\n%s", point, s.Output())
	}
	ws, ok := s.State().Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !strings.Contains(s.Output(), "crashpoint: "+point) {
		t.Fatalf("the server ended with %v, not by SIGKILL at %s:\n%s", s.State(), point, s.Output())
	}
}

// TestCrashPointsSIGKILL: a real `cairn server` kills itself with SIGKILL
// at a crash point while payment workflows run against it (workers in
// this process, over the session transport); a new server process on the
// same directory takes over and the workload finishes, with every payment
// made at most once per key and nothing acknowledged lost.
func TestCrashPointsSIGKILL(t *testing.T) {
	for _, tr := range trials(t, listPoints(t)) {
		t.Run(tr.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			p := newProvider()
			a := &acks{ids: map[string]string{}}
			point, at := tr.point, tr.String()
			s := startServer(t, dir, at)
			var stop func()
			finished := make(chan struct{})
			if s.Addr != "" {
				c := testkit.Dial(t, s.Addr, "crash-test")
				stop = runWorker(t, c, p)
				go workload(c, a, finished)
			}
			select {
			case <-finished:
				stop()
				t.Skipf("the workload finished without reaching %s", at)
			case <-s.Exited():
			}
			killedAtPoint(t, s, point)
			if stop != nil {
				stop()
			}
			s2 := startServer(t, dir, "")
			if s2.Addr == "" {
				t.Fatalf("the server does not start after the crash:\n%s", s2.Output())
			}
			c := testkit.Dial(t, s2.Addr, "crash-test")
			defer runWorker(t, c, p)()
			finishAndCheck(t, c, p, a)
		})
	}
}
