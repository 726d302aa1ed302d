package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

func workflowCommand(g *globals) *cobra.Command {
	return clientFlags(group("workflow", "Start, inspect and steer workflows",
		wfStart(g), wfList(g), wfCount(g), wfDescribe(g), wfShow(g), wfCompare(g), wfSignal(g), wfUpdate(g), wfQuery(g), wfStack(g), wfCancel(g),
		wfTerminate(g), wfDelete(g), wfResult(g), wfExecute(g), wfResolve(g), wfApprove(g), wfReject(g), wfBudget(g), wfWatch(g),
		wfReset(g), wfFork(g)), g)
}

// runRef names a run in --json outputs of the commands that act on one.
type runRef struct {
	WorkflowID string
	RunID      string
}

// startFlags are the flags of start and execute.
type startFlags struct {
	typ, id, queue                       string
	runTimeout, execTimeout, taskTimeout time.Duration
	reject                               bool
	input                                func() (history.Payload, error)
}

// add gives cmd the flags.
func (sf *startFlags) add(cmd *cobra.Command, g *globals) {
	sf.input = inputFlags(cmd, g, "input", "the workflow's input")
	cmd.Flags().StringVar(&sf.id, "id", "", "workflow id (your business id)")
	sf.addRun(cmd)
	for _, n := range []string{"type", "id", "task-queue"} {
		_ = cmd.MarkFlagRequired(n)
	}
}

// addRun gives cmd the flags of the run to start but its id and input
// (signal --start names them otherwise).
func (sf *startFlags) addRun(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&sf.typ, "type", "", "workflow type")
	f.StringVar(&sf.queue, "task-queue", "", "task queue")
	f.DurationVar(&sf.runTimeout, "run-timeout", 0, "run timeout")
	f.DurationVar(&sf.execTimeout, "execution-timeout", 0, "execution timeout (the whole continue-as-new chain)")
	f.DurationVar(&sf.taskTimeout, "task-timeout", 0, "workflow task timeout (default 10s)")
	f.BoolVar(&sf.reject, "reject-duplicate", false, "refuse if the id already ran")
}

// options returns the client's start options the flags describe.
func (sf *startFlags) options() client.StartOptions {
	opts := client.StartOptions{ID: sf.id, TaskQueue: sf.queue, RunTimeout: sf.runTimeout, ExecutionTimeout: sf.execTimeout, TaskTimeout: sf.taskTimeout}
	if sf.reject {
		opts.ReusePolicy = api.RejectDuplicate
	}
	return opts
}

// start starts the run the flags describe.
func (sf *startFlags) start(ctx context.Context, g *globals) (client.Client, client.Run, error) {
	in, err := sf.input()
	if err != nil {
		return nil, nil, err
	}
	c, err := g.dial()
	if err != nil {
		return nil, nil, err
	}
	run, err := c.StartWorkflow(ctx, sf.options(), sf.typ, in)
	if err != nil {
		return nil, nil, err
	}
	return c, run, nil
}

func wfStart(g *globals) *cobra.Command {
	var sf startFlags
	cmd := &cobra.Command{
		Use:   "start --type TYPE --id ID --task-queue QUEUE [--input JSON | --input-file FILE]",
		Short: "Start a workflow run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, run, err := sf.start(cmd.Context(), g)
			if err != nil {
				return err
			}
			return g.emit(runRef{run.WorkflowID(), run.RunID()}, func(w io.Writer) {
				fmt.Fprintf(w, "started %s run %s\n", run.WorkflowID(), run.RunID())
			})
		},
	}
	sf.add(cmd, g)
	return cmd
}

func wfExecute(g *globals) *cobra.Command {
	var sf startFlags
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "execute --type TYPE --id ID --task-queue QUEUE [--input JSON | --input-file FILE] [--timeout D]",
		Short: "Start a workflow run and wait for its result (start, then result)",
		Long: `Starts a run as start does, waits for it to close — following continue-as-new to
the last run — and prints its result as result does. A run that did not
complete is an error (exit 1); with --json its outcome is printed on stdout
either way. --timeout bounds the wait (the run goes on).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, run, err := sf.start(cmd.Context(), g)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			r, err := finalResult(ctx, g, c, run.WorkflowID(), run.RunID(), true)
			if err != nil {
				return gaveUp(cmd.Context(), err, run.WorkflowID(), timeout)
			}
			return printResult(g, run.WorkflowID(), r)
		},
	}
	sf.add(cmd, g)
	timeoutFlag(cmd, &timeout)
	return cmd
}

// gaveUp says that a wait bounded by --timeout ended before the run
// closed (the run goes on); other errors are returned as they are.
func gaveUp(parent context.Context, err error, workflowID string, timeout time.Duration) error {
	if timeout <= 0 || !errors.Is(err, context.DeadlineExceeded) || parent.Err() != nil {
		return err
	}
	return fmt.Errorf("%s did not close within --timeout %s; it goes on (see: cairn workflow describe %s): %w", workflowID, timeout, workflowID, err)
}

// timeoutFlag adds --timeout, which bounds a command's wait.
func timeoutFlag(cmd *cobra.Command, timeout *time.Duration) {
	cmd.Flags().DurationVar(timeout, "timeout", 0, "give up waiting after this long (0: wait until the run closes, or Ctrl-C)")
}

// withTimeout bounds ctx by d, unless d is 0.
func withTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// shortRun is how tables show a run id: a prefix every --run flag takes.
func shortRun(runID string) string {
	if len(runID) <= 12 {
		return runID
	}
	return runID[:12]
}

// runFlag adds --run to a command taking a workflow id.
func runFlag(cmd *cobra.Command, run *string) {
	cmd.Flags().StringVar(run, "run", "", "run id, or a unique prefix of it (default: the current run)")
}

// dialRun dials the server and resolves a run flag of workflowID.
func (g *globals) dialRun(ctx context.Context, workflowID, run string) (client.Client, string, error) {
	c, err := g.dial()
	if err != nil {
		return nil, "", err
	}
	runID, err := g.runID(ctx, c, workflowID, run)
	return c, runID, err
}

// runIDLength is the length of the run ids the engine makes.
const runIDLength = 32

// runID resolves a --run flag: empty stays empty (the current run), a full
// id is used as it is, and a shorter one (as tables show it, a trailing "…"
// allowed) must be the prefix of exactly one run of the workflow.
func (g *globals) runID(ctx context.Context, c client.Client, workflowID, run string) (string, error) {
	run = strings.TrimSuffix(strings.TrimSpace(run), "…")
	if run == "" || len(run) >= runIDLength {
		return run, nil
	}
	var matches []string
	req := &api.ListWorkflowsRequest{WorkflowID: workflowID, PageSize: 1000}
	for {
		resp, err := c.ListWorkflows(ctx, req)
		if err != nil {
			return "", err
		}
		for _, w := range resp.Workflows {
			if w.WorkflowID == workflowID && strings.HasPrefix(w.RunID, run) {
				matches = append(matches, w.RunID)
			}
		}
		if resp.NextPageToken == nil {
			break
		}
		req.NextPageToken = resp.NextPageToken
	}
	switch len(matches) {
	case 0:
		return "", api.Errorf(api.ErrNotFound, "no run of %s starts with %q", workflowID, run)
	case 1:
		return matches[0], nil
	}
	return "", usagef("--run %q is ambiguous: %s has %d runs starting with it (%s)", run, workflowID, len(matches), strings.Join(matches, ", "))
}
