package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// `cairn activity complete|fail|heartbeat`: reports of an activity that
// returned activities.ErrResultPending, by its task token or its ids.

func activityCommand(g *globals) *cobra.Command {
	return clientFlags(group("activity", "Report the outcome of an activity completed asynchronously (by task token or ids)",
		activityComplete(g), activityFail(g), activityHeartbeat(g)), g)
}

// activityRefFlags adds the ways of naming an attempt: a TOKEN argument,
// or --workflow-id, --run and --activity-id.
type activityRefFlags struct {
	workflowID, run, activityID string
}

const activityRefHelp = `Name the attempt by its task token (the TOKEN argument: the printable form an
activity hands over, activities.Info.TaskTokenString), or by its ids:
--workflow-id, --activity-id (the id the workflow gave the activity, "1", "2", …
by default; cairn workflow describe shows it in its ID column) and optionally
--run (default: the current run). By ids, the report is that of the
activity's current attempt.

A report for an attempt that no longer holds its lease (its start-to-close or
heartbeat timeout passed, another attempt runs) is refused (stale_attempt)
after what it proves is recorded; by ids, an activity that is no longer
pending is not_found. Either way it is never taken as a second outcome.`

func (f *activityRefFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.workflowID, "workflow-id", "", "the activity's workflow id (instead of a TOKEN)")
	fl.StringVar(&f.activityID, "activity-id", "", "the activity's id (with --workflow-id)")
	runFlag(cmd, &f.run)
}

// ref builds the ActivityRef of the arguments.
func (f *activityRefFlags) ref(cmd *cobra.Command, g *globals, c client.Client, args []string) (client.ActivityRef, error) {
	byID := f.workflowID != "" || f.activityID != "" || f.run != ""
	switch {
	case len(args) == 1 && byID:
		return client.ActivityRef{}, usagef("name the activity by TOKEN or by --workflow-id/--activity-id, not both")
	case len(args) == 1:
		tok, err := activities.ParseTaskToken(args[0])
		if err != nil {
			return client.ActivityRef{}, usageError{err}
		}
		return client.ByToken(tok), nil
	case f.workflowID == "" || f.activityID == "":
		return client.ActivityRef{}, usagef("missing TOKEN, or --workflow-id and --activity-id (usage: %s)", cmd.UseLine())
	}
	runID, err := g.runID(cmd.Context(), c, f.workflowID, f.run)
	if err != nil {
		return client.ActivityRef{}, err
	}
	return client.ByID(f.workflowID, runID, f.activityID), nil
}

// activityOut is what the activity commands print with --json.
type activityOut struct {
	Report     string
	WorkflowID string `json:",omitempty"`
	RunID      string `json:",omitempty"`
	ActivityID string `json:",omitempty"`
	TaskToken  string `json:",omitempty"`
	// CancelRequested (heartbeat): the workflow asked the activity to stop.
	CancelRequested bool `json:",omitempty"`
}

func newActivityOut(report string, ref client.ActivityRef) activityOut {
	out := activityOut{Report: report, WorkflowID: ref.WorkflowID, RunID: ref.RunID, ActivityID: ref.ActivityID}
	if len(ref.TaskToken) > 0 {
		out.TaskToken = activities.FormatTaskToken(ref.TaskToken)
	}
	return out
}

func (o activityOut) name() string {
	if o.TaskToken != "" {
		return "the activity of token " + abbreviate(o.TaskToken, 24)
	}
	return fmt.Sprintf("activity %s of %s", o.ActivityID, o.WorkflowID)
}

// explainReport adds what a refused report means.
func explainReport(err error) error {
	switch {
	case errors.Is(err, api.ErrStaleAttempt):
		return fmt.Errorf("%w (the attempt no longer holds its lease: what the report proves was recorded, not taken as a new outcome)", err)
	case errors.Is(err, api.ErrNotFound):
		return fmt.Errorf("%w (see: cairn workflow describe)", err)
	}
	return err
}

