package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

func scheduleCommand(g *globals) *cobra.Command {
	return clientFlags(group("schedule", "Start workflows on a cron expression or an interval (docs/schedules.md)",
		schedCreate(g), schedList(g), schedDescribe(g), schedUpdate(g), schedPause(g), schedUnpause(g), schedTrigger(g),
		schedBackfill(g), schedDelete(g)), g)
}

// scheduleRef names the schedule in the --json output of the commands
// that change one.
type scheduleRef struct {
	ScheduleID string
}

// schedFlags are the flags of create and update.
type schedFlags struct {
	cron, zone, start, end, typ, queue, overlap, note string
	interval, offset, jitter, catchup                 time.Duration
	runTimeout, execTimeout, taskTimeout              time.Duration
	paused                                            bool
	input                                             func() (history.Payload, error)
}

func (sf *schedFlags) add(cmd *cobra.Command, g *globals) {
	f := cmd.Flags()
	f.StringVar(&sf.cron, "cron", "", `cron expression: 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, or @hourly, @daily, @weekly, @monthly, @yearly`)
	f.DurationVar(&sf.interval, "interval", 0, "fire every DURATION, counted from the Unix epoch")
	f.DurationVar(&sf.offset, "offset", 0, "with --interval: shift each time by DURATION (--interval 1h --offset 15m: at :15)")
	f.DurationVar(&sf.jitter, "jitter", 0, "delay each action by up to DURATION (the same delay on every retry)")
	f.StringVar(&sf.zone, "time-zone", "", "IANA time zone of --cron (default UTC)")
	f.StringVar(&sf.start, "start", "", "no action before this time (RFC 3339)")
	f.StringVar(&sf.end, "end", "", "no action after this time (RFC 3339)")
	f.StringVar(&sf.typ, "type", "", "workflow type of each run")
	f.StringVar(&sf.queue, "task-queue", "", "task queue of each run")
	sf.input = inputFlags(cmd, g, "input", "each run's input")
	f.StringVar(&sf.overlap, "overlap", "", "when the previous run is still open: skip (default), buffer-one, buffer-all, cancel-other, terminate-other, allow-all")
	f.DurationVar(&sf.catchup, "catchup-window", 0, "after downtime, fire missed actions this recent (default 1 year)")
	f.DurationVar(&sf.runTimeout, "run-timeout", 0, "each run's timeout")
	f.DurationVar(&sf.execTimeout, "execution-timeout", 0, "each run's execution timeout")
	f.DurationVar(&sf.taskTimeout, "task-timeout", 0, "each run's workflow task timeout")
	f.StringVar(&sf.note, "note", "", "a note (why it is paused)")
	cmd.MarkFlagsMutuallyExclusive("cron", "interval")
}

// apply changes s by the flags set (all of them for create).
func (sf *schedFlags) apply(cmd *cobra.Command, s *api.Schedule) error {
	f := cmd.Flags()
	set := func(name string) bool { return f.Changed(name) }
	if set("cron") {
		s.Spec.Cron, s.Spec.Interval, s.Spec.Offset = sf.cron, 0, 0
	}
	if set("interval") {
		s.Spec.Interval, s.Spec.Cron = sf.interval, ""
	}
	if set("offset") {
		s.Spec.Offset = sf.offset
	}
	if set("jitter") {
		s.Spec.Jitter = sf.jitter
	}
	if set("time-zone") {
		s.Spec.TimeZone = sf.zone
	}
	for _, tf := range []struct {
		name, val string
		dst       *time.Time
	}{{"start", sf.start, &s.Spec.Start}, {"end", sf.end, &s.Spec.End}} {
		if !set(tf.name) {
			continue
		}
		t, err := parseAbsolute("--"+tf.name, tf.val)
		if err != nil {
			return err
		}
		*tf.dst = t
	}
	if set("type") {
		s.Action.WorkflowType = sf.typ
	}
	if set("task-queue") {
		s.Action.TaskQueue = sf.queue
	}
	if set("input") || set("input-file") {
		in, err := sf.input()
		if err != nil {
			return err
		}
		s.Action.Input = in
	}
	if set("overlap") {
		p, err := api.ParseOverlapPolicy(sf.overlap)
		if err != nil {
			return usageError{err}
		}
		s.Policies.Overlap = p
	}
	if set("catchup-window") {
		s.Policies.CatchupWindow = sf.catchup
	}
	if set("run-timeout") {
		s.Action.RunTimeout = sf.runTimeout
	}
	if set("execution-timeout") {
		s.Action.ExecutionTimeout = sf.execTimeout
	}
	if set("task-timeout") {
		s.Action.TaskTimeout = sf.taskTimeout
	}
	return nil
}

// parseAbsolute reads an RFC 3339 time or a date (UTC).
func parseAbsolute(flag, s string) (time.Time, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usagef("%s %q: want an RFC 3339 time (2026-11-01T09:30:00Z) or a date", flag, s)
}

