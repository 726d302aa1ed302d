package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
)

// effectsCommand reads the effects ledger: every action with an
// idempotency key, across the runs of its workflow id.
func effectsCommand(g *globals) *cobra.Command {
	return clientFlags(group("effects", "Read the effects ledger (actions with an idempotency key); mark a restored store in doubt",
		effectsList(g), effectsDoubt(g)), g)
}

func effectsList(g *globals) *cobra.Command {
	var req api.ListEffectsRequest
	var limit int
	cmd := &cobra.Command{
		Use:   "list [--workflow ID] [--duplicates] [--in-doubt] [--key-prefix K]",
		Short: "List the ledger's actions: key, workflow, runs, activity, state, attempts, duplicates, result",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			var effects []api.EffectInfo
			for len(effects) < limit {
				req.PageSize = min(limit-len(effects), 1000)
				resp, err := c.ListEffects(cmd.Context(), &req)
				if err != nil {
					return err
				}
				effects = append(effects, resp.Effects...)
				if resp.NextPageToken == nil {
					break
				}
				req.NextPageToken = resp.NextPageToken
			}
			return g.emit(effectsOut{effects}, func(w io.Writer) { printEffects(g, w, effects) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.WorkflowID, "workflow", "", "only this workflow id's actions")
	f.StringVar(&req.KeyPrefix, "key-prefix", "", "only keys starting with this")
	f.BoolVar(&req.DuplicatesOnly, "duplicates", false, "only actions with a duplicate or possible duplicate")
	f.BoolVar(&req.InDoubtOnly, "in-doubt", false, "only actions in doubt after a recovery of the store (a restore, an accepted data loss)")
	f.IntVar(&limit, "limit", 100, "at most this many actions")
	return cmd
}

// effectsOut is list's --json: an object, as every list's is, whose list
// is [] when the ledger holds nothing.
type effectsOut struct {
	Effects []api.EffectInfo `view:"keep"`
}

func printEffects(g *globals, w io.Writer, effects []api.EffectInfo) {
	now := time.Now()
	rows := make([][]string, 0, len(effects))
	for _, e := range effects {
		dup := ""
		if e.Duplicates > 0 {
			dup = g.alarm(fmt.Sprintf("DUPLICATE ×%d", e.Duplicates))
		}
		if e.Conflicts > 0 {
			dup = strings.TrimSpace(dup + " " + g.alarm(fmt.Sprintf("CONFLICT ×%d", e.Conflicts)))
		}
		runs := abbreviate(e.RunID, 12)
		if len(e.RunIDs) > 1 {
			runs += fmt.Sprintf(" (+%d)", len(e.RunIDs)-1)
		}
		rows = append(rows, []string{abbreviate(e.IdempotencyKey, 16), e.WorkflowID, runs, e.ActivityType, e.Effect.String(),
			e.State.String(), fmt.Sprint(e.Attempts), dup, relative(e.Updated, now), abbreviate(view.PayloadText(e.Result), 40)})
	}
	table(w, []string{"KEY", "WORKFLOW ID", "RUN", "ACTIVITY", "EFFECT", "STATE", "ATTEMPTS", "DUPLICATES", "UPDATED", "RESULT"}, rows)
	for _, e := range effects {
		if e.InDoubt != "" {
			fmt.Fprintf(w, "%s %s key %s (workflow %s run %s, event %d): %s\n  %s\n", g.alarm("IN DOUBT"), e.ActivityType, e.IdempotencyKey,
				e.WorkflowID, abbreviate(e.RunID, 12), e.ScheduledEventID, "its outcome is unknown after a recovery of the store", e.InDoubt)
		}
	}
	for _, e := range effects {
		for _, r := range e.Reports {
			if r.Verdict != api.VerdictConfirmation {
				printReport(g, w, r)
			}
		}
	}
}

// printInDoubt renders the pending activities in doubt after a recovery of
// the store (describe), with what happens next.
func printInDoubt(g *globals, w io.Writer, pending []api.PendingActivity) {
	for _, a := range pending {
		if a.InDoubt == "" {
			continue
		}
		next := "the run is paused on it: check the downstream system, then cairn workflow resolve"
		switch {
		case a.State == api.ActivityStateReconciling:
			next = "its Reconcile lookup runs before any attempt"
		case a.IdempotencyKey == "":
			next = "put in doubt once its key is assigned"
		}
		fmt.Fprintf(w, "  %s event %d (%s): its outcome is unknown after a recovery of the store; %s\n    %s\n",
			g.alarm("IN DOUBT"), a.ScheduledEventID, a.ActivityType, next, a.InDoubt)
	}
}

// printReport renders one judged late report on two lines.
func printReport(g *globals, w io.Writer, r api.EffectReport) {
	when := "while the run was open"
	if r.AfterClose {
		when = "after the run closed"
	}
	fmt.Fprintf(w, "%s %s key %s (workflow %s run %s, event %d): attempt %d (%s) reported %s %s",
		g.alarm(strings.ToUpper(strings.ReplaceAll(r.Verdict.String(), "_", " "))), r.ActivityType, r.IdempotencyKey, r.WorkflowID,
		abbreviate(r.RunID, 12), r.ScheduledEventID, r.Attempt, r.Identity, r.Outcome, when)
	if r.OtherAttempt > 0 {
		fmt.Fprintf(w, "; attempt %d performed it too", r.OtherAttempt)
	}
	fmt.Fprintf(w, "\n  %s", r.Detail)
	if !r.Result.IsZero() {
		fmt.Fprintf(w, " → %s", abbreviate(view.PayloadText(r.Result), 60))
	}
	fmt.Fprintln(w)
}

// alarm renders s in red on a terminal.
func (g *globals) alarm(s string) string {
	if g.color {
		return "\x1b[1;31m" + s + "\x1b[0m"
	}
	return s
}
