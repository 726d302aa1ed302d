// Package bench is `cairn bench`: end-to-end throughput and latency of
// one-activity workflows through the HTTP server, with workers in separate
// processes, on durable (fsynced) storage.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// TaskQueue is the benchmark's task queue.
const TaskQueue = "bench"

// OneActivity is the measured workflow: one activity, then complete.
func OneActivity(ctx sdk.Context, n int) (int, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	return sdk.ExecuteActivity(ctx, Echo, n).Get(ctx)
}

// Echo returns its input.
func Echo(_ context.Context, n int) (int, error) { return n, nil }

// Options configure Run.
type Options struct {
	Out io.Writer
	// Workflows is how many workflows the throughput phase runs.
	Workflows int
	// Concurrency is how many start→result loops run at once.
	Concurrency int
	// LatencySamples is how many sequential workflows the latency phase runs.
	LatencySamples int
	// Workers is how many worker processes to start.
	Workers int
	// WorkerCommand builds the command of one worker process.
	WorkerCommand func(args ...string) *exec.Cmd
	// Breakdown prints, after the latency phase, the median time between
	// consecutive events of the sequential workflows' histories.
	Breakdown bool
	// Dir holds the data (default: a temporary directory).
	Dir string
	// Postgres, when set, is a database URL: the server keeps the runs
	// there (in a fresh schema, dropped afterwards) instead of Badger.
	Postgres string
	// Servers is how many servers share the Postgres store (default 1):
	// this process and Servers-1 `cairn server` processes (ServerCommand).
	// Worker i and the load's loops are spread over them round-robin, each
	// given every address (the first its own).
	Servers int
	// ServerCommand builds the command of one more server process.
	ServerCommand func(args ...string) *exec.Cmd
}

// Result is what Run measured.
type Result struct {
	Throughput    float64 // workflows per second
	ThroughputP50 time.Duration
	ThroughputP99 time.Duration
	LatencyP50    time.Duration
	LatencyP99    time.Duration
	Commits       int64
	// CPUServer and CPUWorkers are CPU time (user+system) per workflow in
	// the throughput phase: the server process (with the load generator)
	// and the worker processes (zero where /proc is missing).
	CPUServer       time.Duration
	CPUWorkers      time.Duration
	WorkflowsPerRun int
	// On Postgres: Postgres transactions and SQL statements per workflow
	// (summed over the servers), and the whole machine's CPU per workflow
	// (Postgres included).
	PostgresCommits    float64       `json:",omitempty"`
	PostgresStatements float64       `json:",omitempty"`
	CPUMachine         time.Duration `json:",omitempty"`
	// Forwarded and HandedBack are, per workflow over every server, the
	// calls a server forwarded to another and the tasks given back after
	// a fanned-out poll.
	Forwarded  float64 `json:",omitempty"`
	HandedBack float64 `json:",omitempty"`
}

