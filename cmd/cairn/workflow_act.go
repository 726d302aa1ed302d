package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

// signalOut is signal's --json. Started is set by signal --start: true
// when the command started the run it signalled, false when a run was
// open and got the signal.
type signalOut struct {
	WorkflowID string
	RunID      string
	Signal     string
	Started    *bool
}

func wfSignal(g *globals) *cobra.Command {
	var run, name string
	var withStart bool
	var sf startFlags
	cmd := &cobra.Command{
		Use:   "signal WORKFLOW_ID --name NAME [--input JSON | --input-file FILE] [--start --type TYPE --task-queue QUEUE [--workflow-input JSON]]",
		Short: "Send a signal to a run (with --start: start one first if none is open)",
		Long: `Sends a signal to the open run of WORKFLOW_ID (or to --run).

With --start it is signal-with-start: the signal goes to the open run of
WORKFLOW_ID, and when there is none a run of --type is started on
--task-queue with --workflow-input and gets the signal — atomically: the
run's first workflow task sees the signal. --json says whether a run was
started ("started": true or false). The id's reuse policy applies to the
start (--reject-duplicate).`,
		Args: exactArgs(1),
	}
	input := inputFlags(cmd, g, "input", "the signal's argument")
	sf.input = inputFlags(cmd, g, "workflow-input", "the input of the run --start starts")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := checkSignalStart(cmd, withStart, run, &sf); err != nil {
			return err
		}
		in, err := input()
		if err != nil {
			return err
		}
		if withStart {
			return signalWithStart(cmd.Context(), g, &sf, args[0], name, in)
		}
		c, runID, err := g.dialRun(cmd.Context(), args[0], run)
		if err != nil {
			return err
		}
		if err := c.SignalWorkflow(cmd.Context(), args[0], runID, name, in); err != nil {
			return err
		}
		return g.emit(signalOut{WorkflowID: args[0], RunID: runID, Signal: name}, func(w io.Writer) { fmt.Fprintf(w, "signalled %s: %s\n", args[0], name) })
	}
	runFlag(cmd, &run)
	cmd.Flags().StringVar(&name, "name", "", "signal name")
	_ = cmd.MarkFlagRequired("name")
	cmd.Flags().BoolVar(&withStart, "start", false, "start a run (--type, --task-queue, --workflow-input) if none is open, atomically with the signal")
	sf.addRun(cmd)
	return cmd
}

// checkSignalStart checks signal's flags: --type and --task-queue go with
// --start (and are required by it), --run does not.
func checkSignalStart(cmd *cobra.Command, withStart bool, run string, sf *startFlags) error {
	f := cmd.Flags()
	if !withStart {
		for _, n := range []string{"type", "task-queue", "workflow-input", "workflow-input-file", "run-timeout", "execution-timeout",
			"task-timeout", "reject-duplicate"} {
			if f.Changed(n) {
				return usagef("--%s starts a run: it needs --start", n)
			}
		}
		return nil
	}
	if run != "" {
		return usagef("--run names a run to signal; --start signals the open run or starts one: use one or the other")
	}
	if sf.typ == "" || sf.queue == "" {
		return usagef("--start needs --type and --task-queue (the run to start when none is open)")
	}
	return nil
}

// signalWithStart signals the open run of id, or starts one and signals
// it, in one transaction of the server that serves id.
func signalWithStart(ctx context.Context, g *globals, sf *startFlags, id, name string, sig history.Payload) error {
	in, err := sf.input()
	if err != nil {
		return err
	}
	c, err := g.dial()
	if err != nil {
		return err
	}
	sf.id = id
	o := sf.options()
	resp, err := c.Service().SignalWithStartWorkflow(ctx, &api.SignalWithStartRequest{
		Start: api.StartWorkflowRequest{WorkflowID: id, WorkflowType: sf.typ, TaskQueue: o.TaskQueue, Input: in,
			ExecutionTimeout: o.ExecutionTimeout, RunTimeout: o.RunTimeout, TaskTimeout: o.TaskTimeout, ReusePolicy: o.ReusePolicy,
			Identity: cliIdentity()},
		SignalName: name, SignalInput: sig})
	if err != nil {
		return err
	}
	started := resp.Started
	return g.emit(signalOut{WorkflowID: id, RunID: resp.RunID, Signal: name, Started: &started}, func(w io.Writer) {
		if started {
			fmt.Fprintf(w, "started %s run %s and signalled it: %s\n", id, resp.RunID, name)
		} else {
			fmt.Fprintf(w, "signalled %s run %s: %s (the run was open)\n", id, resp.RunID, name)
		}
	})
}

