package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// describeOut is describe's --json: the engine's description of the run,
// with its outcome once it closed.
type describeOut struct {
	*api.DescribeWorkflowResponse
	Result  history.Payload
	Failure *history.Failure
}

func wfDescribe(g *globals) *cobra.Command {
	var run string
	cmd := &cobra.Command{
		Use:   "describe WORKFLOW_ID",
		Short: "Show a run's status, pending work, and its result or failure once closed",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, runID, err := g.dialRun(cmd.Context(), args[0], run)
			if err != nil {
				return err
			}
			d, err := c.DescribeWorkflow(cmd.Context(), args[0], runID)
			if err != nil {
				return err
			}
			out := describeOut{DescribeWorkflowResponse: d}
			if !d.Info.Status.Open() {
				r, err := c.Service().GetResult(cmd.Context(), &api.GetResultRequest{WorkflowID: args[0], RunID: d.Info.RunID})
				if err != nil {
					return err
				}
				out.Result, out.Failure = r.Result, r.Failure
			}
			return g.emit(out, func(w io.Writer) { printDescribe(g, w, out) })
		},
	}
	runFlag(cmd, &run)
	return cmd
}

func printDescribe(g *globals, w io.Writer, out describeOut) {
	d := out.DescribeWorkflowResponse
	now := time.Now()
	i := d.Info
	fmt.Fprintf(w, "Workflow  %s\nRun       %s\nType      %s\nQueue     %s\nStatus    %s\nStarted   %s (%s)\n",
		i.WorkflowID, i.RunID, i.WorkflowType, i.TaskQueue, g.statusText(i.Status), i.StartTime.Format(time.RFC3339), relative(i.StartTime, now))
	if !i.CloseTime.IsZero() {
		fmt.Fprintf(w, "Closed    %s (%s)\n", i.CloseTime.Format(time.RFC3339), relative(i.CloseTime, now))
	}
	fmt.Fprintf(w, "Events    %d\n", i.HistoryLength)
	if i.ParentWorkflowID != "" {
		fmt.Fprintf(w, "Parent    %s run %s\n", i.ParentWorkflowID, i.ParentRunID)
	}
	if i.ContinuedAsNewRunID != "" {
		fmt.Fprintf(w, "Next run  %s\n", i.ContinuedAsNewRunID)
	}
	if b := i.Base; b != nil {
		fmt.Fprintf(w, "%-9s %s run %s up to event %d\n", b.Kind+" of", b.WorkflowID, b.RunID, b.AtEventID)
		if b.Effects != "" {
			fmt.Fprintf(w, "Effects   %s (what the base's ledger cannot answer)\n", b.Effects)
		}
	}
	if i.ResetRunID != "" {
		fmt.Fprintf(w, "Reset to  run %s\n", i.ResetRunID)
	}
	if i.LedgerAnswers > 0 {
		fmt.Fprintf(w, "Ledger    %d results answered from the effects ledger, not performed (cairn workflow show)\n", i.LedgerAnswers)
	}
	if i.Corrupt != "" {
		fmt.Fprintf(w, "\nCORRUPT: this run is quarantined: its stored data is damaged, its writes are refused\n  found:  %s\n  next:   cairn check --data DIR (server stopped), then restore from a backup (docs/reliability.md)\n",
			i.Corrupt)
	}
	if !out.Result.IsZero() {
		fmt.Fprintf(w, "Result    %s\n", view.PayloadText(out.Result))
	} else if i.Status == api.StatusCompleted {
		fmt.Fprintf(w, "Result    (none)\n")
	}
	if out.Failure != nil {
		fmt.Fprintf(w, "Failure   %s\n", out.Failure.Error())
	}
	if d.CancelRequested && i.Status.Open() {
		fmt.Fprintf(w, "Cancel    requested\n")
	}
	if p := i.Pause; p != nil && p.Kind == api.PauseBudget {
		fmt.Fprintf(w, "\nPAUSED: %s is held since %s\n  reason: %s\n  raise:  cairn workflow budget %s --max-tokens N | --max-cost USD | --max-turns N --reason WHY\n  or:     cairn workflow budget %s --stop --reason WHY\n",
			p.ActivityType, relative(p.Since, now), p.Reason, i.WorkflowID, i.WorkflowID)
	} else if p != nil && p.Kind != api.PauseApproval {
		fmt.Fprintf(w, "\nPAUSED on %s (activity %s, event %d, attempt %d) since %s\n  reason: %s\n  args:   %s\n  key:    %s\n  resolve: cairn workflow resolve %s --happened [--result JSON] | --not-happened | --fail --reason WHY\n",
			p.ActivityType, p.ActivityID, p.ScheduledEventID, p.Attempt, relative(p.Since, now), p.Reason, view.PayloadText(p.Input),
			p.IdempotencyKey, i.WorkflowID)
	}
	printApprovals(w, d, now)
	for _, u := range d.Unpolled {
		fmt.Fprintf(w, "\nWAITING: %s\n  check:  is a worker running on task queue %s? cairn task-queue describe %s\n", u.Message, u.TaskQueue, u.TaskQueue)
	}
	printUsage(w, d)
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
			rows = append(rows, []string{"  " + fmt.Sprint(a.ScheduledEventID), a.ActivityID, a.ActivityType, a.Effect.String(), a.State.String(),
				fmt.Sprint(a.Attempt), lease, relative(a.LastHeartbeat, now), last})
		}
		table(w, []string{"  EVENT", "ID", "ACTIVITY", "EFFECT", "STATE", "ATTEMPT", "LEASE ENDS", "HEARTBEAT", "LAST FAILURE"}, rows)
		for _, a := range d.PendingActivities {
			if a.WaitsForLimit != "" {
				fmt.Fprintf(w, "  event %d waits for a slot: %s (cairn task-queue describe)\n", a.ScheduledEventID, a.WaitsForLimit)
			}
		}
		printInDoubt(g, w, d.PendingActivities)
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
			cancel := ""
			if ch.CancelRequested {
				cancel = ", cancel requested"
			}
			fmt.Fprintf(w, "  %s (%s) run %s%s\n", ch.WorkflowID, ch.WorkflowType, ch.RunID, cancel)
		}
	}
	if len(d.PendingUpdates) > 0 {
		fmt.Fprintln(w, "\nUpdates in progress (accepted, handler running):")
		for _, u := range d.PendingUpdates {
			fmt.Fprintf(w, "  %s (%s) accepted at event %d\n", u.UpdateID, u.Name, u.AcceptedEventID)
		}
	}
	if t := d.WorkflowTask; t != nil && t.LastFailure != nil {
		fmt.Fprintf(w, "\nWorkflow task failing (attempt %d): %s\n", t.Attempt, t.LastFailure.Error())
	}
}

