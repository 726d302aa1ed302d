//go:build unix

package crash_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/internal/crashpoint"
	"github.com/cairnflow/cairn/sdk/client"
)

// cairnBin is the cairn binary TestMain builds.
var cairnBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cairn-crash-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cairnBin = filepath.Join(dir, "cairn")
	build := exec.Command("go", "build", "-o", cairnBin, "../../cmd/cairn")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build cairn:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// server is a `cairn server` process.
type server struct {
	cmd    *exec.Cmd
	addr   string // "" when it died before it was ready
	exited chan struct{}
	log    strings.Builder
}

// startServer starts `cairn server` on dir, with crashAt (if set) armed,
// and waits until it is ready or has died.
func startServer(t *testing.T, dir, crashAt string) *server {
	t.Helper()
	s := &server{exited: make(chan struct{})}
	s.cmd = exec.Command(cairnBin, "server", "--data", dir, "--listen", "127.0.0.1:0", "--ui-listen", "off")
	s.cmd.Env = os.Environ()
	if crashAt != "" {
		s.cmd.Env = append(s.cmd.Env, crashpoint.EnvVar+"="+crashAt)
	}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		defer close(s.exited)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.log.WriteString(line + "\n")
			var l struct {
				Message string `json:"message"`
				Listen  string `json:"listen"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Message == "cairn server ready" {
				ready <- l.Listen
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = s.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
	select {
	case s.addr = <-ready:
	case <-s.exited:
	case <-time.After(waitFor):
		t.Fatalf("cairn server did not start:\n%s", s.log.String())
	}
	return s
}

// killedAtPoint waits for the server to die at its crash point.
func (s *server) killedAtPoint(t *testing.T, point string) {
	t.Helper()
	select {
	case <-s.exited:
	case <-time.After(waitFor):
		t.Fatalf("the server did not reach %s:\n%s", point, s.log.String())
	}
	ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || !strings.Contains(s.log.String(), "crashpoint: "+point) {
		t.Fatalf("the server ended with %v, not by SIGKILL at %s:\n%s", s.cmd.ProcessState, point, s.log.String())
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
			if s.addr != "" {
				c := dial(t, s.addr)
				stop = runWorker(t, c, p)
				go workload(c, a, finished)
			}
			select {
			case <-finished:
				stop()
				t.Skipf("the workload finished without reaching %s", at)
			case <-s.exited:
			}
			s.killedAtPoint(t, point)
			if stop != nil {
				stop()
			}
			s2 := startServer(t, dir, "")
			if s2.addr == "" {
				t.Fatalf("the server does not start after the crash:\n%s", s2.log.String())
			}
			c := dial(t, s2.addr)
			defer runWorker(t, c, p)()
			finishAndCheck(t, c, p, a)
		})
	}
}

func dial(t *testing.T, addr string) client.Client {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Identity: "crash-test"}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