// actionOut is the --json of cancel and terminate.
type actionOut struct {
	WorkflowID string
	RunID      string
	Action     string
}

func wfCancel(g *globals) *cobra.Command {
	return reasonCommand(g, "cancel", "Ask a run to cancel (its code decides how)", "cancel requested for",
		func(c client.Client, ctx context.Context, id, run, reason string) error {
			return c.CancelWorkflow(ctx, id, run, reason)
		})
}

func wfTerminate(g *globals) *cobra.Command {
	return reasonCommand(g, "terminate", "Close a run at once, without running its code", "terminated",
		func(c client.Client, ctx context.Context, id, run, reason string) error {
			return c.TerminateWorkflow(ctx, id, run, reason)
		})
}

func wfDelete(g *globals) *cobra.Command {
	var run string
	var force bool
	cmd := &cobra.Command{
		Use:   "delete WORKFLOW_ID",
		Short: "Delete a closed run: its history, state and list entries (not its effects ledger)",
		Long: `Deletes a closed run at once, as the retention sweep does once a run's
retention has passed (cairn server --retention): its history, its state, its
list entries. Its effects-ledger entries stay: the workflow id started again
is still answered from them, so a payment is not made twice. An open run is
refused unless --force, which terminates it first (as Temporal's
DeleteWorkflowExecution does). A run a kept reset or fork reads its history
from is refused until that run is deleted. Without --run: the current run.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			runID, err := c.DeleteWorkflow(cmd.Context(), args[0], run, force)
			if err != nil {
				return err
			}
			return g.emit(actionOut{args[0], runID, "delete"}, func(w io.Writer) { fmt.Fprintf(w, "deleted %s run %s\n", args[0], runID) })
		},
	}
	runFlag(cmd, &run)
	cmd.Flags().BoolVar(&force, "force", false, "terminate an open run first")
	return cmd
}

// reasonCommand builds a `workflow VERB WORKFLOW_ID [--run] [--reason]`
// command that calls act and reports done.
func reasonCommand(g *globals, verb, short, done string, act func(c client.Client, ctx context.Context, id, run, reason string) error) *cobra.Command {
	var run, reason string
	cmd := &cobra.Command{
		Use:   verb + " WORKFLOW_ID",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, runID, err := g.dialRun(cmd.Context(), args[0], run)
			if err != nil {
				return err
			}
			if err := act(c, cmd.Context(), args[0], runID, reason); err != nil {
				return err
			}
			return g.emit(actionOut{args[0], runID, verb}, func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", done, args[0]) })
		},
	}
	runFlag(cmd, &run)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

// silentError fails a command whose output already said why (nothing
// more printed; exit 1, or the exit code of the error it wraps: 3 for a
// corruptError).
type silentError struct{ error }

// Unwrap lets exitCode see the wrapped error.
func (e silentError) Unwrap() error { return e.error }

func wfResult(g *globals) *cobra.Command {
	var run string
	var noWait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "result WORKFLOW_ID",
		Short: "Wait for a run's result (following continue-as-new) and print it",
		Long: `Waits for the run to close, following continue-as-new to the last run, and
prints its result. A run that did not complete is an error (exit 1); with
--json its outcome is printed on stdout either way. --timeout bounds the
wait.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, runID, err := g.dialRun(cmd.Context(), args[0], run)
			if err != nil {
				return err
			}
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			r, err := finalResult(ctx, g, c, args[0], runID, !noWait)
			if err != nil {
				return gaveUp(cmd.Context(), err, args[0], timeout)
			}
			return printResult(g, args[0], r)
		},
	}
	runFlag(cmd, &run)
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once if the run is still open")
	timeoutFlag(cmd, &timeout)
	return cmd
}

// printResult prints a run's outcome as result and execute do.
func printResult(g *globals, workflowID string, r *api.GetResultResponse) error {
	if !r.Closed {
		return fmt.Errorf("%s is still %s", workflowID, r.Status)
	}
	if g.json {
		if err := printJSON(g.stdout, r); err != nil {
			return err
		}
		if r.Status != api.StatusCompleted {
			return silentError{fmt.Errorf("%s %s", workflowID, r.Status)}
		}
		return nil
	}
	if r.Status != api.StatusCompleted {
		msg := ""
		if r.Failure != nil {
			msg = ": " + r.Failure.Error()
		}
		return fmt.Errorf("%s %s%s", workflowID, r.Status, msg)
	}
	fmt.Fprintln(g.stdout, view.PayloadText(r.Result))
	return nil
}

