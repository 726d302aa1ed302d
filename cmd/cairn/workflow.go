package main

import (
	"context"
	"encoding/base64"
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
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

func workflowCommand(g *globals) *cobra.Command {
	return clientFlags(group("workflow", "Start, inspect and steer workflows",
		wfStart(g), wfList(g), wfCount(g), wfDescribe(g), wfShow(g), wfSignal(g), wfQuery(g), wfStack(g), wfCancel(g), wfTerminate(g),
		wfResult(g), wfResolve(g), wfBudget(g), wfWatch(g)), g)
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

// listFilter holds the filter flags list and count share.
type listFilter struct {
	status, typ, idPrefix, after, before string
	corrupt                              bool
}

func (lf *listFilter) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&lf.status, "status", "", "only runs with this status (running, paused, completed, failed, canceled, terminated, timed_out, continued_as_new)")
	f.BoolVar(&lf.corrupt, "corrupt", false, "only runs quarantined because their stored data is damaged")
	lf.filterFlags(cmd)
}

// filterFlags are the filters count shares with list.
func (lf *listFilter) filterFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&lf.typ, "type", "", "only runs of this workflow type")
	f.StringVar(&lf.idPrefix, "id-prefix", "", "only workflow ids starting with this")
	f.StringVar(&lf.after, "started-after", "", "only runs started after this time (RFC 3339, or a duration ago: 1h)")
	f.StringVar(&lf.before, "started-before", "", "only runs started before this time (RFC 3339, or a duration ago: 10m)")
}

// request builds the list request of the filter flags.
func (lf *listFilter) request(now time.Time) (*api.ListWorkflowsRequest, error) {
	req := &api.ListWorkflowsRequest{WorkflowType: lf.typ, WorkflowIDPrefix: lf.idPrefix, Corrupt: lf.corrupt}
	if lf.status != "" {
		s, ok := api.ParseStatus(lf.status)
		if !ok {
			return nil, usagef("--status %q: want running, paused, completed, failed, canceled, terminated, timed_out or continued_as_new", lf.status)
		}
		req.Status = s
	}
	var err error
	if req.StartedAfter, err = parseWhen("--started-after", lf.after, now); err != nil {
		return nil, err
	}
	if req.StartedBefore, err = parseWhen("--started-before", lf.before, now); err != nil {
		return nil, err
	}
	return req, nil
}

// parseWhen reads a time flag: RFC 3339, a date, or a duration ago.
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("%s %q: want an RFC 3339 time (2026-11-01T09:30:00Z), a date, or a duration ago (90m)", flag, s)
}

func wfList(g *globals) *cobra.Command {
	var lf listFilter
	var limit int
	var page string
	cmd := &cobra.Command{
		Use:   "list [--status S] [--type T] [--id-prefix P] [--started-after T] [--started-before T] [--corrupt]",
		Short: "List runs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			req, err := lf.request(time.Now())
			if err != nil {
				return err
			}
			req.PageSize = limit
			if page != "" {
				if req.NextPageToken, err = base64.StdEncoding.DecodeString(page); err != nil {
					return usagef("--page-token: %v", err)
				}
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			resp, err := c.ListWorkflows(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) { printList(g, w, resp) })
		},
	}
	lf.flags(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	cmd.Flags().StringVar(&page, "page-token", "", "continue after the last page (the nextPageToken of --json)")
	return cmd
}

func printList(g *globals, w io.Writer, resp *api.ListWorkflowsResponse) {
	now := time.Now()
	rows := make([][]string, 0, len(resp.Workflows))
	for _, wi := range resp.Workflows {
		note := ""
		switch {
		case wi.Corrupt != "":
			note = "CORRUPT: " + abbreviate(wi.Corrupt, 60)
		case wi.Pause != nil && wi.Pause.Kind == api.PauseBudget:
			note = abbreviate(wi.Pause.Reason, 60) + "; waits for: cairn workflow budget " + wi.WorkflowID
		case wi.Pause != nil:
			note = "waits for: cairn workflow resolve " + wi.WorkflowID
		}
		if wi.Duplicates > 0 || wi.EffectConflicts > 0 {
			note = strings.TrimSpace(g.effectFlag(&wi) + " " + note)
		}
		rows = append(rows, []string{wi.WorkflowID, shortRun(wi.RunID), wi.WorkflowType, g.statusText(wi.Status),
			relative(wi.StartTime, now), relative(wi.CloseTime, now), note})
	}
	table(w, []string{"WORKFLOW ID", "RUN", "TYPE", "STATUS", "STARTED", "CLOSED", ""}, rows)
	if resp.NextPageToken != nil {
		fmt.Fprintf(w, "(more: --page-token %s)\n", base64.StdEncoding.EncodeToString(resp.NextPageToken))
	}
}

