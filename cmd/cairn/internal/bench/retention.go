package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/clock"
)

// RetentionOptions configure RunRetention.
type RetentionOptions struct {
	Out io.Writer
	// Runs is how many closed runs are created, then deleted.
	Runs int
	// Concurrency is how many runs are driven at once.
	Concurrency int
	// PayloadBytes is the size of each run's input and of its activity's
	// result (inline payloads, below the chunk threshold).
	PayloadBytes int
	// Dir holds the data (default: a temporary directory, removed).
	Dir string
	// SideEffect schedules the activity as a SideEffect: each run leaves
	// its effects-ledger entry (and a tombstone), which retention keeps.
	SideEffect bool
}

// RetentionResult is what RunRetention measured. Sizes are the bytes the
// data directory's files occupy on disk (allocated blocks), measured with
// the store closed.
type RetentionResult struct {
	Runs int `json:"runs"`
	// BaselineBytes: the data directory of an engine that has stored
	// nothing yet; PeakBytes after the runs were created and closed;
	// AfterBytes after the sweep deleted them and the store reclaimed
	// the space (badgerstore.Store.Reclaim).
	BaselineBytes int64 `json:"baseline_bytes"`
	PeakBytes     int64 `json:"peak_bytes"`
	AfterBytes    int64 `json:"after_bytes"`
	// AfterOverBaseline is AfterBytes/BaselineBytes - 1 (the goal: ≤ 0.20).
	AfterOverBaseline float64 `json:"after_over_baseline"`
	CreateSeconds     float64 `json:"create_seconds"`
	SweepSeconds      float64 `json:"sweep_seconds"`
	ReclaimSeconds    float64 `json:"reclaim_seconds"`
	Deleted           int     `json:"deleted"`
}

// RunRetention creates Runs closed one-activity runs on a fsynced Badger
// store through an embedded engine (the scripted worker in this process),
// lets their retention pass on a fake clock, sweeps, reclaims the space
// and compares the data directory's size with its size before the runs.
func RunRetention(ctx context.Context, o RetentionOptions) (*RetentionResult, error) {
	if o.Runs <= 0 || o.Concurrency <= 0 {
		return nil, fmt.Errorf("%w: runs and concurrency must be positive", api.ErrInvalidArgument)
	}
	dir := o.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "cairn-bench-retention-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	res := &RetentionResult{Runs: o.Runs}
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() (*badgerstore.Store, *engine.Engine, error) {
		st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
		if err != nil {
			return nil, nil, err
		}
		eng, err := engine.Open(engine.Options{Store: st, Clock: clk, Retention: time.Hour, PollTimeout: time.Second})
		if err != nil {
			_ = st.Close()
			return nil, nil, err
		}
		return st, eng, nil
	}
	closeBoth := func(st *badgerstore.Store, eng *engine.Engine) {
		_ = eng.Close()
		_ = st.Close()
	}
	measure := func(what string) (int64, error) {
		n, err := dirBytes(dir)
		if err == nil {
			fmt.Fprintf(o.Out, "%s: %.1f MB\n", what, float64(n)/1e6)
		}
		return n, err
	}

	st, eng, err := open()
	if err != nil {
		return nil, err
	}
	closeBoth(st, eng)
	if res.BaselineBytes, err = measure("baseline"); err != nil {
		return nil, err
	}

	if st, eng, err = open(); err != nil {
		return nil, err
	}
	start := time.Now()
	err = createClosedRuns(ctx, eng, o)
	res.CreateSeconds = time.Since(start).Seconds()
	closeBoth(st, eng)
	if err != nil {
		return nil, err
	}
	if res.PeakBytes, err = measure(fmt.Sprintf("%d closed runs", o.Runs)); err != nil {
		return nil, err
	}

	if st, eng, err = open(); err != nil {
		return nil, err
	}
	clk.Advance(2 * time.Hour)
	start = time.Now()
	rep, err := eng.SweepRetention(ctx)
	res.SweepSeconds = time.Since(start).Seconds()
	res.Deleted = rep.Deleted
	closeBoth(st, eng)
	if err != nil {
		return nil, err
	}
	// The sweep reclaimed what was in the tables; the deletes themselves
	// were still in the memtables, which closing flushed: reclaim again.
	start = time.Now()
	st, err = badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	err = st.Reclaim(ctx)
	_ = st.Close()
	res.ReclaimSeconds = time.Since(start).Seconds()
	if err != nil {
		return nil, err
	}
	if res.AfterBytes, err = measure("after the sweep"); err != nil {
		return nil, err
	}
	res.AfterOverBaseline = float64(res.AfterBytes)/float64(res.BaselineBytes) - 1
	return res, nil
}

