package engine

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// fillStore leaves n open runs (each with a scheduled activity, so a
// history of 4 events) and n closed ones in a store at dir.
func fillStore(b *testing.B, dir string, n int) {
	b.Helper()
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir, NoSync: true})
	if err != nil {
		b.Fatal(err)
	}
	eng, err := Open(Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 2*n; i += 16 {
				id := fmt.Sprintf("wf-%06d", i)
				if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: id}); err != nil {
					b.Error(err)
					return
				}
				task, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: id})
				if err != nil || task.Task == nil {
					b.Error(err)
					return
				}
				cmd := schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour})
				if i%2 == 1 {
					cmd = completeWF(`1`)
				}
				if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.Task.TaskToken,
					Commands: []api.Command{cmd}}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	_ = eng.Close()
	_ = st.Close()
}

// BenchmarkOpen10kOpenRuns: engine.Open over 10,000 open runs (and 10,000
// closed ones), including the check that each open run's history ends
// where its state says (one LastEventID per open run).
func BenchmarkOpen10kOpenRuns(b *testing.B) {
	dir := b.TempDir()
	fillStore(b, dir, 10000)
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	b.ResetTimer()
	for range b.N {
		eng, err := Open(Options{Store: st})
		if err != nil {
			b.Fatal(err)
		}
		if n := eng.Stats().OpenRuns; n != 10000 {
			b.Fatalf("%d open runs", n)
		}
		b.StopTimer()
		_ = eng.Close()
		b.StartTimer()
	}
}

// BenchmarkBackupRestoreCheck: a backup of a store of 20,000 runs, its
// restore into a new directory, and a check of the result; reports each
// phase's time and the backup's size.
func BenchmarkBackupRestoreCheck(b *testing.B) {
	dir := b.TempDir()
	fillStore(b, dir, 10000)
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	var backup, restore, check time.Duration
	var size int64
	b.ResetTimer()
	for i := range b.N {
		var buf bytes.Buffer
		t0 := time.Now()
		info, err := st.Backup(ctx, &buf)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		target := fmt.Sprintf("%s/restored-%d", b.TempDir(), i)
		if _, err := badgerstore.Restore(ctx, target, &buf, badgerstore.RestoreOptions{}); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		r, err := badgerstore.Open(badgerstore.Options{Dir: target})
		if err != nil {
			b.Fatal(err)
		}
		rep, err := Check(ctx, r)
		if err != nil || !rep.OK() || rep.Runs != 20000 {
			b.Fatalf("check: %+v %v", rep, err)
		}
		t3 := time.Now()
		_ = r.Close()
		backup, restore, check, size = backup+t1.Sub(t0), restore+t2.Sub(t1), check+t3.Sub(t2), info.Bytes
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((backup / n).Milliseconds()), "backup-ms")
	b.ReportMetric(float64((restore / n).Milliseconds()), "restore-ms")
	b.ReportMetric(float64((check / n).Milliseconds()), "check-ms")
	b.ReportMetric(float64(size)/(1<<20), "backup-MiB")
}
