package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/bench"
	"github.com/cairnflow/cairn/internal/gctune"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

func benchCommand(g *globals) *cobra.Command {
	o := bench.Options{}
	var profile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure one-activity workflows through the HTTP server with worker processes, on fsynced storage",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.ForServer() // this process is the server
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			stopProfile, err := cpuProfile(profile)
			if err != nil {
				return err
			}
			defer stopProfile()
			o.Out = g.stdout
			if g.json {
				o.Out = g.stderr // the narration; the figures go to stdout
			}
			o.WorkerCommand = func(args ...string) *exec.Cmd {
				return exec.Command(exe, append([]string{"bench", "worker"}, args...)...)
			}
			o.ServerCommand = func(args ...string) *exec.Cmd {
				return exec.Command(exe, append([]string{"server"}, args...)...)
			}
			res, err := bench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			return g.emit(res, func(io.Writer) {})
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Workflows, "workflows", 5000, "workflows in the throughput phase")
	f.IntVar(&o.Concurrency, "concurrency", 256, "start→result loops at once")
	f.IntVar(&o.LatencySamples, "latency-samples", 300, "sequential workflows in the latency phase")
	f.IntVar(&o.Workers, "workers", 1, "worker processes")
	f.BoolVar(&o.Breakdown, "breakdown", false, "print the median time before each event of the sequential workflows")
	f.StringVar(&profile, "cpuprofile", "", "write a CPU profile of the server side to this file")
	f.StringVar(&o.Postgres, "postgres", "", "keep the runs in this PostgreSQL database (a fresh schema, dropped afterwards) instead of Badger")
	f.IntVar(&o.Servers, "servers", 1, "with --postgres: servers sharing the database (this process and more cairn server processes)")
	cmd.AddCommand(benchRetentionCommand(g), benchWorkerCommand(), benchAgentCommand(g), benchAgentWorkerCommand(), benchAgentModelCommand())
	return cmd
}