// retentionQueue is the task queue of the runs RunRetention creates.
const retentionQueue = "retention"

// createClosedRuns drives o.Runs runs through one activity each to
// completion, o.Concurrency open at a time: starters, and scripted workers
// on one task queue (a workflow task schedules the activity, or completes
// the run once the activity completed).
func createClosedRuns(ctx context.Context, eng *engine.Engine, o RetentionOptions) error {
	payload := history.Payload{Encoding: "json", Data: fmt.Appendf(nil, "%q", make([]byte, max(o.PayloadBytes-2, 0)))}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	slots := make(chan struct{}, o.Concurrency) // one per open run
	var closed atomic.Int64
	var wg sync.WaitGroup
	loop := func(step func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && closed.Load() < int64(o.Runs) {
				if err := step(); err != nil && ctx.Err() == nil {
					cancel(err)
				}
			}
		}()
	}
	for range 8 {
		loop(func() error { return workflowStep(ctx, eng, payload, slots, &closed, o) })
		loop(func() error { return activityStep(ctx, eng, payload) })
	}
	for i := 1; i <= o.Runs; i++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		_, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: fmt.Sprintf("retention-%d", i), WorkflowType: "Bench",
			TaskQueue: retentionQueue, Input: payload})
		if err != nil {
			cancel(err)
			break
		}
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// workflowStep takes one workflow task: it schedules the activity, or
// completes the run once the activity completed.
func workflowStep(ctx context.Context, eng *engine.Engine, payload history.Payload, slots chan struct{}, closed *atomic.Int64, o RetentionOptions) error {
	resp, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: retentionQueue})
	if err != nil || resp.Task == nil {
		return err
	}
	done := false
	for _, ev := range resp.Task.Events {
		if ev.Type() == history.TypeActivityCompleted {
			done = true
		}
	}
	effect := history.Read
	if o.SideEffect {
		effect = history.SideEffect
	}
	cmd := api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1", ActivityType: "Echo",
		Input: payload, Effect: effect, Options: history.ActivityOptions{StartToCloseTimeout: time.Minute}}}
	if done {
		cmd = api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: payload}}
	}
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: resp.Task.TaskToken, Commands: []api.Command{cmd}}); err != nil {
		return err
	}
	if done {
		<-slots
		if n := closed.Add(1); n%10000 == 0 {
			fmt.Fprintf(o.Out, "%d runs\n", n)
		}
	}
	return nil
}

// activityStep completes one activity attempt with payload.
func activityStep(ctx context.Context, eng *engine.Engine, payload history.Payload) error {
	resp, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: retentionQueue})
	if err != nil || resp.Task == nil {
		return err
	}
	_, err = eng.CompleteActivity(ctx, &api.CompleteActivityRequest{TaskToken: resp.Task.TaskToken, Result: payload})
	return err
}

// dirBytes returns the disk space the files under dir occupy (allocated
// blocks, so preallocated and sparse files count what they hold).
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if s, ok := info.Sys().(*syscall.Stat_t); ok {
			n += s.Blocks * 512
		} else {
			n += info.Size()
		}
		return nil
	})
	return n, err
}
