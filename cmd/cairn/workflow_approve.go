package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/agent"
)

// decideOut is the --json of approve and reject.
type decideOut struct {
	WorkflowID string
	CallID     string
	Tool       string
	Approved   bool
	Signal     string
}

func wfApprove(g *globals) *cobra.Command { return decideCommand(g, true) }

func wfReject(g *globals) *cobra.Command { return decideCommand(g, false) }

// decideCommand builds `workflow approve` (approve true) or `workflow
// reject`: a person's decision on an agent's tool call awaiting approval.
func decideCommand(g *globals, approve bool) *cobra.Command {
	verb, done := "approve", "approved"
	short := "Approve an agent's tool call that awaits a person's approval"
	if !approve {
		verb, done = "reject", "rejected"
		short = "Reject an agent's tool call that awaits a person's approval (the tool does not run)"
	}
	var run, call, by, reason string
	var asUpdate bool
	cmd := &cobra.Command{
		Use:   verb + " WORKFLOW_ID [--call CALL_ID] [--by NAME] [--reason WHY]",
		Short: short,
		Long: `An agent's tool declared with agent.RequireApproval waits for a person before
each call runs (the run is paused: cairn workflow list --pause approval;
cairn workflow describe shows the calls, their tools, effect classes and
arguments). approve lets the call run; reject tells the model it was
rejected, with --reason, and the tool does not run.

--call names the call (its id, as describe shows it); it may be left out when
one call awaits. The decision goes to the run on the signal its agent takes
approvals from, as an agent.Approval; who decided (--by, default $USER) and
why (--reason, required to reject) go into the history. A run that awaits no
approval, or a call that does not await one, is refused and nothing is sent.

--as-update sends the decision as the agent's approval update instead: the
agent answers at once, so a call someone else decided meanwhile is refused
rather than recorded as ignored. It needs a running worker.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !approve && strings.TrimSpace(reason) == "" {
				return usagef("--reason is required to reject: the model is told why")
			}
			if strings.TrimSpace(by) == "" {
				return usagef("--by is required: the history records who decided")
			}
			c, runID, err := g.dialRun(cmd.Context(), args[0], run)
			if err != nil {
				return err
			}
			p, err := agent.Decide(cmd.Context(), c.Service(), agent.Decision{WorkflowID: args[0], RunID: runID, CallID: call,
				Approved: approve, By: by, Reason: reason, Identity: cliIdentity(), AsUpdate: asUpdate})
			if err != nil {
				return decideError(err, args[0])
			}
			out := decideOut{WorkflowID: args[0], CallID: p.CallID, Tool: p.Tool, Approved: approve, Signal: p.Signal}
			via := "signal"
			if asUpdate {
				via = "update"
			}
			return g.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "%s %s call %s of %s (%s %s)\n", done, orUnknown(p.Tool, "the tool"), p.CallID, args[0], via, p.Signal)
			})
		},
	}
	runFlag(cmd, &run)
	f := cmd.Flags()
	f.StringVar(&call, "call", "", "the tool call's id (default: the one call awaiting approval)")
	f.StringVar(&by, "by", os.Getenv("USER"), "who decided (recorded)")
	f.StringVar(&reason, "reason", "", "why (recorded; the model is told it on a rejection)")
	f.BoolVar(&asUpdate, "as-update", false, "send the decision as the agent's approval update (answered at once; needs a running worker)")
	return cmd
}

// decideError adds to a refused decision where to look.
func decideError(err error, workflowID string) error {
	if errors.Is(err, agent.ErrNoApprovalAwaited) || errors.Is(err, agent.ErrCallNotAwaited) || errors.Is(err, agent.ErrWhichCall) {
		return fmt.Errorf("%w (see: cairn workflow describe %s)", err, workflowID)
	}
	return err
}

func orUnknown(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// printApprovals writes describe's section on the calls awaiting approval.
func printApprovals(w io.Writer, d *api.DescribeWorkflowResponse, now time.Time) {
	if len(d.PendingApprovals) == 0 {
		return
	}
	id := d.Info.WorkflowID
	fmt.Fprintf(w, "\nAWAITING APPROVAL: %d tool call(s) wait for a person\n", len(d.PendingApprovals))
	for _, p := range d.PendingApprovals {
		effect := "effect class not declared yet"
		if p.EffectKnown {
			effect = p.Effect.String()
		}
		fmt.Fprintf(w, "  call %s: %s (%s) since %s, on signal %s\n    args:    %s\n", p.CallID, orUnknown(p.Tool, "(tool not recorded)"),
			effect, relative(p.Since, now), p.Signal, orUnknown(p.Arguments, "(not recorded)"))
	}
	call := ""
	if len(d.PendingApprovals) > 1 {
		call = " --call CALL_ID"
	}
	fmt.Fprintf(w, "  approve: cairn workflow approve %s%s [--reason WHY]\n  reject:  cairn workflow reject %s%s --reason WHY\n", id, call, id, call)
}

// approvalNote is what list says of a run awaiting an approval.
func approvalNote(wi *api.WorkflowInfo) string {
	p := wi.Pause
	what := orUnknown(p.ActivityType, "a tool call")
	if p.EffectKnown {
		what += " (" + p.Effect.String() + ")"
	}
	more := ""
	if p.Approvals > 1 {
		more = fmt.Sprintf(" and %d more", p.Approvals-1)
	}
	return fmt.Sprintf("awaits approval: %s call %s%s; cairn workflow approve|reject %s", what, p.CallID, more, wi.WorkflowID)
}

// pauseKindText names what a paused run waits for.
func pauseKindText(kind string) string {
	switch kind {
	case api.PauseApproval:
		return "an approval"
	case api.PauseBudget:
		return "its budget"
	case api.PauseOutcomeUnknown:
		return "an unknown outcome"
	}
	return kind
}
