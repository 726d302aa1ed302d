package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
)

func wfCompare(g *globals) *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "compare A[/RUN] B[/RUN] [--full]",
		Short: "Compare two runs: where their decisions diverge, and each one's tool and model calls, usage and result",
		Long: `Compares two runs — two runs of one workflow id, a run and its reset or fork,
or any two agents' runs — step by step: the activities, model and tool calls
they scheduled with their inputs, the answers they got, timers, children,
signals and how they closed, regardless of event ids. It prints where they
first differ (both sides' steps), how they are related (a reset or fork of
the other, from its WorkflowReset event), then per run its model calls
(output, tool calls asked for, tokens and cost), its tool calls (arguments
and outcome: result, error, answered from the ledger of which run, held, in
doubt), its usage and its result.

A run is WORKFLOW_ID (its current run) or WORKFLOW_ID/RUN, RUN a run id or a
unique prefix of it, as list shows it.`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			var runs [2]*view.RunData
			for i, ref := range args {
				if runs[i], err = g.loadRun(ctx, c, ref); err != nil {
					return err
				}
			}
			cmp := view.Compare(runs[0], runs[1])
			return g.emit(cmp, func(w io.Writer) { printComparison(w, cmp, full) })
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "do not shorten arguments, results and outputs")
	return cmd
}

// loadRun reads the run ref names: WORKFLOW_ID, or WORKFLOW_ID/RUN with
// RUN a run id or a prefix of one. A ref whose part after the last "/"
// names no run of the part before is a workflow id with a "/" in it.
func (g *globals) loadRun(ctx context.Context, c client.Client, ref string) (*view.RunData, error) {
	id, run := ref, ""
	if i := strings.LastIndexByte(ref, '/'); i > 0 && i < len(ref)-1 {
		runID, err := g.runID(ctx, c, ref[:i], ref[i+1:])
		switch {
		case err == nil:
			id, run = ref[:i], runID
		case !errors.Is(err, api.ErrNotFound):
			return nil, err
		}
	}
	return view.LoadRun(ctx, c.Service(), id, run)
}

// printComparison writes a comparison for people: the two runs, how they
// are related, where they diverge, then each run's calls.
func printComparison(w io.Writer, c *view.Comparison, full bool) {
	width := 70
	if full {
		width = 1 << 30
	}
	fmt.Fprintf(w, "A  %s run %s  %s\n", c.A.WorkflowID, c.A.RunID, c.A.Status)
	fmt.Fprintf(w, "B  %s run %s  %s\n", c.B.WorkflowID, c.B.RunID, c.B.Status)
	if c.Relation != "" {
		fmt.Fprintln(w, c.Relation)
	}
	fmt.Fprintln(w)
	printDivergence(w, c, width)
	for _, side := range []struct {
		name string
		s    view.RunSummary
	}{{"A", c.A}, {"B", c.B}} {
		fmt.Fprintf(w, "\n== %s: %s/%s (%s)\n", side.name, side.s.WorkflowID, shortRun(side.s.RunID), side.s.Status)
		printRunSummary(w, side.s, width)
	}
}

// printDivergence says where the runs diverge, with both sides' steps.
func printDivergence(w io.Writer, c *view.Comparison, width int) {
	d := c.Divergence
	if d == nil {
		fmt.Fprintf(w, "No divergence: both runs took the same %d steps.\n", c.Same)
		return
	}
	fmt.Fprintf(w, "DIVERGE at step %d, after %d steps alike:\n", d.Step, c.Same)
	for _, side := range []struct {
		name string
		s    *view.Step
		run  view.RunSummary
	}{{"A", d.A, c.A}, {"B", d.B, c.B}} {
		if side.s == nil {
			fmt.Fprintf(w, "  %s  (no step %d: the run %s)\n", side.name, d.Step, endedOrNot(side.run))
			continue
		}
		fmt.Fprintf(w, "  %s  %s\n", side.name, abbreviate(side.s.String(), width+30))
	}
}

// endedOrNot says why a run has no more steps.
func endedOrNot(s view.RunSummary) string {
	if s.Status == api.StatusRunning || s.Status == api.StatusPaused {
		return "has not got that far yet: it is " + s.Status.String()
	}
	return "ended: " + s.Status.String()
}

// printRunSummary writes one run's result, usage, model and tool calls.
func printRunSummary(w io.Writer, s view.RunSummary, width int) {
	if s.Base != nil {
		fmt.Fprintf(w, "Base      %s of %s/%s at event %d (marker: event %d)\n", s.Base.Kind, s.Base.WorkflowID, shortRun(s.Base.RunID),
			s.Base.AtEventID, s.Base.MarkerEventID)
	}
	if s.Result != "" {
		fmt.Fprintf(w, "Result    %s\n", abbreviate(s.Result, width))
	}
	fmt.Fprintf(w, "Usage     %d model calls, %d tokens in, %d out, $%.4f\n", len(s.ModelCalls), s.Usage.PromptTokens,
		s.Usage.CompletionTokens, s.Usage.CostUSD)
	if len(s.ModelCalls) > 0 {
		rows := make([][]string, 0, len(s.ModelCalls))
		for _, m := range s.ModelCalls {
			out := m.Output
			if len(m.ToolCalls) > 0 {
				out = strings.TrimSpace(out + " → " + strings.Join(m.ToolCalls, ", "))
			}
			rows = append(rows, []string{fmt.Sprint(m.Turn), m.Model, m.State, fmt.Sprintf("%d/%d", m.Usage.PromptTokens, m.Usage.CompletionTokens),
				fmt.Sprintf("$%.4f", m.Usage.CostUSD), abbreviate(out, width)})
		}
		fmt.Fprintln(w)
		table(w, []string{"TURN", "MODEL", "STATE", "TOKENS IN/OUT", "COST", "OUTPUT"}, rows)
	}
	if len(s.ToolCalls) > 0 {
		rows := make([][]string, 0, len(s.ToolCalls))
		for _, t := range s.ToolCalls {
			outcome := t.Outcome
			if t.Outcome == view.OutcomePending && t.State != "" {
				outcome += ": " + t.State
			}
			if t.From != "" {
				outcome += " (" + t.From + ")"
			}
			rows = append(rows, []string{turnText(t.Turn), t.Name, abbreviate(t.Arguments, width/2), outcome, abbreviate(t.Result, width/2)})
		}
		fmt.Fprintln(w)
		table(w, []string{"TURN", "CALL", "ARGUMENTS", "OUTCOME", "RESULT"}, rows)
	}
}

func turnText(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}
