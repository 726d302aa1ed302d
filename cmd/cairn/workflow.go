package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

func workflowCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "workflow", Short: "Start, inspect and steer workflows"}
	cmd.AddCommand(wfStart(g), wfList(g), wfDescribe(g), wfShow(g), wfSignal(g), wfQuery(g), wfCancel(g), wfTerminate(g),
		wfResult(g), wfResolve(g))
	return cmd
}

func wfStart(g *globals) *cobra.Command {
	var typ, id, queue, input string
	var runTimeout, execTimeout time.Duration
	var reject bool
	cmd := &cobra.Command{
		Use:   "start --type TYPE --id ID --task-queue QUEUE [--input JSON]",
		Short: "Start a workflow run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			in, err := jsonPayload("--input", input)
			if err != nil {
				return err
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			opts := client.StartOptions{ID: id, TaskQueue: queue, RunTimeout: runTimeout, ExecutionTimeout: execTimeout}
			if reject {
				opts.ReusePolicy = api.RejectDuplicate
			}
			run, err := c.StartWorkflow(cmd.Context(), opts, typ, in)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(g.stdout, map[string]string{"workflowId": run.WorkflowID(), "runId": run.RunID()})
			}
			fmt.Fprintf(g.stdout, "started %s run %s\n", run.WorkflowID(), run.RunID())
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "workflow type")
	f.StringVar(&id, "id", "", "workflow id (your business id)")
	f.StringVar(&queue, "task-queue", "", "task queue")
	f.StringVar(&input, "input", "", "input as JSON")
	f.DurationVar(&runTimeout, "run-timeout", 0, "run timeout")
	f.DurationVar(&execTimeout, "execution-timeout", 0, "execution timeout")
	f.BoolVar(&reject, "reject-duplicate", false, "refuse if the id already ran")
	for _, n := range []string{"type", "id", "task-queue"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}

func wfList(g *globals) *cobra.Command {
	var status, typ string
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--status S] [--type T]",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req := &api.ListWorkflowsRequest{WorkflowType: typ, PageSize: limit}
			if status != "" {
				s, ok := api.ParseStatus(status)
				if !ok {
					return usagef("--status %q: want running, paused, completed, failed, canceled, terminated, timed_out or continued_as_new", status)
				}
				req.Status = s
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			resp, err := c.ListWorkflows(cmd.Context(), req)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(g.stdout, resp.Workflows)
			}
			now := time.Now()
			rows := make([][]string, 0, len(resp.Workflows))
			for _, w := range resp.Workflows {
				note := ""
				if w.Pause != nil {
					note = "waits for: cairn workflow resolve " + w.WorkflowID
				}
				if w.Duplicates > 0 || w.EffectConflicts > 0 {
					note = strings.TrimSpace(g.effectFlag(&w) + " " + note)
				}
				rows = append(rows, []string{w.WorkflowID, abbreviate(w.RunID, 12), w.WorkflowType, g.statusText(w.Status),
					relative(w.StartTime, now), relative(w.CloseTime, now), note})
			}
			table(g.stdout, []string{"WORKFLOW ID", "RUN", "TYPE", "STATUS", "STARTED", "CLOSED", ""}, rows)
			return nil
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "only runs with this status")
	cmd.Flags().StringVar(&typ, "type", "", "only runs of this workflow type")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	return cmd
}

// runFlag adds --run to a command taking a workflow id.
func runFlag(cmd *cobra.Command, run *string) {
	cmd.Flags().StringVar(run, "run", "", "run id (default: the current run)")
}

func wfDescribe(g *globals) *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "describe WORKFLOW_ID",
		Short: "Show a run's status and pending work",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			d, err := c.DescribeWorkflow(cmd.Context(), args[0], runID)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(g.stdout, d)
			}
			printDescribe(g, d)
			return nil
		},
	}
	runFlag(cmd, &runID)
	return cmd
}

