package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// cairn runs the CLI without a server address (the offline commands).
func cairn(t *testing.T, args ...string) (string, int) {
	t.Helper()
	return cli(t, "", args...)
}

// TestBackupRestoreCheck: the operator's path. A backup of a running
// server holds what was committed when it was taken and nothing after;
// restore makes a new directory from it, checked; a server started there
// serves the runs, which go on to finish. A damaged backup is refused.
func TestBackupRestoreCheck(t *testing.T) {
	dir := t.TempDir()
	srv := server(t, filepath.Join(dir, "data"), "")
	addr := srv.Addr
	exampleWorker(t, hello(t), addr)
	mustCLI(t, addr, "workflow", "start", "--type", "Greeting", "--id", "greet-ada", "--task-queue", "hello", "--input", `"Ada"`)
	mustCLI(t, addr, "workflow", "start", "--type", "Greeting", "--id", "greet-bob", "--task-queue", "hello", "--input", `"Bob"`)
	mustCLI(t, addr, "workflow", "signal", "greet-bob", "--name", "approve", "--input", `"Grace"`)
	mustCLI(t, addr, "workflow", "result", "greet-bob")
	waitForEvent(t, addr, "greet-ada", history.TypeTimerStarted) // ada waits for her approval

	file := filepath.Join(dir, "copy.backup")
	if out := mustCLI(t, addr, "backup", "--out", file); !strings.Contains(out, "backup written to") {
		t.Fatalf("backup: %s", out)
	}
	if _, code := cli(t, addr, "backup", "--out", file); code != 2 {
		t.Fatalf("backup over an existing file: exit %d, want 2", code)
	}
	// After the backup: not in it.
	mustCLI(t, addr, "workflow", "start", "--type", "Greeting", "--id", "greet-cy", "--task-queue", "hello", "--input", `"Cy"`)
	if out, code := cairn(t, "check", "--data", filepath.Join(dir, "data")); code != 1 || !strings.Contains(out, "server is running") {
		t.Fatalf("check of a running server's directory: exit %d\n%s", code, out)
	}

	restored := filepath.Join(dir, "restored")
	out, code := cairn(t, "restore", "--from", file, "--data", restored)
	if code != 0 || !strings.Contains(out, "OK:") {
		t.Fatalf("restore: exit %d\n%s", code, out)
	}
	out, code = cairn(t, "check", "--data", restored, "--json")
	var report struct {
		Runs     int `json:"runs"`
		OpenRuns int `json:"openRuns"`
		Problems []struct {
			Kind string `json:"kind"`
		} `json:"problems"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &report) != nil || report.Runs != 2 || report.OpenRuns != 1 || len(report.Problems) != 0 {
		t.Fatalf("check --json: exit %d %+v\n%s", code, report, out)
	}
	srv.Kill()

	// Serve the restored copy: ada waits for her approval, bob is done, cy
	// never was.
	addr2 := server(t, restored, "").Addr
	exampleWorker(t, hello(t), addr2)
	list := mustCLI(t, addr2, "workflow", "list")
	if !strings.Contains(list, "greet-ada") || !strings.Contains(list, "greet-bob") || strings.Contains(list, "greet-cy") {
		t.Fatalf("restored list:\n%s", list)
	}
	mustCLI(t, addr2, "workflow", "signal", "greet-ada", "--name", "approve", "--input", `"Grace"`)
	if out := mustCLI(t, addr2, "workflow", "result", "greet-ada"); !strings.Contains(out, "Hello, Ada!") {
		t.Fatalf("result after restore: %s", out)
	}

	// A damaged backup is refused, and nothing is left behind.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	bad := filepath.Join(dir, "bad.backup")
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(dir, "from-bad")
	if out, code := cairn(t, "restore", "--from", bad, "--data", target); code != 3 || !strings.Contains(out, "bad backup file") {
		t.Fatalf("restore of a damaged backup: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore left %s: %v", target, err)
	}
}
