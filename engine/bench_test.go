//go:build unix

package engine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// Benchmarks of the engine with the real clock on an on-disk Badger store
// with fsync on (every acknowledged transition is durable). Run them with
//
//	go test -run '^$' -bench OneActivity -benchtime 20000x ./engine
//	go test -run '^$' -bench 'PollToDispatch|Timer1ms' -benchtime 2000x ./engine
//
// They are not run by plain `go test`.

// timedStore records when each commit began and returned, and when the
// last commit that appended a TimerFired event returned.
type timedStore struct {
	history.Store
	lastBegin  atomic.Int64 // unix nanos
	lastCommit atomic.Int64
	lastFired  atomic.Int64
	firedMu    sync.Mutex
	fired      []int64 // when each commit with a TimerFired returned, in order
}

func (s *timedStore) Commit(ctx context.Context, b *history.Batch) error {
	s.lastBegin.Store(time.Now().UnixNano())
	err := s.Store.Commit(ctx, b)
	now := time.Now().UnixNano()
	s.lastCommit.Store(now)
	for _, a := range b.Appends {
		for _, ev := range a.Events {
			if ev.Type() == history.TypeTimerFired {
				s.lastFired.Store(now)
				s.firedMu.Lock()
				s.fired = append(s.fired, now)
				s.firedMu.Unlock()
			}
		}
	}
	return err
}

type benchEngine struct {
	eng   *Engine
	store *badgerstore.Store
	timed *timedStore
}

func openBenchEngine(b *testing.B) *benchEngine {
	b.Helper()
	st, err := badgerstore.Open(badgerstore.Options{Dir: b.TempDir()}) // fsync on
	if err != nil {
		b.Fatal(err)
	}
	ts := &timedStore{Store: st}
	eng, err := Open(Options{Store: ts, PollTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	return &benchEngine{eng: eng, store: st, timed: ts}
}

// BenchmarkOneActivityWorkflows: b.N workflows, each start → schedule one
// activity → the activity completes → the workflow completes, driven by
// in-process scripted workers. Reports workflows/s.
func BenchmarkOneActivityWorkflows(b *testing.B) {
	for _, c := range []struct{ inflight, pollers int }{{64, 16}, {256, 64}} {
		b.Run(fmt.Sprintf("inflight=%d/pollers=%d", c.inflight, c.pollers), func(b *testing.B) {
			benchOneActivity(b, c.inflight, c.pollers)
		})
	}
}

func benchOneActivity(b *testing.B, inflight, pollers int) {
	be := openBenchEngine(b)
	eng := be.eng
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wfPollers, actPollers := pollers, pollers
	var (
		done    atomic.Int64
		total   = int64(b.N)
		allDone = make(chan struct{})
		errc    = make(chan error, 64)
		slots   = make(chan struct{}, inflight) // bounds the runs in flight
		wg      sync.WaitGroup
	)
	report := func(err error) {
		if ctx.Err() == nil {
			select {
			case errc <- err:
			default:
			}
		}
	}
	scheduleCmd := []api.Command{{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "1", ActivityType: "Greet", Input: history.Payload{Encoding: "json", Data: []byte(`"world"`)},
		Options: history.ActivityOptions{StartToCloseTimeout: time.Minute}}}}
	completeCmd := []api.Command{{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{
		Result: history.Payload{Encoding: "json", Data: []byte(`"hello world"`)}}}}
	for range wfPollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "bench", Identity: "wf-poller"})
				if err != nil {
					report(err)
					return
				}
				task := resp.Task
				if task == nil {
					continue
				}
				cmds, closes := scheduleCmd, false
				if task.Events[len(task.Events)-1].Type() == history.TypeActivityCompleted {
					cmds, closes = completeCmd, true
				}
				if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, Commands: cmds}); err != nil {
					report(err)
					return
				}
				if closes {
					<-slots
					if done.Add(1) == total {
						close(allDone)
					}
				}
			}
		}()
	}
	for range actPollers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "bench", Identity: "act-poller"})
				if err != nil {
					report(err)
					return
				}
				if resp.Task == nil {
					continue
				}
				if _, err := eng.CompleteActivity(ctx, &api.CompleteActivityRequest{TaskToken: resp.Task.TaskToken,
					Result: history.Payload{Encoding: "json", Data: []byte(`"hello world"`)}}); err != nil {
					report(err)
					return
				}
			}
		}()
	}
	var next atomic.Int64
	starters := max(8, pollers/4)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range starters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: fmt.Sprint("bench-", i), WorkflowType: "Hello",
					TaskQueue: "bench", Input: history.Payload{Encoding: "json", Data: []byte(`"world"`)}}); err != nil {
					report(err)
					return
				}
			}
		}()
	}
	select {
	case <-allDone:
	case err := <-errc:
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	wg.Wait()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "workflows/s")
	b.ReportMetric(float64(eng.Stats().Commits)/elapsed.Seconds(), "commits/s")
	// CPU time per workflow (user+system, whole process, workers included):
	// steadier than the rate on a shared machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/workflow")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkPollToDispatch measures the time from a workflow task becoming
// ready (the signal's transition is durable and the task is queued) to a
// poller that was already waiting holding it. The "sticky" case is the
// common one for a long run (only new events are read); "full" hands out
// the run's whole (short) history.
func BenchmarkPollToDispatch(b *testing.B) {
	b.Run("sticky", func(b *testing.B) { benchPollToDispatch(b, true) })
	b.Run("full", func(b *testing.B) { benchPollToDispatch(b, false) })
}

