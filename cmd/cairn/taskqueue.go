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
	return clientFlags(group("task-queue", "Inspect task queues and their workers", describe, list), g)
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
