//go:build linux

package storage_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

var cairnBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cairn-storage-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cairn")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/cairn").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// server is a `cairn server` child process.
type server struct {
	cmd     *exec.Cmd
	addr    chan string
	exited  chan struct{} // closed when the process has exited
	exitErr error
	mu      sync.Mutex
	log     []string
}

// output returns the server's log lines so far.
func (s *server) output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

func startServer(t *testing.T, data string, args ...string) *server {
	t.Helper()
	bin, err := cairnBin()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"server", "--data", data, "--listen", "127.0.0.1:0", "--ui-listen", "off", "--log-level", "info"}, args...)
	s := &server{cmd: exec.Command(bin, args...),
		addr: make(chan string, 1), exited: make(chan struct{})}
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			s.mu.Lock()
			s.log = append(s.log, sc.Text())
			s.mu.Unlock()
			var line struct{ Message, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "cairn server ready" {
				s.addr <- line.Listen
			}
		}
		s.exitErr = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
	return s
}

func (s *server) ready(t *testing.T) string {
	t.Helper()
	select {
	case a := <-s.addr:
		return a
	case <-s.exited:
		t.Fatalf("server exited before it was ready: %v\n%s", s.exitErr, s.output())
	case <-time.After(time.Minute):
		t.Fatal("server not ready within a minute")
	}
	return ""
}

// alive fails the test if the server process has exited.
func (s *server) alive(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("the server process is gone: %v\n%s", s.exitErr, s.output())
	default:
	}
}

// TestServerRefusesDamagedData: `cairn server` on a data directory whose
// WAL lost acknowledged commits logs why, exits with code 3, and starts
// with --accept-data-loss, which records the loss.
func TestServerRefusesDamagedData(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := st.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}}}); err != nil {
			t.Fatal(err)
		}
	}
	damaged := filepath.Join(t.TempDir(), "damaged")
	if err := copyDir(dir, damaged); err != nil { // as a kill -9 leaves it
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	mems, _ := filepath.Glob(filepath.Join(damaged, "*.mem"))
	if len(mems) == 0 {
		t.Fatal("no WAL in the copy")
	}
	n, err := usedExtent(mems[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(mems[0], n/2); err != nil { // lose the second half of the commits
		t.Fatal(err)
	}
	srv := startServer(t, damaged)
	<-srv.exited
	var exit *exec.ExitError
	if !errors.As(srv.exitErr, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("server on a damaged directory: %v, want exit code 3\n%s", srv.exitErr, srv.output())
	}
	if out := srv.output(); !strings.Contains(out, "refusing to serve") || !strings.Contains(out, "were acknowledged") {
		t.Fatalf("the log does not say why:\n%s", out)
	}
	srv = startServer(t, damaged, "--accept-data-loss")
	srv.ready(t)
	if out := srv.output(); !strings.Contains(out, "the loss is recorded") {
		t.Fatalf("--accept-data-loss did not log the loss:\n%s", out)
	}
}
