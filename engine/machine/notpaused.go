package machine

import (
	"fmt"
	"strings"
	"time"

	"github.com/cairnflow/cairn/engine/api"
)

// notPaused is the refusal of a resolve on an open run where nothing it
// names is paused on an unknown outcome: a is the activity the request
// names (nil when it names none that is pending).
func notPaused(st *RunState, req *api.ResolveActivityRequest, a *ActivityInfo) error {
	e := &api.NotPausedError{WorkflowID: st.WorkflowID, RunID: st.RunID, Resolvable: resolvable(st)}
	switch {
	case a != nil:
		e.Activity, e.Doing = activityName(a), a.doing()
	case req.ScheduledEventID != 0:
		e.Activity, e.Doing = fmt.Sprintf("scheduled event %d", req.ScheduledEventID), "is no pending activity (it finished, or the event is no schedule)"
	case req.ActivityID != "":
		e.Activity, e.Doing = fmt.Sprintf("activity %q", req.ActivityID), "is no pending activity (it finished, or was never scheduled)"
	default:
		e.Doing = st.doing()
	}
	return e
}

// resolvable names the run's activities paused on an unknown outcome.
func resolvable(st *RunState) []string {
	var out []string
	for _, id := range sortedKeys(st.Activities) {
		if a := st.Activities[id]; a.State == api.ActivityStateUnknown {
			out = append(out, activityName(a))
		}
	}
	return out
}

// activityName names an activity as a person finds it in describe.
func activityName(a *ActivityInfo) string {
	return fmt.Sprintf("activity %q (%s, scheduled event %d)", a.ActivityID, a.ActivityType, a.ScheduledEventID)
}

// doing says what a pending activity does, as a predicate.
func (a *ActivityInfo) doing() string {
	switch a.State {
	case api.ActivityStateScheduled:
		return fmt.Sprintf("is waiting for a worker on task queue %q (attempt %d)", a.Options.TaskQueue, a.Attempt)
	case api.ActivityStateStarted:
		if a.Reconciling {
			return fmt.Sprintf("is running its Reconcile lookup on worker %q", a.Identity)
		}
		return fmt.Sprintf("is running attempt %d on worker %q", a.Attempt, a.Identity)
	case api.ActivityStateBackoff:
		if a.QuietWait {
			return fmt.Sprintf("is waiting until its lost attempt can no longer act (%s)", stamp(a.NextAttemptAt))
		}
		return fmt.Sprintf("is waiting to retry (attempt %d at %s)", a.Attempt+1, stamp(a.NextAttemptAt))
	case api.ActivityStateHeld:
		return "is held by the run's budget (" + a.HeldReason + "): raise the budget or stop the run (cairn workflow budget)"
	case api.ActivityStateUnknown:
		return "is paused on an unknown outcome"
	}
	return fmt.Sprintf("is in state %s", a.State)
}

// doing says what a run that is not paused on an unknown outcome does.
func (st *RunState) doing() string {
	var parts []string
	for _, w := range st.Approvals {
		parts = append(parts, fmt.Sprintf("tool call %q (%s) awaits a person's approval since %s (cairn workflow approve or reject, not resolve)",
			w.CallID, w.Tool, stamp(w.Since)))
	}
	if st.WFT.Started {
		parts = append(parts, "a workflow task is running")
	} else if st.WFT.Scheduled {
		parts = append(parts, "a workflow task waits for a worker")
	}
	for _, id := range sortedKeys(st.Activities) {
		a := st.Activities[id]
		parts = append(parts, activityName(a)+" "+a.doing())
	}
	for _, id := range sortedKeys(st.Timers) {
		parts = append(parts, fmt.Sprintf("timer %q fires at %s", id, stamp(st.Timers[id].FireAt)))
	}
	for _, id := range sortedKeys(st.Children) {
		parts = append(parts, fmt.Sprintf("child workflow %q is running", st.Children[id].WorkflowID))
	}
	verb := "is running: "
	if len(st.Approvals) > 0 {
		verb = "is paused for an approval: "
	}
	if len(parts) == 0 {
		return "is running: nothing is pending (its code waits for a signal or a condition)"
	}
	const most = 4
	if len(parts) > most {
		parts = append(parts[:most], fmt.Sprintf("%d more (cairn workflow describe)", len(parts)-most))
	}
	return verb + strings.Join(parts, ", ")
}

// stamp is a time in a refusal's text.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
