//go:build unix

package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// startTimes records when each commit that started a scheduled run
// returned (durable), by workflow id.
type startTimes struct {
	history.Store
	mu   sync.Mutex
	lags []time.Duration // commit return minus the nominal time in the workflow id
}

func (s *startTimes) Commit(ctx context.Context, b *history.Batch) error {
	err := s.Store.Commit(ctx, b)
	if err != nil {
		return err
	}
	now := time.Now()
	for _, a := range b.Appends {
		if a.ExpectedNext != 1 || !strings.HasPrefix(a.Run.WorkflowID, "sched-") {
			continue
		}
		i := strings.Index(a.Run.WorkflowID[len("sched-"):], "-")
		nominal, perr := time.Parse(time.RFC3339Nano, a.Run.WorkflowID[len("sched-")+i+1:])
		if perr != nil {
			continue
		}
		s.mu.Lock()
		s.lags = append(s.lags, now.Sub(nominal))
		s.mu.Unlock()
	}
	return nil
}

// BenchmarkSchedules10k: 10,000 schedules each firing every minute
// ("* * * * *", allow-all: every run stays open), on an on-disk Badger
// store with fsync and the real clock, measured over whole minutes: the
// process's CPU (user+system) per second of wall time while the schedules
// fire, and the lag from each nominal time to its run's start being
// durable. Run it with
//
//	go test -run '^$' -bench Schedules10k -benchtime 1x -timeout 30m ./engine
//
// CAIRN_BENCH_SCHEDULES (default 10000) and CAIRN_BENCH_MINUTES (default
// 3) change the load and the window.
func BenchmarkSchedules10k(b *testing.B) {
	n := envInt("CAIRN_BENCH_SCHEDULES", 10000)
	minutes := envInt("CAIRN_BENCH_MINUTES", 3)
	st, err := badgerstore.Open(badgerstore.Options{Dir: b.TempDir()}) // fsync on
	if err != nil {
		b.Fatal(err)
	}
	ts := &startTimes{Store: st}
	eng, err := Open(Options{Store: ts})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	ctx := context.Background()
	s := api.Schedule{Spec: api.ScheduleSpec{Cron: "* * * * *"}, Action: api.ScheduleAction{WorkflowType: "W", TaskQueue: "q"},
		Policies: api.SchedulePolicies{Overlap: api.OverlapAllowAll}}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 64 {
				if _, err := eng.CreateSchedule(ctx, &api.CreateScheduleRequest{ScheduleID: fmt.Sprintf("sched-%05d", i), Schedule: s}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	// From just after a minute's firing to just after the last one's.
	next := time.Now().Truncate(time.Minute).Add(time.Minute)
	time.Sleep(time.Until(next.Add(30 * time.Second)))
	ts.mu.Lock()
	ts.lags = ts.lags[:0]
	ts.mu.Unlock()
	b.ResetTimer()
	cpu0, wall0 := cpuTime(), time.Now()
	time.Sleep(time.Until(next.Add(time.Duration(minutes)*time.Minute + 30*time.Second)))
	cpu, wall := cpuTime()-cpu0, time.Since(wall0)
	b.StopTimer()
	ts.mu.Lock()
	lags := slices.Clone(ts.lags)
	ts.mu.Unlock()
	if len(lags) != n*minutes {
		b.Fatalf("%d runs started in %d minutes, want %d", len(lags), minutes, n*minutes)
	}
	slices.Sort(lags)
	q := func(p float64) time.Duration { return lags[int(p*float64(len(lags)-1))] }
	b.ReportMetric(100*cpu.Seconds()/wall.Seconds(), "%cpu")
	b.ReportMetric(float64(q(0.50).Microseconds())/1000, "p50-lag-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, "p99-lag-ms")
	b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "max-lag-ms")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(lags)), "cpu-µs/action")
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