func benchPollToDispatch(b *testing.B, sticky bool) {
	be := openBenchEngine(b)
	eng := be.eng
	ctx := context.Background()
	queue, stickyQ := "q", ""
	if sticky {
		stickyQ = "sticky"
	}
	const perRun = 20 // keep histories short
	var wfID string
	newRun := func(i int) {
		wfID = fmt.Sprint("p2d-", i)
		if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: wfID, WorkflowType: "W", TaskQueue: "q"}); err != nil {
			b.Fatal(err)
		}
		resp, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q"})
		if err != nil || resp.Task == nil {
			b.Fatal(resp, err)
		}
		if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: resp.Task.TaskToken, StickyQueue: stickyQ}); err != nil {
			b.Fatal(err)
		}
	}
	if sticky {
		queue = stickyQ
	}
	lat := make([]time.Duration, 0, b.N)
	type polled struct {
		task *api.WorkflowTask
		at   time.Time
		err  error
	}
	res := make(chan polled, 1)
	b.ResetTimer()
	for i := range b.N {
		if i%perRun == 0 {
			b.StopTimer()
			newRun(i)
			b.StartTimer()
		}
		go func() {
			resp, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue})
			at := time.Now()
			if err == nil && resp.Task == nil {
				err = fmt.Errorf("poll timed out")
			}
			var task *api.WorkflowTask
			if resp != nil {
				task = resp.Task
			}
			res <- polled{task, at, err}
		}()
		for eng.wftQ.Waiting(queue) == 0 { // the poller is parked before the task exists
			runtime.Gosched()
		}
		if _, err := eng.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: wfID, SignalName: "go"}); err != nil {
			b.Fatal(err)
		}
		p := <-res
		if p.err != nil {
			b.Fatal(p.err)
		}
		// From the moment the transaction that makes the task ready reaches
		// the store: the task is handed to the parked poller while the
		// commit syncs, so it usually arrives before the commit returns.
		lat = append(lat, p.at.Sub(time.Unix(0, be.timed.lastBegin.Load())))
		if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: p.task.TaskToken, StickyQueue: stickyQ}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatency(b, lat)
}

// BenchmarkTimer1ms: a workflow starts a 1 ms timer; measured from the
// timer's deadline to the engine applying it (the TimerFired event's time,
// "applied-*"), to TimerFired being durable ("fired-*", includes the fsync)
// and to the next workflow task reaching the waiting worker ("task-*").
func BenchmarkTimer1ms(b *testing.B) {
	be := openBenchEngine(b)
	eng := be.eng
	ctx := context.Background()
	const perRun = 200
	poll := func(queue string) *api.WorkflowTask {
		resp, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue})
		if err != nil || resp.Task == nil {
			b.Fatal(resp, err)
		}
		return resp.Task
	}
	var task *api.WorkflowTask
	applied := make([]time.Duration, 0, b.N) // the engine acts on the deadline (TimerFired's time)
	fired := make([]time.Duration, 0, b.N)   // TimerFired is durable
	fireAts := make([]time.Time, 0, b.N)
	delivered := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		if i%perRun == 0 {
			b.StopTimer()
			if task != nil {
				if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken,
					Commands: []api.Command{completeWF(`1`)}}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: fmt.Sprint("timer-", i), WorkflowType: "W", TaskQueue: "q"}); err != nil {
				b.Fatal(err)
			}
			task = poll("q")
			b.StartTimer()
		}
		if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, StickyQueue: "sticky",
			Commands: []api.Command{startTimer(fmt.Sprint("t", i), time.Millisecond)}}); err != nil {
			b.Fatal(err)
		}
		task = poll("sticky")
		at := time.Now()
		var fireAt time.Time
		for _, ev := range task.Events {
			if s, ok := ev.Attrs.(*history.TimerStarted); ok {
				fireAt = s.FireAt
			}
		}
		last := task.Events[len(task.Events)-1]
		if fireAt.IsZero() || last.Type() != history.TypeTimerFired {
			b.Fatalf("task without the timer:\n%s", types(task.Events))
		}
		applied = append(applied, last.Time.Sub(fireAt))
		// The task may arrive while TimerFired is still being synced (it
		// is handed to the waiting poller meanwhile): when it was durable
		// is read from the store's record after the loop.
		fireAts = append(fireAts, fireAt)
		delivered = append(delivered, at.Sub(fireAt))
	}
	b.StopTimer()
	// Completing the last task waits for its TimerFired to be installed.
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken,
		Commands: []api.Command{completeWF(`1`)}}); err != nil {
		b.Fatal(err)
	}
	be.timed.firedMu.Lock()
	if len(be.timed.fired) != len(fireAts) {
		b.Fatalf("%d TimerFired commits for %d timers", len(be.timed.fired), len(fireAts))
	}
	for k, at := range fireAts {
		fired = append(fired, time.Unix(0, be.timed.fired[k]).Sub(at))
	}
	be.timed.firedMu.Unlock()
	p := percentiles(applied)
	b.ReportMetric(p[0], "applied-p50-ms")
	b.ReportMetric(p[1], "applied-p99-ms")
	p = percentiles(fired)
	b.ReportMetric(p[0], "fired-p50-ms")
	b.ReportMetric(p[1], "fired-p99-ms")
	p = percentiles(delivered)
	b.ReportMetric(p[0], "task-p50-ms")
	b.ReportMetric(p[1], "task-p99-ms")
}

func reportLatency(b *testing.B, lat []time.Duration) {
	p := percentiles(lat)
	b.ReportMetric(p[0], "p50-ms")
	b.ReportMetric(p[1], "p99-ms")
}

// percentiles returns the p50 and p99 of ds in milliseconds.
func percentiles(ds []time.Duration) [2]float64 {
	if len(ds) == 0 {
		return [2]float64{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		i := int(q * float64(len(s)-1))
		return float64(s[i].Nanoseconds()) / 1e6
	}
	return [2]float64{at(0.50), at(0.99)}
}
