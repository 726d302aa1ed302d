//go:build linux

package storage_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m) }

// startServer starts `cairn server` on data with args, logging at info
// level, and returns at once.
func startServer(t *testing.T, data string, args ...string) *testkit.Server {
	t.Helper()
	return testkit.LaunchServer(t, testkit.ServerOptions{Data: data, Args: append([]string{"--log-level", "info"}, args...)})
}

// ready waits for the server to be ready and returns its address.
func ready(t *testing.T, s *testkit.Server) string {
	t.Helper()
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("%v\n%s", err, s.Output())
	}
	return s.Addr
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
	exitErr := srv.Wait(t.Context())
	var exit *exec.ExitError
	if !errors.As(exitErr, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("server on a damaged directory: %v, want exit code 3\n%s", exitErr, srv.Output())
	}
	if out := srv.Output(); !strings.Contains(out, "refusing to serve") || !strings.Contains(out, "were acknowledged") {
		t.Fatalf("the log does not say why:\n%s", out)
	}
	srv = startServer(t, damaged, "--accept-data-loss")
	ready(t, srv)
	if out := srv.Output(); !strings.Contains(out, "the loss is recorded") {
		t.Fatalf("--accept-data-loss did not log the loss:\n%s", out)
	}
}
