package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
)

// listFilter holds the filter flags list and count share.
type listFilter struct {
	status, typ, idPrefix, after, before, pause string
	corrupt                                     bool
}

func (lf *listFilter) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&lf.status, "status", "", "only runs with this status (running, paused, completed, failed, canceled, terminated, timed_out, continued_as_new)")
	f.BoolVar(&lf.corrupt, "corrupt", false, "only runs quarantined because their stored data is damaged")
	f.StringVar(&lf.pause, "pause", "", "only paused runs waiting for this: approval (an agent's tool call), outcome_unknown, budget")
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
	req := &api.ListWorkflowsRequest{WorkflowType: lf.typ, WorkflowIDPrefix: lf.idPrefix, Corrupt: lf.corrupt, PauseKind: lf.pause}
	switch lf.pause {
	case "", api.PauseApproval, api.PauseOutcomeUnknown, api.PauseBudget:
	default:
		return nil, usagef("--pause %q: want approval, outcome_unknown or budget", lf.pause)
	}
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
		Use:   "list [--status S] [--pause KIND] [--type T] [--id-prefix P] [--started-after T] [--started-before T] [--corrupt]",
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
			return g.emit(listOut{resp.Workflows, resp.NextPageToken}, func(w io.Writer) { printList(g, w, resp) })
		},
	}
	lf.flags(cmd)
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs")
	cmd.Flags().StringVar(&page, "page-token", "", "continue after the last page (the nextPageToken of --json)")
	return cmd
}

// listOut is list's --json: the page of runs ("workflows", [] when there
// is none) and the token of the next page.
type listOut struct {
	Workflows     []api.WorkflowInfo `view:"keep"`
	NextPageToken []byte
}

// countOut is count's --json: the total and one entry per status with
// runs ("byStatus", [] when there is none).
type countOut struct {
	Total    int64
	ByStatus []api.StatusCount `view:"keep"`
}

func printList(g *globals, w io.Writer, resp *api.ListWorkflowsResponse) {
	now := time.Now()
	rows := make([][]string, 0, len(resp.Workflows))
	for _, wi := range resp.Workflows {
		note := ""
		switch {
		case wi.Corrupt != "":
			note = "CORRUPT: " + abbreviate(wi.Corrupt, 60)
		case wi.Pause != nil && wi.Pause.Kind == api.PauseApproval:
			note = approvalNote(&wi)
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
			return g.emit(countOut{resp.Total, resp.ByStatus}, func(w io.Writer) {
				fmt.Fprintf(w, "%d runs\n", resp.Total)
				rows := [][]string{}
				for _, c := range resp.ByStatus {
					rows = append(rows, []string{g.statusText(c.Status), fmt.Sprint(c.Count)})
				}
				if resp.Quarantined > 0 { // apart from their status: cairn workflow list --corrupt
					rows = append(rows, []string{"quarantined", fmt.Sprint(resp.Quarantined)})
				}
				if len(rows) > 0 {
					table(w, []string{"STATUS", "RUNS"}, rows)
				}
				for _, p := range resp.Paused {
					fmt.Fprintf(w, "  paused on %s: %d\n", pauseKindText(p.Kind), p.Count)
				}
			})
		},
	}
	lf.filterFlags(cmd)
	return cmd
}
