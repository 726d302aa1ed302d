package badgerstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/third_party/badger"
	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/history"
)

// helperDirEnv tells the test binary, re-executed as a second process, to
// open the directory it names (see TestHelperProcess).
const helperDirEnv = "CAIRN_BADGERSTORE_HELPER_DIR"

// TestHelperProcess is not a test: it is the second process of
// TestLockedBySecondProcess. It opens the directory and prints the outcome.
func TestHelperProcess(t *testing.T) {
	dir := os.Getenv(helperDirEnv)
	if dir == "" {
		t.Skip("helper process for TestLockedBySecondProcess")
	}
	s, err := Open(Options{Dir: dir})
	switch {
	case errors.Is(err, history.ErrLocked):
		fmt.Printf("LOCKED: %v\n", err)
	case err != nil:
		fmt.Printf("ERROR: %v\n", err)
	default:
		fmt.Println("OPENED")
		_ = s.Close()
	}
}

// secondProcess runs the helper against dir and returns what it printed.
func secondProcess(t *testing.T, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang fails, it does not block
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperDirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper process: %v\n%s", err, out)
	}
	return string(out)
}

func TestLockedBySecondProcess(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	out := secondProcess(t, dir)
	if !strings.Contains(out, "LOCKED: ") || !strings.Contains(out, dir) {
		t.Fatalf("second process while the directory is open: want an error wrapping ErrLocked naming %s, got:\n%s", dir, out)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out := secondProcess(t, dir); !strings.Contains(out, "OPENED") {
		t.Fatalf("second process after Close: want it to open, got:\n%s", out)
	}
}

func TestLockedInProcess(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, history.ErrLocked) {
		t.Fatalf("second Open of %s = %v, want ErrLocked", dir, err)
	}
}

func TestOptionsValidate(t *testing.T) {
	good := []Options{
		{Dir: "x"},
		{InMemory: true},
		{Dir: "x", NoSync: true, MemTableSize: 64 << 20, NumMemTables: 5, MaxBatchBytes: 1},
	}
	for _, o := range good {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := []Options{
		{},
		{Dir: "x", InMemory: true},
		{Dir: "x", MemTableSize: 1 << 20},
		{Dir: "x", NumMemTables: 1},
		{Dir: "x", BlockCacheSize: -1},
		{Dir: "x", IndexCacheSize: -1},
		{Dir: "x", ValueLogFileSize: 1000},
		{Dir: "x", ValueLogFileSize: 4 << 30},
		{Dir: "x", MaxBatchBytes: -1},
	}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%+v: got %v, want ErrInvalidOptions", o, err)
		}
		if _, err := Open(o); !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Open(%+v): got %v, want ErrInvalidOptions", o, err)
		}
	}
}

func TestRefusesUnknownFormat(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(formatKey, []byte{9}) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, ErrFormat) {
		t.Fatalf("Open of a format-9 directory = %v, want ErrFormat", err)
	}
	// The refused open released the directory.
	s2, err := Open(Options{Dir: dir})
	if errors.Is(err, history.ErrLocked) {
		t.Fatalf("directory still locked after a refused open: %v", err)
	}
	if err == nil {
		_ = s2.Close()
	}
}

// syncBuffer is a bytes.Buffer safe for Badger's concurrent log calls.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestLoggerReceivesBadgerLogs(t *testing.T) {
	var buf syncBuffer
	log := zerolog.New(&buf)
	s := mustOpen(t, Options{Dir: t.TempDir(), Logger: &log})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"component":"badger"`) {
		t.Fatalf("no Badger log lines in:\n%s", buf.String())
	}
}

func TestValueTooLarge(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	defer s.Close()
	b := &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: []byte("k"), Value: make([]byte, 1<<20)}}}
	if err := s.Commit(bg, b); !errors.Is(err, history.ErrTooLarge) {
		t.Fatalf("1 MiB value in memory: got %v, want ErrTooLarge", err)
	}
}

// TestMissingEvent: an event missing inside a history, which the event
// checksums cannot see, is reported as ErrCorrupt naming the run and the
// event. (A missing last event simply shortens the history as the store
// sees it; the engine's run state, written with the events, names where the
// history must end, so an append then conflicts and a read comes back
// short: see engine.TestLostLastEventIsNoticed.)
func TestMissingEvent(t *testing.T) {
	s := mustOpen(t, Options{InMemory: true})
	defer s.Close()
	run := history.RunRef{WorkflowID: "wf", RunID: "r"}
	for id := int64(1); id <= 3; id++ {
		if err := s.Commit(bg, appendTo(run, id, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Delete(eventKey(eventPrefix(run), 2)) }); err != nil {
		t.Fatal(err)
	}
	_, err := s.ReadEvents(bg, run, 1, 0)
	var ce *history.CorruptError
	if !errors.As(err, &ce) || ce.EventID != 2 || ce.Run != run {
		t.Fatalf("ReadEvents with event 2 missing = %v, want a CorruptError for event 2", err)
	}

	// A record under a run's event prefix whose key is not an event id.
	other := history.RunRef{WorkflowID: "wf", RunID: "other"}
	bad := append(eventPrefix(other), 0xff)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(bad, []byte("junk")) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LastEventID(bg, other); !errors.Is(err, history.ErrCorrupt) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("LastEventID with a malformed event key = %v, want ErrCorrupt naming the run", err)
	}
	if err := s.Commit(bg, appendTo(other, 1, "x")); !errors.Is(err, history.ErrCorrupt) {
		t.Fatalf("append to a run with a malformed event key = %v, want ErrCorrupt", err)
	}
}

// TestLargeValueOnDisk: values of 1 MiB or more go through Badger's value
// log and still count little against the transaction limit.
//
// The value log is synced only by commits that write to it (the patch in
// third_party/badger); small commits after a large one, and a reopen, must
// still find everything.
func TestLargeValueOnDisk(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	big := bytes.Repeat([]byte("0123456789"), 300_000) // 3 MB: more than one transaction holds inline
	b := &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: []byte("k"), Value: big}}}
	if err := s.Commit(bg, b); err != nil {
		t.Fatal(err)
	}
	small := &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: []byte("small"), Value: []byte("v")}}}
	if err := s.Commit(bg, small); err != nil {
		t.Fatal(err)
	}
	check := func(s *Store) {
		t.Helper()
		if v, err := s.Get(bg, history.SpaceRunState, []byte("k")); err != nil || !bytes.Equal(v, big) {
			t.Fatalf("Get: %d bytes, %v", len(v), err)
		}
		if v, err := s.Get(bg, history.SpaceRunState, []byte("small")); err != nil || string(v) != "v" {
			t.Fatalf("Get small: %q, %v", v, err)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	check(s)
}
