//go:build linux

package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
)

// smallFS mounts a tmpfs of size bytes for the test (as root; skipped with
// a message otherwise) and returns its path.
func smallFS(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the disk-full tests mount a small tmpfs, which needs root")
	}
	mnt := filepath.Join(t.TempDir(), "fs")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the disk-full tests need one", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// filler takes the free space of fs's filesystem down to leave bytes.
type filler struct {
	t    *testing.T
	path string
}

func fill(t *testing.T, fs string, leave int64) *filler {
	t.Helper()
	f := &filler{t: t, path: filepath.Join(fs, "filler")}
	f.to(leave)
	return f
}

// to grows (or shrinks) the filler until leave bytes are free.
func (f *filler) to(leave int64) {
	f.t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(f.path), &st); err != nil {
		f.t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	fi, err := os.Stat(f.path)
	size := int64(0)
	if err == nil {
		size = fi.Size()
	}
	target := max(size+free-leave, 0)
	if target < size {
		if err := os.Truncate(f.path, target); err != nil {
			f.t.Fatal(err)
		}
		return
	}
	fd, err := os.OpenFile(f.path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		f.t.Fatal(err)
	}
	defer fd.Close()
	if target > size {
		if err := unix.Fallocate(int(fd.Fd()), 0, size, target-size); err != nil && !errors.Is(err, unix.ENOSPC) {
			f.t.Fatal(err)
		}
	}
}

func (f *filler) remove() {
	if err := os.Remove(f.path); err != nil {
		f.t.Fatal(err)
	}
}

// TestDiskFullEngine runs payment workflows on a 64 MiB filesystem, fills
// it, and checks that writes fail with api.ErrResourceExhausted ("resource
// exhausted: disk full") while reads go on, that writes resume by
// themselves once space returns, and that nothing acknowledged is lost.
func TestDiskFullEngine(t *testing.T) {
	fs := smallFS(t, 64<<20)
	dir := filepath.Join(fs, "data")
	e := startEnvOpts(t, badgerstore.Options{Dir: dir, MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20, SpaceCheckInterval: -1})
	var done []string
	for i := range 5 {
		inv := Invoice{ID: fmt.Sprintf("F%03d", i), Amount: i, Mode: "pay"}
		if err := e.start(t, inv).Get(bg, nil); err != nil {
			t.Fatal(err)
		}
		done = append(done, "invoice-"+inv.ID)
	}
	f := fill(t, fs, 4<<20) // below the default floor (3 × 8 MiB)
	_, err := e.c.StartWorkflow(bg, client.StartOptions{ID: "invoice-full", TaskQueue: queue}, PayInvoice, Invoice{ID: "full", Mode: "pay"})
	if !errors.Is(err, api.ErrResourceExhausted) || !strings.Contains(err.Error(), "resource exhausted: disk full") {
		t.Fatalf("start on a full disk: %v, want api.ErrResourceExhausted (resource exhausted: disk full)", err)
	}
	if code := api.ErrorCode(err); code != api.CodeResourceExhausted {
		t.Fatalf("code %q, want %q", code, api.CodeResourceExhausted)
	}
	for _, wf := range done { // reads go on
		d, err := e.c.DescribeWorkflow(bg, wf, "")
		if err != nil || d.Info.Status != api.StatusCompleted {
			t.Fatalf("describe %s on a full disk: %v, %v", wf, d, err)
		}
	}
	f.remove()
	run := e.start(t, Invoice{ID: "after", Mode: "pay"}) // resumes by itself
	if err := run.Get(bg, nil); err != nil {
		t.Fatal(err)
	}
	done = append(done, "invoice-after")
	e.close(t)
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir, MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	for _, wf := range done {
		d, err := eng.DescribeWorkflow(bg, &api.DescribeWorkflowRequest{WorkflowID: wf})
		if err != nil || d.Info.Status != api.StatusCompleted {
			t.Fatalf("after reopening, %s: %+v, %v", wf, d, err)
		}
	}
}