func wfCount(g *globals) *cobra.Command {
	var lf listFilter
	cmd := &cobra.Command{
		Use:   "count [--type T] [--id-prefix P] [--started-after T] [--started-before T]",
		Short: "Count runs, by status",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lreq, err := lf.request(time.Now())
			if err != nil {
				return err
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			resp, err := c.CountWorkflows(cmd.Context(), &api.CountWorkflowsRequest{WorkflowType: lreq.WorkflowType,
				WorkflowIDPrefix: lreq.WorkflowIDPrefix, StartedAfter: lreq.StartedAfter, StartedBefore: lreq.StartedBefore})
			if err != nil {
				return err
			}
			return g.emit(resp, func(w io.Writer) {
				fmt.Fprintf(w, "%d runs\n", resp.Total)
				rows := [][]string{}
				for _, c := range resp.ByStatus {
					rows = append(rows, []string{g.statusText(c.Status), fmt.Sprint(c.Count)})
				}
				if len(rows) > 0 {
					table(w, []string{"STATUS", "RUNS"}, rows)
				}
			})
		},
	}
	lf.filterFlags(cmd)
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
		Args:  cobra.ExactArgs(1),
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
	} else if p != nil {
		fmt.Fprintf(w, "\nPAUSED on %s (activity %s, event %d, attempt %d) since %s\n  reason: %s\n  args:   %s\n  key:    %s\n  resolve: cairn workflow resolve %s --happened [--result JSON] | --not-happened | --fail --reason WHY\n",
			p.ActivityType, p.ActivityID, p.ScheduledEventID, p.Attempt, relative(p.Since, now), p.Reason, view.PayloadText(p.Input),
			p.IdempotencyKey, i.WorkflowID)
	}
	printUsage(w, d)
	if i.Duplicates > 0 || i.EffectConflicts > 0 {
		fmt.Fprintf(w, "\n%s: see cairn effects list --workflow %s --duplicates\n", g.effectFlag(&i), i.WorkflowID)
	}
	for _, r := range d.EffectReports {
		printReport(g, w, r)
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
			rows = append(rows, []string{"  " + fmt.Sprint(a.ScheduledEventID), a.ActivityType, a.Effect.String(), a.State.String(),
				fmt.Sprint(a.Attempt), lease, relative(a.LastHeartbeat, now), last})
		}
		table(w, []string{"  EVENT", "ACTIVITY", "EFFECT", "STATE", "ATTEMPT", "LEASE ENDS", "HEARTBEAT", "LAST FAILURE"}, rows)
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
			runID, evs, err := g.history(cmd.Context(), c, args[0], run)
			if err != nil {
				return err
			}
			var late []api.EffectReport // reports that arrived after the run closed are not in its history
			if d, err := c.DescribeWorkflow(cmd.Context(), args[0], runID); err == nil {
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
	return cmd
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

// signalOut is signal's --json.
type signalOut struct {
	WorkflowID string
	RunID      string
	Signal     string
}

func wfSignal(g *globals) *cobra.Command {
	var run, name string
	cmd := &cobra.Command{
		Use:   "signal WORKFLOW_ID --name NAME [--input JSON | --input-file FILE]",
		Short: "Send a signal to a run",
		Args:  cobra.ExactArgs(1),
	}
	input := inputFlags(cmd, g, "input", "the signal's argument")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in, err := input()
		if err != nil {
			return err
		}
		c, runID, err := g.dialRun(cmd.Context(), args[0], run)
		if err != nil {
			return err
		}
		if err := c.SignalWorkflow(cmd.Context(), args[0], runID, name, in); err != nil {
			return err
		}
		return g.emit(signalOut{args[0], runID, name}, func(w io.Writer) { fmt.Fprintf(w, "signalled %s: %s\n", args[0], name) })
	}
	runFlag(cmd, &run)
	cmd.Flags().StringVar(&name, "name", "", "signal name")
	_ = cmd.MarkFlagRequired("name")
	return cmd
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
		Args:  cobra.ExactArgs(1),
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
	Coroutines []view.Coroutine
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
		Args: cobra.ExactArgs(1),
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

// reasonCommand builds a `workflow VERB WORKFLOW_ID [--run] [--reason]`
// command that calls act and reports done.
func reasonCommand(g *globals, verb, short, done string, act func(c client.Client, ctx context.Context, id, run, reason string) error) *cobra.Command {
	var run, reason string
	cmd := &cobra.Command{
		Use:   verb + " WORKFLOW_ID",
		Short: short,
		Args:  cobra.ExactArgs(1),
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

// silentError fails a command whose output already said why (exit 1,
// nothing more printed).
type silentError struct{ error }

func wfResult(g *globals) *cobra.Command {
	var run string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "result WORKFLOW_ID",
		Short: "Wait for a run's result (following continue-as-new) and print it",
		Long: `Waits for the run to close, following continue-as-new to the last run, and
prints its result. A run that did not complete is an error (exit 1); with
--json its outcome is printed on stdout either way.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, runID, err := g.dialRun(cmd.Context(), args[0], run)
			if err != nil {
				return err
			}
			r, err := finalResult(cmd.Context(), c, args[0], runID, !noWait)
			if err != nil {
				return err
			}
			if !r.Closed {
				return fmt.Errorf("%s is still %s", args[0], r.Status)
			}
			if g.json {
				if err := printJSON(g.stdout, r); err != nil {
					return err
				}
				if r.Status != api.StatusCompleted {
					return silentError{fmt.Errorf("%s %s", args[0], r.Status)}
				}
				return nil
			}
			if r.Status != api.StatusCompleted {
				msg := ""
				if r.Failure != nil {
					msg = ": " + r.Failure.Error()
				}
				return fmt.Errorf("%s %s%s", args[0], r.Status, msg)
			}
			fmt.Fprintln(g.stdout, view.PayloadText(r.Result))
			return nil
		},
	}
	runFlag(cmd, &run)
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "fail at once if the run is still open")
	return cmd
}

// finalResult returns the outcome of the run, following continue-as-new;
// with wait it long-polls until the run closes.
func finalResult(ctx context.Context, c client.Client, workflowID, runID string, wait bool) (*api.GetResultResponse, error) {
	for {
		r, err := c.Service().GetResult(ctx, &api.GetResultRequest{WorkflowID: workflowID, RunID: runID, Wait: wait})
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
	var happened, notHappened, fail bool
	cmd := &cobra.Command{
		Use:   "resolve WORKFLOW_ID (--happened [--result JSON] | --not-happened | --fail) --reason WHY",
		Short: "Decide an activity whose outcome is unknown, so the paused run can go on",
		Long: `A SideEffect activity whose attempt may or may not have taken effect pauses its
run: check the downstream system, then say what happened.

  --happened       it took effect; --result (or --result-file) gives its result (JSON) for the workflow
  --not-happened   it did not; it is retried with the same idempotency key
  --fail           fail the activity; the workflow code handles the error

Who decided (--by, default $USER) and why (--reason) go into the history.`,
		Args: cobra.ExactArgs(1),
	}
	result := inputFlags(cmd, g, "result", "the action's result (with --happened)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		req := client.ResolveRequest{WorkflowID: args[0], ActivityID: activityID, By: by, Reason: reason}
		switch {
		case happened && !notHappened && !fail:
			req.Resolution = history.ResolvedHappened
			p, err := result()
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
	f.StringVar(&message, "message", "", "failure message (with --fail; default: the reason)")
	f.StringVar(&reason, "reason", "", "why you decided so (recorded)")
	f.StringVar(&by, "by", os.Getenv("USER"), "who decided (recorded)")
	return cmd
}