func printDescribe(g *globals, d *api.DescribeWorkflowResponse) {
	now := time.Now()
	i := d.Info
	w := g.stdout
	fmt.Fprintf(w, "Workflow  %s\nRun       %s\nType      %s\nQueue     %s\nStatus    %s\nStarted   %s (%s)\n",
		i.WorkflowID, i.RunID, i.WorkflowType, i.TaskQueue, g.statusText(i.Status), i.StartTime.Format(time.RFC3339), relative(i.StartTime, now))
	if !i.CloseTime.IsZero() {
		fmt.Fprintf(w, "Closed    %s (%s)\n", i.CloseTime.Format(time.RFC3339), relative(i.CloseTime, now))
	}
	fmt.Fprintf(w, "Events    %d\n", i.HistoryLength)
	if i.ContinuedAsNewRunID != "" {
		fmt.Fprintf(w, "Next run  %s\n", i.ContinuedAsNewRunID)
	}
	if p := i.Pause; p != nil {
		fmt.Fprintf(w, "\nPAUSED on %s (activity %s, event %d, attempt %d) since %s\n  reason: %s\n  args:   %s\n  key:    %s\n  resolve: cairn workflow resolve %s --happened [--result JSON] | --not-happened | --fail --reason WHY\n",
			p.ActivityType, p.ActivityID, p.ScheduledEventID, p.Attempt, relative(p.Since, now), p.Reason, payloadText(p.Input),
			p.IdempotencyKey, i.WorkflowID)
	}
	if i.Duplicates > 0 || i.EffectConflicts > 0 {
		fmt.Fprintf(w, "\n%s: see cairn effects list --workflow %s --duplicates\n", g.effectFlag(&i), i.WorkflowID)
	}
	for _, r := range d.EffectReports {
		printReport(g, w, r)
	}
	if len(d.PendingActivities) > 0 {
		fmt.Fprintln(w, "\nPending activities:")
		rows := [][]string{}
		for _, a := range d.PendingActivities {
			last := ""
			if a.LastFailure != nil {
				last = abbreviate(a.LastFailure.Error(), 50)
			}
			lease := "-"
			if a.State == api.ActivityStateStarted {
				lease = relative(a.LeaseExpires, now)
			}
			rows = append(rows, []string{fmt.Sprint(a.ScheduledEventID), a.ActivityType, a.Effect.String(), a.State.String(),
				fmt.Sprint(a.Attempt), lease, last})
		}
		table(w, []string{"  EVENT", "ACTIVITY", "EFFECT", "STATE", "ATTEMPT", "LEASE ENDS", "LAST FAILURE"}, rows)
	}
	if len(d.PendingTimers) > 0 {
		fmt.Fprintln(w, "\nPending timers:")
		for _, t := range d.PendingTimers {
			fmt.Fprintf(w, "  %s fires %s\n", t.TimerID, relative(t.FireAt, now))
		}
	}
	if len(d.PendingChildren) > 0 {
		fmt.Fprintln(w, "\nChildren:")
		for _, ch := range d.PendingChildren {
			fmt.Fprintf(w, "  %s (%s) run %s\n", ch.WorkflowID, ch.WorkflowType, ch.RunID)
		}
	}
	if t := d.WorkflowTask; t != nil && t.LastFailure != nil {
		fmt.Fprintf(w, "\nWorkflow task failing (attempt %d): %s\n", t.Attempt, t.LastFailure.Error())
	}
}

// effectFlag names a run's duplicate and conflict counts, for list and
// describe.
func (g *globals) effectFlag(w *api.WorkflowInfo) string {
	var parts []string
	if w.Duplicates > 0 {
		parts = append(parts, fmt.Sprintf("DUPLICATE EFFECT ×%d", w.Duplicates))
	}
	if w.EffectConflicts > 0 {
		parts = append(parts, fmt.Sprintf("EFFECT CONFLICT ×%d", w.EffectConflicts))
	}
	return g.alarm(strings.Join(parts, ", "))
}

func wfShow(g *globals) *cobra.Command {
	var runID string
	var full bool
	cmd := &cobra.Command{
		Use:   "show WORKFLOW_ID",
		Short: "Show a run's history, one line per event",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			evs, err := c.GetHistory(cmd.Context(), args[0], runID)
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(g.stdout, evs)
			}
			showHistory(g.stdout, evs, full)
			// Late reports that arrived after the run closed are not in
			// its history: show them from the run's record.
			if d, err := c.DescribeWorkflow(cmd.Context(), args[0], runID); err == nil {
				for _, r := range d.EffectReports {
					if r.AfterClose {
						printReport(g, g.stdout, r)
					}
				}
			}
			return nil
		},
	}
	runFlag(cmd, &runID)
	cmd.Flags().BoolVar(&full, "full", false, "show every attribute of every event")
	return cmd
}

func wfSignal(g *globals) *cobra.Command {
	var runID, name, input string
	cmd := &cobra.Command{
		Use:   "signal WORKFLOW_ID --name NAME [--input JSON]",
		Short: "Send a signal to a run",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := jsonPayload("--input", input)
			if err != nil {
				return err
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			if err := c.SignalWorkflow(cmd.Context(), args[0], runID, name, in); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "signalled %s: %s\n", args[0], name)
			return nil
		},
	}
	runFlag(cmd, &runID)
	cmd.Flags().StringVar(&name, "name", "", "signal name")
	cmd.Flags().StringVar(&input, "input", "", "signal argument as JSON")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