func benchRetentionCommand(g *globals) *cobra.Command {
	o := bench.RetentionOptions{}
	cmd := &cobra.Command{
		Use:   "retention [--runs N]",
		Short: "Measure the data directory before N closed runs, with them, and after the retention sweep deleted them",
		Long: `Creates N closed one-activity runs through an embedded engine on a fsynced
Badger store, lets their retention (1 hour) pass on a fake clock, runs the
retention sweep, reclaims the store's space (compaction and value-log GC)
and prints one JSON object: baseline_bytes (the data directory of an engine
that stored nothing), peak_bytes (with the runs), after_bytes (after the
sweep), after_over_baseline, and the seconds each phase took. The activity is
a Read (no ledger entry); with --side-effect each run leaves its ledger entry,
which retention keeps on purpose. Sizes are the
disk blocks the directory's files occupy, measured with the store closed.
docs/performance.md has the figure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Out = g.stderr
			res, err := bench.RunRetention(cmd.Context(), o)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(g.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Runs, "runs", 100000, "closed runs created, then deleted")
	f.IntVar(&o.Concurrency, "concurrency", 64, "runs driven at once")
	f.IntVar(&o.PayloadBytes, "payload-bytes", 256, "size of each run's input, activity result and result")
	f.StringVar(&o.Dir, "dir", "", "data directory (default: a temporary one, removed)")
	f.BoolVar(&o.SideEffect, "side-effect", false, "schedule the activity as a SideEffect: each run leaves an effects-ledger entry, which retention keeps")
	return cmd
}

func benchWorkerCommand() *cobra.Command {
	var address string
	cmd := &cobra.Command{
		Use:    "worker",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.ForServer()
			stopProfile, err := cpuProfile(os.Getenv("CAIRN_BENCH_WORKER_CPUPROFILE"))
			if err != nil {
				return err
			}
			defer stopProfile()
			c, err := client.Dial(address, client.Options{}, client.DialOptions{})
			if err != nil {
				return err
			}
			w, err := worker.New(c, worker.Options{TaskQueue: bench.TaskQueue, StopOnSignals: true, WorkflowPollers: 32, ActivityPollers: 32,
				MaxConcurrentWorkflowTasks: 256, MaxConcurrentActivities: 512})
			if err != nil {
				return err
			}
			if err := w.RegisterWorkflow(bench.OneActivity); err != nil {
				return err
			}
			if err := w.RegisterActivity(bench.Echo); err != nil {
				return err
			}
			return w.Run(context.Background())
		},
	}
	cmd.Flags().StringVar(&address, "address", "", "server address")
	return cmd
}

// benchAgentCommand is `cairn bench agent`.
func benchAgentCommand(g *globals) *cobra.Command {
	o := bench.AgentOptions{}
	cmd := &cobra.Command{
		Use:   "agent [--turns N]",
		Short: "Measure an agent whose transcript grows ~1 KB per turn: turn time, bytes stored, replay, worker memory",
		Long: `Runs an agent (the server in this process, the worker and the fake model
each in a process of their own, fsynced storage) for N tool-calling turns and
a final answer, and prints one JSON object: turns, history_bytes (events and
payload chunks stored for the run), turn_ms (turns 1, 10, N/2 and N, from the
history's event times: the median of each one's 50-turn window) with
turn_ms_mean50 and turn_ms_single (the one turn),
model_ms_mean50 (the model server's own time per call, receiving the request
included) and turn_ms_without_model_mean50, cpu_ms_per_turn of each process
over an early and a late window, model_calls_on_replay (a replay of the whole
history), replay_ms, peak_rss_mb of the worker process, run_state_bytes (the
run's state record at the end) and record_bytes_written (records committed,
key and value, by space). --tool-effect registers the tool as idempotent or
side-effect (keyed on its arguments, so every call is a new action).
docs/performance.md defines each figure.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.ForServer()
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			stopProfile, err := cpuProfile(os.Getenv("CAIRN_BENCH_CPUPROFILE"))
			if err != nil {
				return err
			}
			defer stopProfile()
			// Its report is its own one JSON object, with or without --json:
			// the snake_case names issue 12 specified and docs/performance.md
			// quotes (turns, history_bytes, turn_ms, model_calls_on_replay,
			// peak_rss_mb), which benchmark scripts read. It is a report, not
			// a resource view, so the view convention's casing does not apply.
			o.Out = g.stdout
			o.WorkerCommand = func(args ...string) *exec.Cmd {
				return exec.Command(exe, append([]string{"bench", "agent-worker"}, args...)...)
			}
			o.ModelCommand = func(args ...string) *exec.Cmd {
				return exec.Command(exe, append([]string{"bench", "agent-model"}, args...)...)
			}
			_, err = bench.RunAgent(cmd.Context(), o)
			return err
		},
	}
	cmd.Flags().IntVar(&o.Turns, "turns", 1000, "tool-calling turns")
	cmd.Flags().StringVar(&o.ToolEffect, "tool-effect", "read",
		"effect class the tool is registered with: read, idempotent or side-effect (keyed on its arguments: a new action every turn)")
	return cmd
}

func benchAgentWorkerCommand() *cobra.Command {
	var address, modelURL, toolEffect string
	cmd := &cobra.Command{
		Use:    "agent-worker",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.ForServer()
			stopProfile, err := cpuProfile(os.Getenv("CAIRN_BENCH_WORKER_CPUPROFILE"))
			if err != nil {
				return err
			}
			defer stopProfile()
			return bench.RunAgentWorker(address, modelURL, toolEffect)
		},
	}
	cmd.Flags().StringVar(&address, "address", "", "server address")
	cmd.Flags().StringVar(&modelURL, "model-url", "", "model endpoint base URL")
	cmd.Flags().StringVar(&toolEffect, "tool-effect", "read", "the tool's effect class")
	return cmd
}

// benchAgentModelCommand is the model process of `cairn bench agent`: the
// scripted fake OpenAI-compatible server, in a process of its own so that
// its CPU is counted apart from the server's.
func benchAgentModelCommand() *cobra.Command {
	var turns int
	cmd := &cobra.Command{
		Use:    "agent-model",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gctune.ForServer()
			stopProfile, err := cpuProfile(os.Getenv("CAIRN_BENCH_MODEL_CPUPROFILE"))
			if err != nil {
				return err
			}
			defer stopProfile()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return bench.ServeAgentModel(ctx, os.Stdout, turns)
		},
	}
	cmd.Flags().IntVar(&turns, "turns", 1000, "tool-calling turns the script asks for")
	return cmd
}

// cpuProfile starts a CPU profile written to path (nothing when path is
// empty) and returns what stops it.
func cpuProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