// historyOut is show's --json: the history export's document.
type historyOut struct {
	WorkflowID string
	RunID      string
	Events     []history.Event
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
	var run string
	var full, follow bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "show WORKFLOW_ID [--full] [--follow]",
		Short: "Show a run's history, one line per event (--follow: as it grows, until the run closes)",
		Long: `Shows a run's history, one line per event. --follow keeps printing its events as
they are recorded until the run closes (--timeout bounds the wait); with
--json it prints one event object a line, as a stream does, instead of the
history document.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := withTimeout(cmd.Context(), timeout)
			defer cancel()
			c, err := g.dial()
			if err != nil {
				return err
			}
			runID, evs, err := g.history(ctx, c, args[0], run)
			if err != nil {
				return err
			}
			if follow {
				return followHistory(ctx, g, c, args[0], runID, evs, full)
			}
			var late []api.EffectReport // reports that arrived after the run closed are not in its history
			if d, err := c.DescribeWorkflow(ctx, args[0], runID); err == nil {
				for _, r := range d.EffectReports {
					if r.AfterClose {
						late = append(late, r)
					}
				}
			}
			return g.emit(historyOut{args[0], runID, evs}, func(w io.Writer) {
				showHistory(w, evs, full)
				for _, r := range late {
					printReport(g, w, r)
				}
			})
		},
	}
	runFlag(cmd, &run)
	cmd.Flags().BoolVar(&full, "full", false, "show every attribute of every event")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new events until the run closes")
	timeoutFlag(cmd, &timeout)
	return cmd
}

// followHistory prints evs, then each event recorded after them, until
// the run closes: one line per event, or one JSON object a line.
func followHistory(ctx context.Context, g *globals, c client.Client, workflowID, runID string, evs []history.Event, full bool) error {
	printed := 0
	flush := func() error {
		if g.json {
			for _, ev := range evs[printed:] {
				b, err := view.Marshal(ev)
				if err != nil {
					return err
				}
				if _, err := g.stdout.Write(append(b, '\n')); err != nil {
					return err
				}
			}
		} else {
			printTimelineRows(g.stdout, evs, printed, full)
		}
		printed = len(evs)
		return nil
	}
	if !g.json {
		fmt.Fprintf(g.stdout, timelineFormat, "ID", "TIME", "EVENT", "NAME", "DURATION", "DETAILS")
	}
	next := int64(1)
	if len(evs) > 0 {
		next = evs[len(evs)-1].ID + 1
	}
	rc := &reconnector{g: g}
	for {
		if err := flush(); err != nil {
			return err
		}
		var resp *api.GetHistoryResponse
		err := rc.do(ctx, func(ctx context.Context) error {
			var err error
			resp, err = c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: workflowID, RunID: runID, FromEventID: next, WaitNewEvents: true})
			return err
		})
		if err != nil {
			return err
		}
		evs = append(evs, resp.Events...)
		next += int64(len(resp.Events))
		if resp.Closed && next >= resp.NextEventID {
			return flush()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// timelineFormat lays out a followed history's lines: fixed widths, as
// its rows are printed as they come.
const timelineFormat = "%-5s %-8s %-25s %-14s %-9s %s\n"

// printTimelineRows prints the rows of evs from index from on (the
// timeline is computed over all of evs, so offsets and durations hold).
func printTimelineRows(w io.Writer, evs []history.Event, from int, full bool) {
	width := 60
	if full {
		width = 1 << 30
	}
	rows := view.Timeline(evs)
	for i := from; i < len(rows); i++ {
		r := rows[i]
		detail := r.Detail
		if full {
			if b, err := json.Marshal(evs[i]); err == nil {
				detail = string(b)
			}
		}
		dur := ""
		if r.Duration > 0 {
			dur = roundDuration(r.Duration)
		}
		fmt.Fprintf(w, timelineFormat, fmt.Sprint(r.ID), "+"+roundDuration(r.Offset), r.Type, r.Name, dur, abbreviate(detail, width))
	}
}

// history reads a run's whole history, resolving the run id first.
func (g *globals) history(ctx context.Context, c client.Client, workflowID, run string) (string, []history.Event, error) {
	runID, err := g.runID(ctx, c, workflowID, run)
	if err != nil {
		return "", nil, err
	}
	if runID == "" {
		d, err := c.DescribeWorkflow(ctx, workflowID, "")
		if err != nil {
			return "", nil, err
		}
		runID = d.Info.RunID
	}
	evs, err := c.GetHistory(ctx, workflowID, runID)
	return runID, evs, err
}

// defaultQueryTimeout bounds a query: a worker answers at once or not at
// all (nobody polls the run's queue).
const defaultQueryTimeout = 10 * time.Second

// query asks a run a question, and says plainly when no worker answered
// within timeout.
func (g *globals) query(ctx context.Context, c client.Client, workflowID, runID, queryType string, args history.Payload, timeout time.Duration) (history.Payload, error) {
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out history.Payload
	err := c.QueryWorkflow(qctx, workflowID, runID, queryType, args, &out)
	if err == nil || ctx.Err() != nil {
		return out, err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, api.ErrUnavailable) && qctx.Err() != nil {
		return out, noAnswerError{fmt.Sprintf("no worker answered the %s query on %s within %s%s",
			queryType, queueName(ctx, c, workflowID, runID), timeout, whyNoAnswer(ctx, c, workflowID, runID))}
	}
	return out, err
}

// queueName names the run's task queue for a message.
func queueName(ctx context.Context, c client.Client, workflowID, runID string) string {
	if d, err := c.DescribeWorkflow(ctx, workflowID, runID); err == nil {
		return "task queue " + d.Info.TaskQueue
	}
	return "its task queue"
}

// whyNoAnswer says what the run's task queue looks like: nobody polls it,
// or who does.
func whyNoAnswer(ctx context.Context, c client.Client, workflowID, runID string) string {
	d, err := c.DescribeWorkflow(ctx, workflowID, runID)
	if err != nil {
		return ""
	}
	q, err := c.DescribeTaskQueue(ctx, d.Info.TaskQueue)
	if err != nil {
		return ""
	}
	if len(q.WorkflowPollers) == 0 {
		return fmt.Sprintf(": no worker polled it in the last %s (is one running? see: cairn task-queue describe %s)", api.PollerRetention, q.Name)
	}
	names := make([]string, len(q.WorkflowPollers))
	for i, p := range q.WorkflowPollers {
		names[i] = p.Identity
	}
	return fmt.Sprintf(": its workers (%s) did not answer in time", strings.Join(names, ", "))
}

// noAnswerError says no worker answered a query in time; it wraps
// context.DeadlineExceeded (code deadline_exceeded).
type noAnswerError struct{ msg string }

func (e noAnswerError) Error() string { return e.msg }

func (e noAnswerError) Unwrap() error { return context.DeadlineExceeded }

// queryOut is query's --json.
type queryOut struct {
	Result history.Payload
}

func wfQuery(g *globals) *cobra.Command {
	var run, typ string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "query WORKFLOW_ID --type QUERY [--input JSON | --input-file FILE] [--timeout D]",
		Short: "Ask a run a question (answered by a worker; nothing is written)",
		Args:  exactArgs(1),
	}
	input := inputFlags(cmd, g, "input", "the query's argument")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in, err := input()
		if err != nil {
			return err
		}
		if timeout <= 0 {
			return usagef("--timeout must be positive")
		}
		c, runID, err := g.dialRun(cmd.Context(), args[0], run)
		if err != nil {
			return err
		}
		out, err := g.query(cmd.Context(), c, args[0], runID, typ, in, timeout)
		if err != nil {
			return err
		}
		return g.emit(queryOut{out}, func(w io.Writer) { fmt.Fprintln(w, view.PayloadText(out)) })
	}
	runFlag(cmd, &run)
	cmd.Flags().StringVar(&typ, "type", "", "query type")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultQueryTimeout, "give up when no worker answers within this")
	_ = cmd.MarkFlagRequired("type")
	return cmd
}

// stackOut is stack's --json.
type stackOut struct {
	WorkflowID string
	RunID      string
	Coroutines []view.Coroutine `view:"keep"`
	Raw        string
}

func wfStack(g *globals) *cobra.Command {
	var run string
	var raw bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "stack WORKFLOW_ID [--raw]",
		Short: "Show where each of a run's coroutines waits, in its workflow code (asks a worker)",
		Long: `Asks a worker for the run's coroutine stacks (the built-in __stack_trace query)
and shows, for each coroutine, the workflow code's frames and the SDK call it
waits in. --raw prints the Go stacks as the worker sent them.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, runID, err := g.dialRun(cmd.Context(), args[0], run)
			if err != nil {
				return err
			}
			p, err := g.query(cmd.Context(), c, args[0], runID, sdk.QueryTypeStackTrace, history.Payload{}, timeout)
			if err != nil {
				return err
			}
			var text string
			if err := c.Converter().FromPayload(p, &text); err != nil {
				return fmt.Errorf("the worker's stack trace: %w", err)
			}
			cs := view.Stacks(text)
			return g.emit(stackOut{args[0], runID, cs, text}, func(w io.Writer) {
				if raw {
					fmt.Fprint(w, text)
					return
				}
				if len(cs) == 0 {
					fmt.Fprintln(w, "no live coroutines (the run's code has returned)")
					return
				}
				fmt.Fprint(w, view.StacksText(cs))
			})
		},
	}
	runFlag(cmd, &run)
	cmd.Flags().BoolVar(&raw, "raw", false, "print the Go stacks as they are")
	cmd.Flags().DurationVar(&timeout, "timeout", defaultQueryTimeout, "give up when no worker answers within this")
	return cmd
}