// Run starts a server on a loopback port over a fresh data directory,
// starts the worker processes, measures sequential start→result latency,
// then throughput with Concurrency loops.
func Run(ctx context.Context, opts Options) (*Result, error) {
	var eng *engine.Engine
	var addr string
	var addrs []string // several servers: every address
	var pg *pgServer
	if opts.Postgres != "" {
		var err error
		if pg, err = servePostgres(ctx, opts.Postgres); err != nil {
			return nil, err
		}
		defer pg.stop()
		eng, addr = pg.eng, pg.addr
		if opts.Servers > 1 {
			others, err := pg.startServers(ctx, opts.ServerCommand, opts.Servers-1)
			if err != nil {
				return nil, err
			}
			addrs = append([]string{addr}, others...)
		}
		fmt.Fprintf(opts.Out, "store       %s\n", pg.describe(len(addrs)))
	} else {
		var closeServer func()
		var err error
		if eng, addr, closeServer, err = serve(opts.Dir, "cairn-bench-", engine.Limits{}, nil); err != nil {
			return nil, err
		}
		defer closeServer()
	}
	var pids []int
	for i := 0; i < opts.Workers; i++ {
		cmd := opts.WorkerCommand("--address", rotated(addr, addrs, i))
		cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		defer stopWorker(cmd)
		pids = append(pids, cmd.Process.Pid)
	}
	c, err := dialAll(addr, addrs)
	if err != nil {
		return nil, err
	}
	res := &Result{WorkflowsPerRun: opts.Workflows}
	// Warm up (and wait for the workers to connect).
	if _, err := loops(ctx, c, "warm", 1, min(50, opts.Workflows)); err != nil {
		return nil, err
	}
	latStamp := time.Now().UnixNano()
	lat, err := loopsStamped(ctx, c, "lat", latStamp, 1, opts.LatencySamples)
	if err != nil {
		return nil, err
	}
	res.LatencyP50, res.LatencyP99 = pct(lat, 50), pct(lat, 99)
	fmt.Fprintf(opts.Out, "latency     %d sequential workflows: start→result p50 %s, p99 %s\n", opts.LatencySamples,
		res.LatencyP50.Round(10*time.Microsecond), res.LatencyP99.Round(10*time.Microsecond))
	if opts.Breakdown {
		if err := breakdown(ctx, opts.Out, c, "lat", latStamp, opts.LatencySamples); err != nil {
			return nil, err
		}
	}
	before := eng.Stats().Commits
	var pgMark pgFigures
	if pg != nil {
		if pgMark, err = pg.mark(ctx); err != nil {
			return nil, err
		}
	}
	cpuServer, cpuWorkers := processCPU(os.Getpid()), workersCPU(pids)
	start := time.Now()
	thr, err := loops(ctx, c, "thr", opts.Concurrency, opts.Workflows)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	res.Throughput = float64(opts.Workflows) / elapsed.Seconds()
	res.ThroughputP50, res.ThroughputP99 = pct(thr, 50), pct(thr, 99)
	res.Commits = eng.Stats().Commits - before
	res.CPUServer = (processCPU(os.Getpid()) - cpuServer) / time.Duration(opts.Workflows)
	res.CPUWorkers = (workersCPU(pids) - cpuWorkers) / time.Duration(opts.Workflows)
	if pg != nil {
		if err := pg.report(ctx, res, pgMark, opts.Workflows); err != nil {
			return nil, err
		}
		fmt.Fprintf(opts.Out, "postgres    %.2f transactions and %.1f statements per workflow; the whole machine %s of CPU per workflow\n",
			res.PostgresCommits, res.PostgresStatements, res.CPUMachine.Round(time.Microsecond))
		if len(addrs) > 1 {
			fmt.Fprintf(opts.Out, "cluster     per workflow: %.3f calls forwarded to another server, %.3f tasks given back after a fanned-out poll\n",
				res.Forwarded, res.HandedBack)
		}
	}
	fmt.Fprintf(opts.Out, "throughput  %d workflows, %d at a time, %d worker process(es): %.0f workflows/s (start→result p50 %s, p99 %s; %.1f engine transactions per workflow)\n",
		opts.Workflows, opts.Concurrency, opts.Workers, res.Throughput, res.ThroughputP50.Round(10*time.Microsecond),
		res.ThroughputP99.Round(10*time.Microsecond), float64(res.Commits)/float64(opts.Workflows))
	es := eng.Stats()
	fmt.Fprintf(opts.Out, "tasks       %d workflow and %d activity tasks; %d and %d of them handed to a waiting worker while their transaction synced\n",
		es.WorkflowTasks, es.ActivityTasks, es.WorkflowTasksHandedOff, es.ActivityTasksHandedOff)
	if res.CPUServer > 0 {
		fmt.Fprintf(opts.Out, "cpu         per workflow: %s in the server and load generator, %s in the worker process(es)\n",
			res.CPUServer.Round(time.Microsecond), res.CPUWorkers.Round(time.Microsecond))
	}
	return res, nil
}