func schedCreate(g *globals) *cobra.Command {
	var sf schedFlags
	var id string
	cmd := &cobra.Command{
		Use:   "create --id ID (--cron EXPR | --interval DURATION) --type TYPE --task-queue QUEUE [--input JSON]",
		Short: "Create a schedule",
		Long: `Creates a schedule. Each action starts a run of --type on --task-queue whose
workflow id is the schedule id and the nominal time: ID-2026-11-29T12:00:00Z.
A nominal time fires once, even across a crash of the server.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("cron") && !cmd.Flags().Changed("interval") {
				return usagef("give --cron EXPR or --interval DURATION")
			}
			s := api.Schedule{Paused: sf.paused, Note: sf.note}
			if err := sf.apply(cmd, &s); err != nil {
				return err
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			if _, err := c.Service().CreateSchedule(cmd.Context(), &api.CreateScheduleRequest{ScheduleID: id, Schedule: s}); err != nil {
				return err
			}
			return g.emit(scheduleRef{id}, func(w io.Writer) { fmt.Fprintf(w, "created schedule %s\n", id) })
		},
	}
	sf.add(cmd, g)
	cmd.Flags().StringVar(&id, "id", "", "schedule id")
	cmd.Flags().BoolVar(&sf.paused, "paused", false, "create it paused (with --note)")
	for _, n := range []string{"id", "type", "task-queue"} {
		_ = cmd.MarkFlagRequired(n)
	}
	return cmd
}

func schedUpdate(g *globals) *cobra.Command {
	var sf schedFlags
	cmd := &cobra.Command{
		Use:   "update ID [--cron EXPR | --interval DURATION] [--type TYPE] [--task-queue QUEUE] [...]",
		Short: "Change a schedule's spec, action or policies (the flags given)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			info, err := c.DescribeSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			s := info.Schedule
			if err := sf.apply(cmd, &s); err != nil {
				return err
			}
			if _, err := c.Service().UpdateSchedule(cmd.Context(), &api.UpdateScheduleRequest{ScheduleID: args[0], Schedule: s}); err != nil {
				return err
			}
			return g.emit(scheduleRef{args[0]}, func(w io.Writer) { fmt.Fprintf(w, "updated schedule %s\n", args[0]) })
		},
	}
	sf.add(cmd, g)
	return cmd
}

func schedDescribe(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe ID",
		Short: "Show a schedule: its spec, state, next and recent actions",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			info, err := c.DescribeSchedule(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.emit(info, func(w io.Writer) { printSchedule(w, info, time.Now()) })
		},
	}
}

// schedulesOut is schedule list's --json ("schedules", [] when none).
type schedulesOut struct {
	Schedules     []api.ScheduleInfo `view:"keep"`
	NextPageToken []byte
}

func schedList(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List schedules by id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			resp, err := c.ListSchedules(cmd.Context(), &api.ListSchedulesRequest{PageSize: limit})
			if err != nil {
				return err
			}
			out := schedulesOut{Schedules: resp.Schedules, NextPageToken: resp.NextPageToken}
			if out.Schedules == nil {
				out.Schedules = []api.ScheduleInfo{}
			}
			return g.emit(out, func(w io.Writer) {
				now := time.Now()
				rows := [][]string{}
				for _, s := range resp.Schedules {
					next := "-"
					if len(s.NextActionTimes) > 0 {
						next = relative(s.NextActionTimes[0], now)
					}
					rows = append(rows, []string{s.ScheduleID, specText(s.Schedule.Spec), s.Schedule.Action.WorkflowType, stateText(s.Schedule), next,
						fmt.Sprint(s.Actions)})
				}
				table(w, []string{"SCHEDULE", "SPEC", "TYPE", "STATE", "NEXT", "ACTIONS"}, rows)
			})
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "at most this many")
	return cmd
}

func specText(s api.ScheduleSpec) string {
	var b strings.Builder
	if s.Cron != "" {
		fmt.Fprintf(&b, "cron %q", s.Cron)
		if s.TimeZone != "" {
			fmt.Fprintf(&b, " in %s", s.TimeZone)
		}
	} else {
		fmt.Fprintf(&b, "every %s", s.Interval)
		if s.Offset != 0 {
			fmt.Fprintf(&b, " +%s", s.Offset)
		}
	}
	if s.Jitter != 0 {
		fmt.Fprintf(&b, ", jitter %s", s.Jitter)
	}
	return b.String()
}

func stateText(s api.Schedule) string {
	if !s.Paused {
		return "active"
	}
	if s.Note != "" {
		return "paused: " + s.Note
	}
	return "paused"
}

func printSchedule(w io.Writer, s *api.ScheduleInfo, now time.Time) {
	fmt.Fprintf(w, "schedule   %s\n", s.ScheduleID)
	fmt.Fprintf(w, "spec       %s\n", specText(s.Schedule.Spec))
	if !s.Schedule.Spec.Start.IsZero() || !s.Schedule.Spec.End.IsZero() {
		fmt.Fprintf(w, "between    %s and %s\n", timeText(s.Schedule.Spec.Start), timeText(s.Schedule.Spec.End))
	}
	fmt.Fprintf(w, "action     %s on %s\n", s.Schedule.Action.WorkflowType, s.Schedule.Action.TaskQueue)
	window := s.Schedule.Policies.CatchupWindow
	if window == 0 {
		window = api.DefaultCatchupWindow
	}
	fmt.Fprintf(w, "policies   overlap %s, catch-up window %s\n", s.Schedule.Policies.Overlap, window)
	fmt.Fprintf(w, "state      %s\n", stateText(s.Schedule))
	fmt.Fprintf(w, "actions    %d started, %d skipped by the overlap policy, %d missed (older than the catch-up window)\n",
		s.Actions, s.OverlapSkipped, s.MissedCatchup)
	for _, b := range s.Buffered {
		fmt.Fprintf(w, "buffered   %s\n", timeText(b))
	}
	for _, n := range s.NextActionTimes {
		fmt.Fprintf(w, "next       %s (%s)\n", timeText(n), relative(n, now))
	}
	if len(s.RecentActions) == 0 {
		return
	}
	fmt.Fprintln(w)
	rows := [][]string{}
	for i := len(s.RecentActions) - 1; i >= 0; i-- {
		a := s.RecentActions[i]
		status := a.Status.String()
		if a.Error != "" {
			status = "not started: " + a.Error
		}
		rows = append(rows, []string{timeText(a.NominalTime), timeText(a.ActualTime), a.Trigger, a.WorkflowID, a.RunID, status})
	}
	table(w, []string{"NOMINAL", "STARTED", "TRIGGER", "WORKFLOW", "RUN", "STATUS"}, rows)
}

func timeText(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// patchCommand is a command that patches one schedule.
func patchCommand(g *globals, use, short, done string, build func(cmd *cobra.Command, req *api.PatchScheduleRequest) error,
	flags func(cmd *cobra.Command)) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := api.PatchScheduleRequest{ScheduleID: args[0]}
			if err := build(cmd, &req); err != nil {
				return err
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			if err := c.PatchSchedule(cmd.Context(), req); err != nil {
				return err
			}
			return g.emit(scheduleRef{args[0]}, func(w io.Writer) { fmt.Fprintf(w, "%s schedule %s\n", done, args[0]) })
		},
	}
	flags(cmd)
	return cmd
}

func schedPause(g *globals) *cobra.Command {
	var note string
	return patchCommand(g, "pause ID [--note TEXT]", "Pause a schedule (its actions are not taken, nor caught up later)", "paused",
		func(_ *cobra.Command, req *api.PatchScheduleRequest) error {
			req.Pause, req.Note = true, note
			return nil
		}, func(cmd *cobra.Command) { cmd.Flags().StringVar(&note, "note", "", "why") })
}

func schedUnpause(g *globals) *cobra.Command {
	var note string
	return patchCommand(g, "unpause ID [--note TEXT]", "Unpause a schedule", "unpaused",
		func(_ *cobra.Command, req *api.PatchScheduleRequest) error {
			req.Unpause, req.Note = true, note
			return nil
		}, func(cmd *cobra.Command) { cmd.Flags().StringVar(&note, "note", "", "why") })
}

func overlapFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVar(dst, "overlap", "allow-all", "when the previous run is still open: skip, buffer-one, buffer-all, cancel-other, terminate-other, allow-all")
}

func schedTrigger(g *globals) *cobra.Command {
	var overlap string
	return patchCommand(g, "trigger ID [--overlap POLICY]", "Take an action now", "triggered",
		func(_ *cobra.Command, req *api.PatchScheduleRequest) error {
			p, err := api.ParseOverlapPolicy(overlap)
			if err != nil {
				return usageError{err}
			}
			req.TriggerNow, req.TriggerOverlap = true, p
			return nil
		}, func(cmd *cobra.Command) { overlapFlag(cmd, &overlap) })
}

func schedBackfill(g *globals) *cobra.Command {
	var overlap, start, end string
	return patchCommand(g, "backfill ID --start TIME --end TIME [--overlap POLICY]",
		"Take the actions of the nominal times in (start, end]", "backfilled",
		func(_ *cobra.Command, req *api.PatchScheduleRequest) error {
			p, err := api.ParseOverlapPolicy(overlap)
			if err != nil {
				return usageError{err}
			}
			r := api.BackfillRange{Overlap: p}
			if r.Start, err = parseAbsolute("--start", start); err != nil {
				return err
			}
			if r.End, err = parseAbsolute("--end", end); err != nil {
				return err
			}
			req.Backfill = []api.BackfillRange{r}
			return nil
		}, func(cmd *cobra.Command) {
			overlapFlag(cmd, &overlap)
			cmd.Flags().StringVar(&start, "start", "", "from this time, exclusive (RFC 3339)")
			cmd.Flags().StringVar(&end, "end", "", "to this time, inclusive (RFC 3339)")
			_ = cmd.MarkFlagRequired("start")
			_ = cmd.MarkFlagRequired("end")
		})
}

func schedDelete(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "delete ID",
		Short: "Delete a schedule (the runs it started stay)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			if err := c.DeleteSchedule(cmd.Context(), args[0]); err != nil {
				return err
			}
			return g.emit(scheduleRef{args[0]}, func(w io.Writer) { fmt.Fprintf(w, "deleted schedule %s\n", args[0]) })
		},
	}
}
