package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
)

func workflowCommand(g *globals) *cobra.Command {
	return clientFlags(group("workflow", "Start, inspect and steer workflows",
		wfStart(g), wfList(g), wfCount(g), wfDescribe(g), wfShow(g), wfSignal(g), wfQuery(g), wfStack(g), wfCancel(g), wfTerminate(g),
		wfResult(g), wfResolve(g), wfApprove(g), wfReject(g), wfBudget(g), wfWatch(g)), g)
}

// runRef names a run in --json outputs of the commands that act on one.
type runRef struct {
	WorkflowID string
	RunID      string
}

func wfStart(g *globals) *cobra.Command {
	var typ, id, queue string
	var runTimeout, execTimeout, taskTimeout time.Duration
	var reject bool
	cmd := &cobra.Command{
		Use:   "start --type TYPE --id ID --task-queue QUEUE [--input JSON | --input-file FILE]",
		Short: "Start a workflow run",
		Args:  cobra.NoArgs,
	}
	input := inputFlags(cmd, g, "input", "the workflow's input")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		in, err := input()
		if err != nil {
			return err
		}
		c, err := g.dial()
		if err != nil {
			return err
		}
		opts := client.StartOptions{ID: id, TaskQueue: queue, RunTimeout: runTimeout, ExecutionTimeout: execTimeout, TaskTimeout: taskTimeout}
		if reject {
			opts.ReusePolicy = api.RejectDuplicate
		}
		run, err := c.StartWorkflow(cmd.Context(), opts, typ, in)
		if err != nil {
			return err
		}
		return g.emit(runRef{run.WorkflowID(), run.RunID()}, func(w io.Writer) {
			fmt.Fprintf(w, "started %s run %s\n", run.WorkflowID(), run.RunID())
		})
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "workflow type")
	f.StringVar(&id, "id", "", "workflow id (your business id)")
	f.StringVar(&queue, "task-queue", "", "task queue")
	f.DurationVar(&runTimeout, "run-timeout", 0, "run timeout")
	f.DurationVar(&execTimeout, "execution-timeout", 0, "execution timeout (the whole continue-as-new chain)")
	f.DurationVar(&taskTimeout, "task-timeout", 0, "workflow task timeout (default 10s)")
	f.BoolVar(&reject, "reject-duplicate", false, "refuse if the id already ran")
	for _, n := range []string{"type", "id", "task-queue"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
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