func activityComplete(g *globals) *cobra.Command {
	var f activityRefFlags
	cmd := &cobra.Command{
		Use:   "complete [TOKEN] [--workflow-id ID --activity-id ID] [--result JSON]",
		Short: "Complete an activity that returned ErrResultPending, with its result",
		Long:  "Complete an activity attempt whose activity returned activities.ErrResultPending.\n\n" + activityRefHelp,
		Args:  cobra.MaximumNArgs(1),
	}
	result := inputFlags(cmd, g, "result", "the activity's result")
	f.add(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := result()
		if err != nil {
			return err
		}
		c, err := g.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		ref, err := f.ref(cmd, g, c, args)
		if err != nil {
			return err
		}
		var v any
		if !p.IsZero() {
			v = p
		}
		if err := c.CompleteActivity(cmd.Context(), ref, v); err != nil {
			return explainReport(err)
		}
		out := newActivityOut("completed", ref)
		return g.emit(out, func(w io.Writer) { fmt.Fprintf(w, "completed %s\n", out.name()) })
	}
	return cmd
}

func activityFail(g *globals) *cobra.Command {
	var (
		f                     activityRefFlags
		message, errType      string
		nonRetryable, unknown bool
	)
	cmd := &cobra.Command{
		Use:   "fail [TOKEN] [--workflow-id ID --activity-id ID] --message TEXT",
		Short: "Fail an activity that returned ErrResultPending (retried per its retry policy)",
		Long: "Fail an activity attempt whose activity returned activities.ErrResultPending; the\n" +
			"activity is retried per its retry policy unless --non-retryable. --outcome-unknown\n" +
			"says nobody can tell whether its action took effect (a SideEffect then reconciles\n" +
			"or pauses).\n\n" + activityRefHelp,
		Args: cobra.MaximumNArgs(1),
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&message, "message", "", "what went wrong (recorded)")
	fl.StringVar(&errType, "type", "", "the error type (retry policies name non-retryable types)")
	fl.BoolVar(&nonRetryable, "non-retryable", false, "do not retry the activity")
	fl.BoolVar(&unknown, "outcome-unknown", false, "nobody can tell whether the action took effect")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if strings.TrimSpace(message) == "" {
			return usagef("--message is required: the history records it")
		}
		c, err := g.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		ref, err := f.ref(cmd, g, c, args)
		if err != nil {
			return err
		}
		cause := error(&sdk.ApplicationError{Type: errType, Message: message, NonRetryable: nonRetryable})
		if unknown {
			cause = fmt.Errorf("%w: %s", activities.ErrOutcomeUnknown, message)
		}
		if err := c.FailActivity(cmd.Context(), ref, cause); err != nil {
			return explainReport(err)
		}
		out := newActivityOut("failed", ref)
		return g.emit(out, func(w io.Writer) { fmt.Fprintf(w, "failed %s\n", out.name()) })
	}
	return cmd
}

func activityHeartbeat(g *globals) *cobra.Command {
	var f activityRefFlags
	cmd := &cobra.Command{
		Use:   "heartbeat [TOKEN] [--workflow-id ID --activity-id ID] [--details JSON]",
		Short: "Keep the lease of an activity that returned ErrResultPending (its heartbeat timeout)",
		Long: "Record a heartbeat for an activity attempt whose activity returned\n" +
			"activities.ErrResultPending: it extends the attempt's heartbeat timeout (never its\n" +
			"start-to-close timeout) and records --details, which a next attempt receives.\n\n" + activityRefHelp,
		Args: cobra.MaximumNArgs(1),
	}
	details := inputFlags(cmd, g, "details", "progress details")
	f.add(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		p, err := details()
		if err != nil {
			return err
		}
		c, err := g.dial()
		if err != nil {
			return err
		}
		defer c.Close()
		ref, err := f.ref(cmd, g, c, args)
		if err != nil {
			return err
		}
		var v any
		if !p.IsZero() {
			v = p
		}
		cancel, err := c.HeartbeatActivity(cmd.Context(), ref, v)
		if err != nil {
			return explainReport(err)
		}
		out := newActivityOut("heartbeat", ref)
		out.CancelRequested = cancel
		return g.emit(out, func(w io.Writer) {
			fmt.Fprintf(w, "heartbeat recorded for %s\n", out.name())
			if cancel {
				fmt.Fprintln(w, "the workflow asked the activity to cancel: report its outcome (cairn activity fail)")
			}
		})
	}
	return cmd
}
