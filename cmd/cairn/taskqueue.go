package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
)

func taskQueueCommand(g *globals) *cobra.Command {
	describe := &cobra.Command{
		Use:   "describe QUEUE",
		Short: "Show a task queue's backlog and the workers polling it",
		Long: `Shows the tasks waiting on the queue for a worker (its backlog) and the workers
that polled it within the last 5 minutes, with when each was last seen. A run
on a queue nobody polls shows here as a backlog with no pollers.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			q, err := c.DescribeTaskQueue(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return g.emit(q, func(w io.Writer) { printTaskQueue(w, q, time.Now()) })
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the task queues with a backlog or a recent poller",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			qs, err := c.ListTaskQueues(cmd.Context())
			if err != nil {
				return err
			}
			return g.emit(queuesOut{qs}, func(w io.Writer) {
				now := time.Now()
				rows := [][]string{}
				for _, q := range qs {
					rows = append(rows, []string{q.Name, fmt.Sprint(q.WorkflowBacklog), fmt.Sprint(q.ActivityBacklog),
						fmt.Sprint(len(q.WorkflowPollers)), fmt.Sprint(len(q.ActivityPollers)), lastSeen(q, now), queueNote(q)})
				}
				table(w, []string{"QUEUE", "WORKFLOW BACKLOG", "ACTIVITY BACKLOG", "WORKFLOW POLLERS", "ACTIVITY POLLERS", "LAST POLL", ""}, rows)
			})
		},
	}
	return clientFlags(group("task-queue", "Inspect task queues and their workers", describe, list, limitCommand(g)), g)
}

// limitCommand is `cairn task-queue limit`: set or clear an activity limit.
func limitCommand(g *globals) *cobra.Command {
	var (
		l     api.ActivityLimit
		clear bool
	)
	cmd := &cobra.Command{
		Use:   "limit QUEUE",
		Short: "Limit the activities of a task queue in flight and per second",
		Long: `Sets how many activities of the queue may be in flight at once across all its
workers (--max) and how many may start per second (--rate, in bursts of
--burst), for an activity type (--type), a limit key the activities declare
(--key: a model "openai/gpt-4o", a tenant "tenant/acme"; "tenant/*" limits
each tenant apart), or both. An activity waits on the queue until every
limit it falls under has room; a slot held by a worker that died is freed
when the activity's lease ends. --clear removes the limit of --type/--key.
The limits are durable; task-queue describe shows them and their use.`,
		Example: `  cairn task-queue limit agents --type llm.Chat --key openai/gpt-4o --max 8 --rate 5
  cairn task-queue limit agents --key 'tenant/*' --max 2
  cairn task-queue limit agents --key 'tenant/*' --clear`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l.TaskQueue = args[0]
			if !clear && l.MaxInFlight == 0 && l.RatePerSecond == 0 {
				return usagef("give --max or --rate (or --clear to remove the limit)")
			}
			c, err := g.dial()
			if err != nil {
				return err
			}
			var ls []api.ActivityLimit
			if clear {
				ls, err = c.ClearActivityLimit(cmd.Context(), l.TaskQueue, l.ActivityType, l.LimitKey)
			} else {
				ls, err = c.SetActivityLimit(cmd.Context(), l)
			}
			if err != nil {
				return err
			}
			return g.emit(limitsOut{ls}, func(w io.Writer) {
				if len(ls) == 0 {
					fmt.Fprintf(w, "Queue %s has no activity limit.\n", l.TaskQueue)
					return
				}
				rows := [][]string{}
				for _, x := range ls {
					rows = append(rows, limitRow(x))
				}
				table(w, limitHeader, rows)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&l.ActivityType, "type", "", "the activity type limited (empty: every type)")
	f.StringVar(&l.LimitKey, "key", "", `the limit key limited (empty: any key; "prefix*": each key of the family apart)`)
	f.IntVar(&l.MaxInFlight, "max", 0, "at most this many in flight at once (0: no bound)")
	f.Float64Var(&l.RatePerSecond, "rate", 0, "at most this many dispatched per second (0: no bound)")
	f.IntVar(&l.Burst, "burst", 0, "the rate's burst (0: the rate rounded up)")
	f.BoolVar(&clear, "clear", false, "remove the limit of --type and --key")
	return cmd
}

// limitsOut is task-queue limit's --json: the queue's limits ("limits",
// [] when there is none).
type limitsOut struct {
	Limits []api.ActivityLimit `view:"keep"`
}

var limitHeader = []string{"TYPE", "KEY", "MAX IN FLIGHT", "RATE/S", "BURST"}

func limitRow(l api.ActivityLimit) []string {
	orAll := func(s string) string {
		if s == "" {
			return "(any)"
		}
		return s
	}
	orNone := func(v string, zero bool) string {
		if zero {
			return "-"
		}
		return v
	}
	return []string{orAll(l.ActivityType), orAll(l.LimitKey), orNone(fmt.Sprint(l.MaxInFlight), l.MaxInFlight == 0),
		orNone(fmt.Sprint(l.RatePerSecond), l.RatePerSecond == 0), orNone(fmt.Sprint(l.Burst), l.Burst == 0)}
}

// printLimits shows a queue's activity limits, their use and its backlog
// by limit key.
func printLimits(w io.Writer, q *api.TaskQueueInfo) {
	if len(q.ActivityLimits) > 0 {
		rows := [][]string{}
		for _, l := range q.ActivityLimits {
			rows = append(rows, append(limitRow(l.Limit), fmt.Sprint(l.InFlight), fmt.Sprint(l.Waiting)))
			for _, k := range l.Keys {
				rows = append(rows, []string{"", "  " + k.Key, "", "", "", fmt.Sprint(k.InFlight), fmt.Sprint(k.Waiting)})
			}
		}
		fmt.Fprintln(w)
		table(w, append(append([]string{}, limitHeader...), "IN FLIGHT", "WAITING"), rows)
	}
	if len(q.ActivityKeys) > 0 {
		rows := [][]string{}
		for _, k := range q.ActivityKeys {
			key := k.Key
			if key == "" {
				key = "(no key)"
			}
			rows = append(rows, []string{key, fmt.Sprint(k.Waiting), fmt.Sprint(k.InFlight)})
		}
		fmt.Fprintln(w)
		table(w, []string{"LIMIT KEY", "QUEUED", "IN FLIGHT (LIMITED)"}, rows)
	}
}

// queuesOut is task-queue list's --json: the queues ("queues", [] when
// there is none).
type queuesOut struct {
	Queues []api.TaskQueueInfo `view:"keep"`
}

// lastSeen is when any worker last polled q.
func lastSeen(q api.TaskQueueInfo, now time.Time) string {
	var last time.Time
	for _, p := range append(append([]api.PollerInfo(nil), q.WorkflowPollers...), q.ActivityPollers...) {
		if p.LastSeen.After(last) {
			last = p.LastSeen
		}
	}
	return relative(last, now)
}

// queueNote warns about a queue whose tasks nobody takes.
func queueNote(q api.TaskQueueInfo) string {
	switch {
	case q.WorkflowBacklog > 0 && len(q.WorkflowPollers) == 0:
		return "STUCK: workflow tasks wait and no worker polls for them"
	case q.ActivityBacklog > 0 && len(q.ActivityPollers) == 0:
		return "STUCK: activity tasks wait and no worker polls for them"
	}
	return ""
}

func printTaskQueue(w io.Writer, q *api.TaskQueueInfo, now time.Time) {
	fmt.Fprintf(w, "Queue     %s\nBacklog   %d workflow tasks, %d activity tasks\n", q.Name, q.WorkflowBacklog, q.ActivityBacklog)
	if note := queueNote(*q); note != "" {
		fmt.Fprintf(w, "%s\n", note)
	}
	printLimits(w, q)
	if len(q.WorkflowPollers)+len(q.ActivityPollers) == 0 {
		fmt.Fprintf(w, "\nNo worker polled this queue in the last %s.\n", api.PollerRetention)
		return
	}
	rows := [][]string{}
	add := func(kind string, ps []api.PollerInfo) {
		for _, p := range ps {
			state := "idle"
			if p.Polling > 0 {
				state = fmt.Sprintf("polling (%d)", p.Polling)
			}
			rows = append(rows, []string{p.Identity, kind, relative(p.LastSeen, now), state})
		}
	}
	add("workflow", q.WorkflowPollers)
	add("activity", q.ActivityPollers)
	fmt.Fprintln(w)
	table(w, []string{"POLLER", "TASKS", "LAST SEEN", "NOW"}, rows)
}
