package engine

import (
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
)

// unpolled names the task queues st has a task waiting on that no worker
// polls (api.DescribeWorkflowResponse.Unpolled): a workflow task queued on
// the run's task queue (not on a worker's sticky queue, not in backoff),
// or an activity attempt or lookup queued on its task queue.
func (e *Engine) unpolled(st *machine.RunState, now time.Time) []api.UnpolledQueue {
	if !st.Status.Open() {
		return nil
	}
	var out []api.UnpolledQueue
	seen := map[queueKind]bool{}
	add := func(queue string, activity bool) {
		k := queueKind{queue, activity}
		if seen[k] {
			return
		}
		seen[k] = true
		if u, ok := e.unpolledQueue(queue, activity, now); ok {
			out = append(out, u)
		}
	}
	w := st.WFT
	if w.Scheduled && !w.Started && !w.OnSticky && !w.BackoffUntil.After(now) {
		add(st.TaskQueue, false)
	}
	for _, id := range sortedKeys(st.Activities) {
		if a := st.Activities[id]; a.State == api.ActivityStateScheduled {
			q := a.Options.TaskQueue
			if q == "" {
				q = st.TaskQueue
			}
			add(q, true)
		}
	}
	return out
}

// unpolledQueue describes queue as unpolled for the kind of task, unless a
// worker polls it now or did within api.UnpolledAfter.
func (e *Engine) unpolledQueue(queue string, activity bool, now time.Time) (api.UnpolledQueue, bool) {
	polling, last := e.pollers.lastPoll(queue, activity)
	since := e.pollers.since
	if polling || !last.IsZero() && now.Sub(last) < api.UnpolledAfter || last.IsZero() && now.Sub(since) < api.UnpolledAfter {
		return api.UnpolledQueue{}, false
	}
	u := api.UnpolledQueue{TaskQueue: queue, Kind: "workflow", LastPoll: last, Since: since}
	if activity {
		u.Kind = "activity"
	}
	if last.IsZero() {
		u.Message = fmt.Sprintf("no worker has ever polled task queue %q for %s tasks (since the engine started %s ago)", queue, u.Kind, seconds(now.Sub(since)))
	} else {
		u.Message = fmt.Sprintf("no worker has polled task queue %q for %s tasks in %s", queue, u.Kind, seconds(now.Sub(last)))
	}
	return u, true
}

// seconds is a duration as people read a wait: "95 s", "2 h 5 min".
func seconds(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d < 10*time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < 10*time.Hour:
		return fmt.Sprintf("%d min", int(d.Minutes()))
	}
	return fmt.Sprintf("%d h", int(d.Hours()))
}
