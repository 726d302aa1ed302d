package filelock_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/cairnflow/cairn/internal/filelock"
)

// TestMain runs the helper process's loop when re-executed as one.
func TestMain(m *testing.M) {
	if path := os.Getenv("FILELOCK_COUNTER"); path != "" {
		if err := increment(path, 50); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// increment adds 1 to the number in path, n times, each a
// read-modify-write under the lock.
func increment(path string, n int) error {
	for range n {
		err := filelock.With(path, func() error {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			v, _ := strconv.Atoi(strings.TrimSpace(string(b))) // empty: 0
			return os.WriteFile(path, []byte(strconv.Itoa(v+1)), 0o644)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Processes and goroutines incrementing one counter under the lock lose
// no increment.
func TestProcessesAndGoroutinesExcludeEachOther(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock: only goroutines exclude each other")
	}
	path := filepath.Join(t.TempDir(), "counter")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const procs, goroutines = 3, 3
	var wg sync.WaitGroup
	for range procs {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), "FILELOCK_COUNTER="+path)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("helper: %v\n%s", err, out)
			}
		}()
	}
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := increment(path, 50); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa((procs+goroutines)*50); got != want {
		t.Fatalf("counter %s, want %s", got, want)
	}
}
