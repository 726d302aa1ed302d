package badgerstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

var (
	runA = history.RunRef{WorkflowID: "a", RunID: "1"}
	runZ = history.RunRef{WorkflowID: "zz", RunID: "1"}
)

// commitStep appends event n to runA and runZ and records n, in one batch.
func commitStep(ctx context.Context, s history.Store, n int64) error {
	ev := func() []history.Event {
		return []history.Event{{ID: n, Time: time.Unix(n, 0).UTC(), Attrs: &history.TimerFired{TimerID: fmt.Sprint("t", n)}}}
	}
	return s.Commit(ctx, &history.Batch{
		Appends: []history.Append{{Run: runA, ExpectedNext: n, Events: ev()}, {Run: runZ, ExpectedNext: n, Events: ev()}},
		Puts:    []history.Record{{Space: history.SpaceMeta, Key: []byte("last"), Value: binary.BigEndian.AppendUint64(nil, uint64(n))}},
	})
}

// TestBackupIsOneSnapshot: a backup taken while commits run holds each of
// them whole or not at all — the two runs' histories and the record agree.
func TestBackupIsOneSnapshot(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, Options{Dir: t.TempDir()})
	defer s.Close()
	for n := int64(1); n <= 50; n++ {
		if err := commitStep(ctx, s, n); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	var writes int64
	go func() {
		defer wg.Done()
		for n := int64(51); ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			if err := commitStep(ctx, s, n); err != nil {
				t.Error(err)
				return
			}
			writes = n
		}
	}()
	var buf bytes.Buffer
	info, err := s.Backup(ctx, &buf)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if info.Bytes != int64(buf.Len()) || info.Events < 100 || info.Seq == 0 || len(info.SHA256) != 64 {
		t.Fatalf("info %+v (file %d bytes)", info, buf.Len())
	}
	dir := filepath.Join(t.TempDir(), "restored")
	got, err := Restore(ctx, dir, bytes.NewReader(buf.Bytes()), RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.SHA256 != info.SHA256 || got.Events != info.Events || got.Seq != info.Seq {
		t.Fatalf("restore read %+v, backup wrote %+v", got, info)
	}
	r := mustOpen(t, Options{Dir: dir})
	defer r.Close()
	marks, _, err := history.DoubtMarks(ctx, r)
	if err != nil || len(marks) != 1 || marks[0].Source != history.DoubtRestore || !strings.Contains(marks[0].Reason, "restored from the backup") {
		t.Fatalf("the restored store's doubt marks: %+v, %v", marks, err)
	}
	lastA, _ := r.LastEventID(ctx, runA)
	lastZ, _ := r.LastEventID(ctx, runZ)
	rec, err := r.Get(ctx, history.SpaceMeta, []byte("last"))
	if err != nil {
		t.Fatal(err)
	}
	n := int64(binary.BigEndian.Uint64(rec))
	if lastA != n || lastZ != n || n < 50 {
		t.Fatalf("restored: run a at %d, run zz at %d, record %d (writer reached %d)", lastA, lastZ, n, writes)
	}
	if evs, err := r.ReadEvents(ctx, runZ, 1, 0); err != nil || int64(len(evs)) != n {
		t.Fatalf("restored history: %d events, %v", len(evs), err)
	}
	// The restored store goes on: commits, and a reopen with its checks.
	if err := commitStep(ctx, r, n+1); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	r2 := mustOpen(t, Options{Dir: dir})
	if last, _ := r2.LastEventID(ctx, runA); last != n+1 {
		t.Fatalf("after reopen: %d", last)
	}
	_ = r2.Close()
}

// TestRestoreRefusesDamagedBackups: a flipped byte, a cut file, another
// file, a non-empty target: refused, and the target left as it was.
func TestRestoreRefusesDamagedBackups(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, Options{Dir: t.TempDir()})
	for n := int64(1); n <= 20; n++ {
		if err := commitStep(ctx, s, n); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := s.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	good := buf.Bytes()
	flipped := bytes.Clone(good)
	flipped[len(flipped)/2] ^= 0x01
	for name, data := range map[string][]byte{
		"flipped byte":    flipped,
		"cut in half":     good[:len(good)/2],
		"cut before hash": good[:len(good)-10],
		"trailing bytes":  append(bytes.Clone(good), 0),
		"not a backup":    []byte("hello, world"),
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restored")
			_, err := Restore(ctx, dir, bytes.NewReader(data), RestoreOptions{})
			if !errors.Is(err, ErrBackup) {
				t.Fatalf("Restore: %v, want ErrBackup", err)
			}
			if _, serr := os.Stat(dir); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("the target exists after a refused restore: %v", serr)
			}
			left, _ := os.ReadDir(filepath.Dir(dir))
			if len(left) != 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Restore(ctx, full, bytes.NewReader(good), RestoreOptions{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}
	// An existing empty directory is fine.
	empty := t.TempDir()
	if _, err := Restore(ctx, empty, bytes.NewReader(good), RestoreOptions{}); err != nil {
		t.Fatalf("restore into an empty directory: %v", err)
	}
}

// TestBackupStopsWithItsContext: a canceled backup returns the context's
// error (the incomplete file is refused by Restore, as above).
func TestBackupStopsWithItsContext(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir()})
	defer s.Close()
	for n := int64(1); n <= 5; n++ {
		if err := commitStep(context.Background(), s, n); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Backup(ctx, &bytes.Buffer{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Backup: %v", err)
	}
}
