package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
)

func wfReset(g *globals) *cobra.Command {
	var req api.ResetWorkflowRequest
	cmd := &cobra.Command{
		Use:   "reset WORKFLOW_ID (--to-event N | --to-last-task | --to-first-task) --reason TEXT",
		Short: "Run a workflow again from one of its workflow tasks, without performing its effects again",
		Long: `Makes a new run of the workflow id whose history is the run's up to a workflow
task (--to-event names a WorkflowTaskCompleted event: cairn workflow show lists
them), and terminates the run when it is open; the two are linked. From the
point on, the code runs again — new code, if the workers run a new build.

Nothing the run did after the point is done again behind the world's back:
an action with an effect that it performed is answered from the effects ledger
when the new run schedules it again (same idempotency key), and one whose
outcome is unknown pauses the new run, as it paused the old one. Model calls
and other Read activities after the point run again.

The signals the run received after the point are delivered to the new run
again, unless --no-reapply. A child run started before the point must have
closed; a child run itself cannot be reset (reset its parent).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.WorkflowID = args[0]
			if req.Reason == "" {
				return usagef("--reason is required: both runs record why")
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			resp, err := c.ResetWorkflow(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.emit(resetOut{args[0], resp.BaseRunID, resp.RunID, resp.AtEventID}, func(w io.Writer) {
				fmt.Fprintf(w, "reset %s to event %d: new run %s (run %s is linked to it)\n", args[0], resp.AtEventID, resp.RunID, resp.BaseRunID)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.RunID, "run", "", "run id (default: the current run)")
	f.Int64Var(&req.ToEventID, "to-event", 0, "a WorkflowTaskCompleted event: the new run keeps the events before it")
	f.BoolVar(&req.ToLastTask, "to-last-task", false, "to the run's last workflow task")
	f.BoolVar(&req.ToFirstTask, "to-first-task", false, "to the run's first workflow task")
	f.BoolVar(&req.NoReapply, "no-reapply", false, "drop the signals received after the point")
	f.StringVar(&req.Reason, "reason", "", "why (recorded in both runs)")
	f.StringVar(&req.Identity, "by", os.Getenv("USER"), "who (recorded)")
	return cmd
}

// resetOut is reset's --json.
type resetOut struct {
	WorkflowID string
	BaseRunID  string
	RunID      string
	AtEventID  int64
}

func wfFork(g *globals) *cobra.Command {
	var req api.ForkWorkflowRequest
	cmd := &cobra.Command{
		Use:   "fork WORKFLOW_ID --id NEW_ID [--at-event N] [--task-queue Q] [--effects hold|sandbox:QUEUE]",
		Short: "Copy a run up to a workflow task under a new workflow id, to try a change without touching the world",
		Long: `Makes a counterfactual copy of a run: a new workflow id whose history is the
run's up to a workflow task (--at-event names a WorkflowTaskCompleted event;
default: the last one). From there the fork's code runs — on --task-queue, say,
where workers of a new build (a changed prompt, model or code) listen. The
base run goes on untouched.

Model calls after the point are made for real and count against the fork's
own budget. Actions with an effect are never performed silently:

  - one whose key (computed as the base workflow computed it) the base's
    effects ledger completed is answered from it;
  - any other is held: the fork pauses ("fork: effect held") until a person
    runs it for real (cairn workflow resolve NEW_ID --perform), gives the
    result to use instead (--happened --result JSON) or fails it (--fail);
  - with --effects sandbox:QUEUE, such actions go to that task queue (a
    sandboxed worker) instead of being held.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req.WorkflowID = args[0]
			c, err := g.dial()
			if err != nil {
				return err
			}
			resp, err := c.ForkWorkflow(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.emit(forkOut{args[0], resp.WorkflowID, resp.RunID, resp.AtEventID}, func(w io.Writer) {
				fmt.Fprintf(w, "forked %s at event %d: %s run %s\n", args[0], resp.AtEventID, resp.WorkflowID, resp.RunID)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.RunID, "run", "", "run id (default: the current run)")
	f.Int64Var(&req.AtEventID, "at-event", 0, "a WorkflowTaskCompleted event: the fork keeps the events before it (default: the last)")
	f.StringVar(&req.NewWorkflowID, "id", "", "the fork's workflow id (new)")
	f.StringVar(&req.TaskQueue, "task-queue", "", "the fork's task queue (default: the base run's)")
	f.StringVar(&req.Effects, "effects", "hold", "what happens to actions the base's ledger cannot answer: hold, or sandbox:QUEUE")
	f.BoolVar(&req.NoReapply, "no-reapply", false, "drop the signals the base received after the point")
	f.StringVar(&req.Reason, "reason", "", "why (recorded)")
	f.StringVar(&req.Identity, "by", os.Getenv("USER"), "who (recorded)")
	_ = cmd.MarkFlagRequired("id")
	return cmd
}

// forkOut is fork's --json.
type forkOut struct {
	BaseWorkflowID string
	WorkflowID     string
	RunID          string
	AtEventID      int64
}