// TestDiskFullBadger fills the filesystem completely with the store's
// free-space floor turned off, so that Badger itself runs out of space
// (its WAL, memtable rotations, flushes), and commits until it does:
// every failure is history.ErrNoSpace, the process does not crash (it
// would get SIGBUS writing a memory-mapped file on a full disk), and every
// acknowledged commit is there after space returns and the store reopens.
func TestDiskFullBadger(t *testing.T) {
	fs := smallFS(t, 48<<20)
	dir := filepath.Join(fs, "data")
	opts := badgerstore.Options{Dir: dir, MemTableSize: 8 << 20, ValueLogFileSize: 1 << 20, MinFreeBytes: -1}
	st, err := badgerstore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	f := fill(t, fs, 0)
	run := history.RunRef{WorkflowID: "wf", RunID: "r"}
	value := []byte(strings.Repeat("v", 4000))
	var acked int64
	var fails int
	for i := int64(1); fails < 20 && i < 100_000; i++ {
		err := st.Commit(bg, &history.Batch{
			Appends: []history.Append{{Run: run, ExpectedNext: acked + 1, Events: []history.Event{marker(acked+1, value)}}},
			Puts:    []history.Record{{Space: history.SpaceRunState, Key: []byte("wf"), Value: fmt.Appendf(nil, "%d", acked+1)}},
		})
		switch {
		case err == nil:
			acked++
		case errors.Is(err, history.ErrNoSpace):
			fails++
		default:
			t.Fatalf("commit %d on a full disk: %v, want history.ErrNoSpace", i, err)
		}
	}
	if fails == 0 {
		t.Fatalf("%d commits on a full 48 MiB filesystem and none failed", acked)
	}
	t.Logf("%d commits acknowledged before the disk was full, then %d refused with ErrNoSpace", acked, fails)
	if got, err := st.Get(bg, history.SpaceRunState, []byte("wf")); err != nil || string(got) != fmt.Sprint(acked) {
		t.Fatalf("read on a full disk: %q, %v; want %d", got, err, acked)
	}
	f.remove()
	// A commit stalled behind a failed flush waits for the flusher's next
	// attempt (Badger retries each second), so a few tries are enough.
	var resumed error
	for range 5 {
		resumed = st.Commit(bg, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: acked + 1, Events: []history.Event{marker(acked+1, value)}}}})
		if resumed == nil {
			acked++
			break
		}
		if !errors.Is(resumed, history.ErrNoSpace) {
			t.Fatal(resumed)
		}
	}
	if resumed != nil {
		t.Fatalf("commits did not resume once space returned: %v", resumed)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st, err = badgerstore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.ReadEvents(bg, run, 1, 0)
	if err != nil || int64(len(evs)) != acked {
		t.Fatalf("after reopening: %d events, %v; want every acknowledged one (%d)", len(evs), err, acked)
	}
}

func marker(id int64, v []byte) history.Event {
	return history.Event{ID: id, Time: time.Unix(1, 0), Attrs: &history.MarkerRecorded{Name: "m", Data: history.Payload{Encoding: "raw", Data: v}}}
}

// TestDiskFullServer runs a real `cairn server` process on a small
// filesystem: a full disk fails writes with resource_exhausted while the
// process keeps serving reads; writes resume when space returns; and the
// server starts on a full disk.
func TestDiskFullServer(t *testing.T) {
	fs := smallFS(t, 96<<20)
	data := filepath.Join(fs, "data")
	srv := startServer(t, data)
	c, err := client.Dial(ready(t, srv), client.Options{Identity: "diskfull"}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	startRun := func(id string) error {
		_, err := c.StartWorkflow(bg, client.StartOptions{ID: id, TaskQueue: queue}, "PayInvoice", Invoice{ID: id, Mode: "pay"})
		return err
	}
	if err := startRun("before"); err != nil {
		t.Fatal(err)
	}
	f := fill(t, fs, 1<<20)
	for i := range 20 {
		err := startRun(fmt.Sprintf("full-%d", i))
		if !errors.Is(err, api.ErrResourceExhausted) {
			t.Fatalf("start %d on a full disk: %v, want resource_exhausted", i, err)
		}
	}
	srv.Running()
	if d, err := c.DescribeWorkflow(bg, "before", ""); err != nil || d.Info.Status != api.StatusRunning {
		t.Fatalf("describe on a full disk: %+v, %v", d, err)
	}
	f.remove()
	if err := startRun("after"); err != nil {
		t.Fatalf("start once space returned: %v", err)
	}
	// Restart on a completely full disk.
	_ = srv.Signal(syscall.SIGTERM)
	<-srv.Exited()
	c.Close()
	f = fill(t, fs, 0)
	srv = startServer(t, data)
	c, err = client.Dial(ready(t, srv), client.Options{Identity: "diskfull"}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, id := range []string{"before", "after"} {
		if d, err := c.DescribeWorkflow(bg, id, ""); err != nil || d.Info.Status != api.StatusRunning {
			t.Fatalf("describe %s after starting on a full disk: %+v, %v", id, d, err)
		}
	}
	if err := startRun("still-full"); !errors.Is(err, api.ErrResourceExhausted) {
		t.Fatalf("start on a full disk after a restart: %v, want resource_exhausted", err)
	}
	f.remove()
	if err := startRun("resumed"); err != nil {
		t.Fatalf("start once space returned after a restart: %v", err)
	}
	srv.Running()
}
