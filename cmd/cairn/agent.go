package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// wfBudget raises a run's budget or stops its held model calls.
func wfBudget(g *globals) *cobra.Command {
	var runID, reason string
	var b history.Budget
	var stop bool
	cmd := &cobra.Command{
		Use:   "budget WORKFLOW_ID (--max-tokens N | --max-cost USD | --max-turns N | --stop) --reason WHY",
		Short: "Raise a run's token, cost or turn budget so a paused agent goes on, or stop it",
		Long: `A run whose budget is used up holds its next model call and is paused. Raise
the budget and the held call goes on: each limit you give replaces that
limit (0 means no limit), and the limits you omit are kept as they are —
--max-turns 8 on a budget of 50,000 tokens and 4 turns makes it 50,000
tokens and 8 turns. Or --stop, and the held call fails with BudgetExceeded,
which the agent loop returns to the workflow.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return usagef("--reason is required: it goes into the history")
			}
			if !stop && !cmd.Flags().Changed("max-tokens") && !cmd.Flags().Changed("max-cost") && !cmd.Flags().Changed("max-turns") {
				return usagef("give a new limit (--max-tokens, --max-cost, --max-turns) or --stop")
			}
			c, runID, err := g.dialRun(cmd.Context(), args[0], runID)
			if err != nil {
				return err
			}
			if !stop {
				d, err := c.DescribeWorkflow(cmd.Context(), args[0], runID)
				if err != nil {
					return err
				}
				old := d.Budget.Budget
				if !cmd.Flags().Changed("max-tokens") {
					b.MaxTokens = old.MaxTokens
				}
				if !cmd.Flags().Changed("max-cost") {
					b.MaxCostUSD = old.MaxCostUSD
				}
				if !cmd.Flags().Changed("max-turns") {
					b.MaxTurns = old.MaxTurns
				}
			}
			resp, err := c.Service().UpdateBudget(cmd.Context(), &api.UpdateBudgetRequest{WorkflowID: args[0], RunID: runID,
				Budget: b, Stop: stop, Identity: cliIdentity(), Reason: reason})
			if err != nil {
				return err
			}
			if g.json {
				return printJSON(g.stdout, resp)
			}
			fmt.Fprintf(g.stdout, "budget of %s: %s\n", args[0], budgetText(&resp.Budget))
			return nil
		},
	}
	runFlag(cmd, &runID)
	f := cmd.Flags()
	f.Int64Var(&b.MaxTokens, "max-tokens", 0, "prompt + completion tokens")
	f.Float64Var(&b.MaxCostUSD, "max-cost", 0, "US dollars")
	f.Int64Var(&b.MaxTurns, "max-turns", 0, "model calls")
	f.BoolVar(&stop, "stop", false, "fail the held model calls instead")
	f.StringVar(&reason, "reason", "", "why (recorded)")
	return cmd
}

func budgetText(b *api.BudgetStatus) string {
	lim := func(v string, set bool) string {
		if !set {
			return "no limit"
		}
		return v
	}
	s := fmt.Sprintf("tokens %d of %s, cost $%.4f of %s, turns %d of %s", b.Used.Tokens(),
		lim(fmt.Sprint(b.Budget.MaxTokens), b.Budget.MaxTokens > 0), b.Used.CostUSD,
		lim(fmt.Sprintf("$%.4f", b.Budget.MaxCostUSD), b.Budget.MaxCostUSD > 0), b.Turns,
		lim(fmt.Sprint(b.Budget.MaxTurns), b.Budget.MaxTurns > 0))
	if b.Exceeded != "" {
		s += " — EXHAUSTED: " + b.Exceeded
	}
	return s
}

// printUsage adds usage and budget to describe's output.
func printUsage(w io.Writer, d *api.DescribeWorkflowResponse) {
	if u := d.Usage; u != nil && (u.Total.Tokens() > 0 || u.Calls > 0) {
		fmt.Fprintf(w, "\nUsage     %d model calls, %d tokens (%d prompt, %d cached, %d completion), $%.4f over %d attempts\n",
			u.Calls, u.Total.Tokens(), u.Total.PromptTokens, u.Total.CachedTokens, u.Total.CompletionTokens, u.Total.CostUSD, u.Total.Attempts)
		for _, m := range u.ByModel {
			fmt.Fprintf(w, "  %-24s %d tokens, $%.4f\n", m.Model, m.Tokens(), m.CostUSD)
		}
		if len(u.Unpriced) > 0 {
			fmt.Fprintf(w, "  not priced (cost counted as 0): %s\n", strings.Join(u.Unpriced, ", "))
		}
		if wu := d.WorkflowUsage; wu != nil && wu.Total.Tokens() != u.Total.Tokens() {
			fmt.Fprintf(w, "  all runs of %s: %d tokens, $%.4f\n", d.Info.WorkflowID, wu.Total.Tokens(), wu.Total.CostUSD)
		}
	}
	if b := d.Budget; b != nil && (!b.Budget.IsZero() || b.Exceeded != "") {
		fmt.Fprintf(w, "Budget    %s\n", budgetText(b))
	}
}

// wfWatch prints a run's live stream.
func wfWatch(g *globals) *cobra.Command {
	var runID string
	cmd := &cobra.Command{
		Use:   "watch WORKFLOW_ID",
		Short: "Print a run's model output live, as it is produced (until the run closes)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, runID, err := g.dialRun(cmd.Context(), args[0], runID)
			if err != nil {
				return err
			}
			return watchStream(cmd.Context(), g, c.Service(), args[0], runID)
		},
	}
	runFlag(cmd, &runID)
	return cmd
}

func watchStream(ctx context.Context, g *globals, svc api.Service, id, runID string) error {
	var after int64
	p := &streamPrinter{w: g.stdout, open: map[[2]int64]bool{}}
	rc := &reconnector{g: g}
	for {
		var resp *api.WatchStreamResponse
		err := rc.do(ctx, func(ctx context.Context) error {
			var err error
			resp, err = svc.WatchStream(ctx, &api.WatchStreamRequest{WorkflowID: id, RunID: runID, AfterSeq: after, Wait: true})
			return err
		})
		if err != nil {
			return err
		}
		runID = resp.RunID
		if resp.NextSeq <= after && !resp.Closed { // the server restarted: its window starts afresh
			after = 0
			if !g.json {
				p.closeCall()
				fmt.Fprintln(g.stdout, "\n[the server restarted: the output before it is gone]")
			}
			continue
		}
		if resp.Gap && !g.json {
			p.closeCall()
			fmt.Fprintln(g.stdout, "\n[… earlier output dropped]")
		}
		for _, ev := range resp.Events {
			after = ev.Seq
			if !g.json {
				p.print(ev)
				continue
			}
			b, err := view.Marshal(ev) // one object a line, by the --json convention
			if err != nil {
				return err
			}
			if _, err := g.stdout.Write(append(b, '\n')); err != nil {
				return err
			}
		}
		if resp.Closed {
			if !g.json {
				p.closeCall()
				fmt.Fprintln(g.stdout, "\n[run closed]")
			}
			return nil
		}
		if resp.NextSeq > after+1 && len(resp.Events) == 0 {
			after = resp.NextSeq - 1
		}
	}
}

// streamPrinter prints a run's stream for people: each attempt's text
// under a header, each tool call as "→ name(arguments)".
type streamPrinter struct {
	w    io.Writer
	open map[[2]int64]bool // (scheduled event, attempt) streaming
	call bool              // a tool call's "(" is open
}

func (p *streamPrinter) print(ev api.StreamEvent) {
	k := [2]int64{ev.ScheduledEventID, int64(ev.Attempt)}
	if !p.open[k] && (ev.Kind == api.StreamText || ev.Kind == api.StreamToolCall) {
		p.closeCall()
		p.open[k] = true
		fmt.Fprintf(p.w, "\n── %s (event %d, attempt %d)\n", ev.ActivityType, ev.ScheduledEventID, ev.Attempt)
	}
	switch ev.Kind {
	case api.StreamText:
		p.closeCall()
		fmt.Fprint(p.w, ev.Text)
	case api.StreamToolCall:
		if ev.ToolName != "" {
			p.closeCall()
			fmt.Fprintf(p.w, "\n→ %s(", ev.ToolName)
			p.call = true
		}
		fmt.Fprint(p.w, ev.Text)
	case api.StreamDone:
		p.closeCall()
		delete(p.open, k)
		fmt.Fprintln(p.w, "\n── done")
	case api.StreamSuperseded:
		p.closeCall()
		delete(p.open, k)
		fmt.Fprintln(p.w, "\n── superseded: this attempt ended without an answer; ignore the text above")
	}
}

// closeCall closes the tool call being printed, if one is.
func (p *streamPrinter) closeCall() {
	if p.call {
		fmt.Fprint(p.w, ")")
		p.call = false
	}
}

// readPricing reads a price table: {"model": {"input": …, "cached_input": …, "output": …}}.
func readPricing(path string) (engine.Pricing, error) {
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p engine.Pricing
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, usagef("--pricing %s: %v", path, err)
	}
	return p, nil
}