// stopWorker asks a worker process to stop (SIGTERM) and waits; a worker
// that does not stop within 10 s is killed.
func stopWorker(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		_ = cmd.Process.Kill()
		<-done
	}
}

// loops runs n workflows from k concurrent loops and returns each one's
// start→result latency.
func loops(ctx context.Context, c client.Client, prefix string, k, n int) ([]time.Duration, error) {
	return loopsStamped(ctx, c, prefix, time.Now().UnixNano(), k, n)
}

// loopsStamped is loops with the stamp that makes workflow ids unique:
// workflow j is "<prefix>-<stamp>-<j>".
func loopsStamped(ctx context.Context, c client.Client, prefix string, stamp int64, k, n int) ([]time.Duration, error) {
	var (
		next    atomic.Int64
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, n)
		firstEr error
		wg      sync.WaitGroup
	)
	for i := 0; i < k; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				j := int(next.Add(1))
				if j > n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				var out int
				_, err := c.ExecuteWorkflow(ctx, client.StartOptions{ID: fmt.Sprintf("%s-%d-%d", prefix, stamp, j), TaskQueue: TaskQueue}, OneActivity, j, &out)
				d := time.Since(t0)
				mu.Lock()
				if err == nil && out != j {
					err = fmt.Errorf("workflow %d returned %d", j, out)
				}
				if err != nil && firstEr == nil {
					firstEr = err
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return lat, firstEr
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// breakdown reads the histories of the n sequential workflows and prints
// the median gap before each event (the engine's clock stamps events; the
// load generator runs in the server's process, so the same clock).
func breakdown(ctx context.Context, out io.Writer, c client.Client, prefix string, stamp int64, n int) error {
	var (
		names []string
		gaps  [][]time.Duration
	)
	for j := 1; j <= n; j++ {
		evs, err := c.GetHistory(ctx, fmt.Sprintf("%s-%d-%d", prefix, stamp, j), "")
		if err != nil {
			return err
		}
		for i := 1; i < len(evs); i++ {
			if i-1 >= len(names) {
				names = append(names, evs[i].Type().String())
				gaps = append(gaps, nil)
			}
			gaps[i-1] = append(gaps[i-1], evs[i].Time.Sub(evs[i-1].Time))
		}
	}
	fmt.Fprintf(out, "breakdown   median time before each event of the sequential workflows:\n")
	for i, name := range names {
		fmt.Fprintf(out, "            %-28s %8s\n", name, pct(gaps[i], 50).Round(time.Microsecond))
	}
	return nil
}

func workersCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, p := range pids {
		sum += processCPU(p)
	}
	return sum
}

// processCPU reads a process's user+system CPU time from /proc (zero when
// it cannot).
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times (100 on
// Linux everywhere Go runs).
const clockTicks = 100

// rotated is the address list of worker (or loop) i: every server, its
// own first.
func rotated(addr string, addrs []string, i int) string {
	if len(addrs) == 0 {
		return addr
	}
	k := i % len(addrs)
	return strings.Join(append(slices.Clone(addrs[k:]), addrs[:k]...), ",")
}

// dialAll returns the load's client: one per server, the loops spread
// over them.
func dialAll(addr string, addrs []string) (client.Client, error) {
	if len(addrs) == 0 {
		return client.Dial(addr, client.Options{}, client.DialOptions{})
	}
	var cs []client.Client
	for i := range addrs {
		c, err := client.Dial(rotated(addr, addrs, i), client.Options{}, client.DialOptions{})
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return &spread{Client: cs[0], all: cs}, nil
}

// spread sends each workflow of the load to the next server in turn.
type spread struct {
	client.Client
	all  []client.Client
	next atomic.Int64
}

func (s *spread) ExecuteWorkflow(ctx context.Context, opts client.StartOptions, wf any, in any, out any) (client.Run, error) {
	return s.all[int(s.next.Add(1))%len(s.all)].ExecuteWorkflow(ctx, opts, wf, in, out)
}