// finalResult returns the outcome of the run, following continue-as-new;
// with wait it long-polls until the run closes, through server restarts.
func finalResult(ctx context.Context, g *globals, c client.Client, workflowID, runID string, wait bool) (*api.GetResultResponse, error) {
	rc := &reconnector{g: g}
	for {
		var r *api.GetResultResponse
		err := rc.do(ctx, func(ctx context.Context) error {
			var err error
			r, err = c.Service().GetResult(ctx, &api.GetResultRequest{WorkflowID: workflowID, RunID: runID, Wait: wait})
			return err
		})
		if err != nil {
			return nil, err
		}
		switch {
		case !r.Closed && wait:
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			runID = r.RunID
		case r.Status == api.StatusContinuedAsNew:
			runID = r.ContinuedAsNewRunID
		default:
			return r, nil
		}
	}
}

// resolveOut is resolve's --json.
type resolveOut struct {
	WorkflowID string
	RunID      string
	Resolution history.Resolution
}

func wfResolve(g *globals) *cobra.Command {
	var run, activityID, reason, by, message string
	var happened, notHappened, fail, perform bool
	cmd := &cobra.Command{
		Use:   "resolve WORKFLOW_ID (--happened [--result JSON] | --not-happened | --fail | --perform) --reason WHY",
		Short: "Decide an activity whose outcome is unknown (or that a fork held), so the paused run can go on",
		Long: `A SideEffect activity whose attempt may or may not have taken effect pauses its
run: check the downstream system, then say what happened.

  --happened       it took effect; --result (or --result-file) gives its result (JSON) for the workflow
  --not-happened   it did not; it is retried with the same idempotency key
  --fail           fail the activity; the workflow code handles the error

A fork (cairn workflow fork) holds every action with an effect that its base
run's ledger cannot answer: --perform runs it for real (under the fork's own
idempotency key), --happened --result gives the result to use instead, and
--fail fails it.

Who decided (--by, default $USER) and why (--reason) go into the history.`,
		Args: exactArgs(1),
	}
	result := inputFlags(cmd, g, "result", "the action's result (with --happened)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		req := client.ResolveRequest{WorkflowID: args[0], ActivityID: activityID, By: by, Reason: reason}
		n := 0
		for _, set := range []bool{happened, notHappened, fail, perform} {
			if set {
				n++
			}
		}
		switch {
		case n != 1:
			return usagef("say exactly one of --happened, --not-happened, --fail, --perform")
		case happened:
			req.Resolution = history.ResolvedHappened
			p, err := result()
			if err != nil {
				return err
			}
			req.Result = p
		case notHappened:
			req.Resolution = history.ResolvedNotHappened
		case perform:
			req.Resolution = history.ResolvedPerform
		default:
			req.Resolution = history.ResolvedFailed
			if message == "" {
				message = reason
			}
			req.Failure = &history.Failure{Type: "ResolvedFailed", Message: message, NonRetryable: true}
		}
		if strings.TrimSpace(reason) == "" {
			return usagef("--reason is required: the history records why")
		}
		c, err := g.dial()
		if err != nil {
			return err
		}
		if req.RunID, err = g.runID(cmd.Context(), c, args[0], run); err != nil {
			return err
		}
		if err := c.ResolveActivity(cmd.Context(), req); err != nil {
			if errors.Is(err, api.ErrNotPaused) {
				return fmt.Errorf("%w (see: cairn workflow describe %s)", err, args[0])
			}
			return err
		}
		return g.emit(resolveOut{args[0], req.RunID, req.Resolution}, func(w io.Writer) {
			fmt.Fprintf(w, "resolved %s: %s\n", args[0], req.Resolution)
		})
	}
	runFlag(cmd, &run)
	f := cmd.Flags()
	f.StringVar(&activityID, "activity", "", "activity id (default: the one the run is paused on)")
	f.BoolVar(&happened, "happened", false, "the action took effect")
	f.BoolVar(&notHappened, "not-happened", false, "the action did not take effect: retry it with the same key")
	f.BoolVar(&fail, "fail", false, "fail the activity")
	f.BoolVar(&perform, "perform", false, "perform an action a fork held, for real")
	f.StringVar(&message, "message", "", "failure message (with --fail; default: the reason)")
	f.StringVar(&reason, "reason", "", "why you decided so (recorded)")
	f.StringVar(&by, "by", os.Getenv("USER"), "who decided (recorded)")
	return cmd
}