func wfQuery(g *globals) *cobra.Command {
	var runID, typ, input string
	cmd := &cobra.Command{
		Use:   "query WORKFLOW_ID --type QUERY [--input JSON]",
		Short: "Ask a run a question (answered by a worker; nothing is written)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := jsonPayload("--input", input)
			if err != nil {
				return err
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			var out history.Payload
			if err := c.QueryWorkflow(cmd.Context(), args[0], runID, typ, in, &out); err != nil {
				return err
			}
			fmt.Fprintln(g.stdout, payloadText(out))
			return nil
		},
	}
	runFlag(cmd, &runID)
	cmd.Flags().StringVar(&typ, "type", "", "query type")
	cmd.Flags().StringVar(&input, "input", "", "query argument as JSON")
	_ = cmd.MarkFlagRequired("type")
	return cmd
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

// reasonCommand builds a `workflow VERB WORKFLOW_ID [--run] [--reason]`
// command that calls act and reports done.
func reasonCommand(g *globals, verb, short, done string, act func(c client.Client, ctx context.Context, id, run, reason string) error) *cobra.Command {
	var runID, reason string
	cmd := &cobra.Command{
		Use:   verb + " WORKFLOW_ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			if err := act(c, cmd.Context(), args[0], runID, reason); err != nil {
				return err
			}
			fmt.Fprintf(g.stdout, "%s %s\n", done, args[0])
			return nil
		},
	}
	runFlag(cmd, &runID)
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

func wfResult(g *globals) *cobra.Command {
	var runID string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "result WORKFLOW_ID",
		Short: "Wait for a run's result (following continue-as-new) and print it",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			if noWait {
				resp, err := c.Service().GetResult(cmd.Context(), &api.GetResultRequest{WorkflowID: args[0], RunID: runID})
				if err != nil {
					return err
				}
				if !resp.Closed {
					return fmt.Errorf("%s is still %s", args[0], resp.Status)
				}
			}
			var out history.Payload
			err = c.GetWorkflow(cmd.Context(), args[0], runID).Get(cmd.Context(), &out)
			if err != nil {
				return err
			}
			if g.json {
				fmt.Fprintln(g.stdout, payloadText(out))
				return nil
			}
			fmt.Fprintln(g.stdout, payloadText(out))
			return nil
		},
	}
	runFlag(cmd, &runID)
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once if the run is still open")
	return cmd
}

func wfResolve(g *globals) *cobra.Command {
	var runID, activityID, result, reason, by, message string
	var happened, notHappened, fail bool
	cmd := &cobra.Command{
		Use:   "resolve WORKFLOW_ID (--happened [--result JSON] | --not-happened | --fail) --reason WHY",
		Short: "Decide an activity whose outcome is unknown, so the paused run can go on",
		Long: `A SideEffect activity whose attempt may or may not have taken effect pauses its
run: check the downstream system, then say what happened.

  --happened       it took effect; --result gives its result (JSON) for the workflow
  --not-happened   it did not; it is retried with the same idempotency key
  --fail           fail the activity; the workflow code handles the error

Who decided (--by, default $USER) and why (--reason) go into the history.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := client.ResolveRequest{WorkflowID: args[0], RunID: runID, ActivityID: activityID, By: by, Reason: reason}
			switch {
			case happened && !notHappened && !fail:
				req.Resolution = history.ResolvedHappened
				p, err := jsonPayload("--result", result)
				if err != nil {
					return err
				}
				req.Result = p
			case notHappened && !happened && !fail:
				req.Resolution = history.ResolvedNotHappened
			case fail && !happened && !notHappened:
				req.Resolution = history.ResolvedFailed
				if message == "" {
					message = reason
				}
				req.Failure = &history.Failure{Type: "ResolvedFailed", Message: message, NonRetryable: true}
			default:
				return usagef("say exactly one of --happened, --not-happened, --fail")
			}
			if strings.TrimSpace(reason) == "" {
				return usagef("--reason is required: the history records why")
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			if err := c.ResolveActivity(cmd.Context(), req); err != nil {
				if errors.Is(err, api.ErrNotPaused) {
					return fmt.Errorf("%w (see: cairn workflow describe %s)", err, args[0])
				}
				return err
			}
			fmt.Fprintf(g.stdout, "resolved %s: %s\n", args[0], req.Resolution)
			return nil
		},
	}
	runFlag(cmd, &runID)
	f := cmd.Flags()
	f.StringVar(&activityID, "activity", "", "activity id (default: the one the run is paused on)")
	f.BoolVar(&happened, "happened", false, "the action took effect")
	f.BoolVar(&notHappened, "not-happened", false, "the action did not take effect: retry it with the same key")
	f.BoolVar(&fail, "fail", false, "fail the activity")
	f.StringVar(&result, "result", "", "the action's result as JSON (with --happened)")
	f.StringVar(&message, "message", "", "failure message (with --fail; default: the reason)")
	f.StringVar(&reason, "reason", "", "why you decided so (recorded)")
	f.StringVar(&by, "by", os.Getenv("USER"), "who decided (recorded)")
	return cmd
}
