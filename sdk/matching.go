package sdk

import (
	"fmt"
	"hash/fnv"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// isCommandEvent reports whether ev was written for a command, right after
// the decision's WorkflowTaskCompleted. (A BudgetUpdated is one when
// workflow code set the budget, not when a person did.)
func isCommandEvent(ev *history.Event) bool {
	if b, ok := ev.Attrs.(*history.BudgetUpdated); ok {
		return b.WorkflowTaskCompletedEventID != 0
	}
	switch ev.Type() {
	case history.TypeActivityScheduled, history.TypeActivityCancelRequested, history.TypeTimerStarted,
		history.TypeTimerCanceled, history.TypeMarkerRecorded, history.TypeChildWorkflowStarted,
		history.TypeSignalExternalSent, history.TypeWorkflowCompleted, history.TypeWorkflowFailed,
		history.TypeWorkflowCanceled, history.TypeWorkflowContinuedAsNew, history.TypeChildWorkflowCancelRequested,
		history.TypeWorkflowUpdateCompleted:
		return true
	}
	return false
}

// samePayload compares a recorded payload with one the code produced; a
// payload the engine stored by reference matches the bytes it was made
// from (see history.SamePayload).
func samePayload(a, b history.Payload) bool { return history.SamePayload(a, b) }

// commandMatches compares a command with the event recorded for it: the
// kind, the activity/child/timer/marker identity, and the arguments.
func commandMatches(c *api.Command, ev *history.Event) bool {
	switch c.Type {
	case api.CommandScheduleActivity:
		a, ok := ev.Attrs.(*history.ActivityScheduled)
		s := c.ScheduleActivity
		return ok && a.ActivityType == s.ActivityType && a.ActivityID == s.ActivityID && samePayload(a.Input, s.Input)
	case api.CommandRequestCancelActivity:
		a, ok := ev.Attrs.(*history.ActivityCancelRequested)
		return ok && a.ScheduledEventID == c.RequestCancelActivity.ScheduledEventID
	case api.CommandRequestCancelChildWorkflow:
		a, ok := ev.Attrs.(*history.ChildWorkflowCancelRequested)
		return ok && a.InitiatedEventID == c.RequestCancelChildWorkflow.InitiatedEventID
	case api.CommandStartTimer:
		a, ok := ev.Attrs.(*history.TimerStarted)
		return ok && a.TimerID == c.StartTimer.TimerID
	case api.CommandCancelTimer:
		a, ok := ev.Attrs.(*history.TimerCanceled)
		return ok && a.TimerID == c.CancelTimer.TimerID
	case api.CommandRecordMarker:
		a, ok := ev.Attrs.(*history.MarkerRecorded)
		return ok && a.Name == c.RecordMarker.Name && a.ID == c.RecordMarker.ID
	case api.CommandStartChildWorkflow:
		a, ok := ev.Attrs.(*history.ChildWorkflowStarted)
		s := c.StartChildWorkflow
		return ok && a.WorkflowType == s.WorkflowType && a.WorkflowID == s.WorkflowID && samePayload(a.Input, s.Input)
	case api.CommandSignalExternalWorkflow:
		a, ok := ev.Attrs.(*history.SignalExternalSent)
		s := c.SignalExternalWorkflow
		return ok && a.WorkflowID == s.WorkflowID && a.RunID == s.RunID && a.Name == s.SignalName && samePayload(a.Input, s.Input)
	case api.CommandCompleteWorkflow:
		_, ok := ev.Attrs.(*history.WorkflowCompleted)
		return ok
	case api.CommandFailWorkflow:
		_, ok := ev.Attrs.(*history.WorkflowFailed)
		return ok
	case api.CommandCancelWorkflow:
		_, ok := ev.Attrs.(*history.WorkflowCanceled)
		return ok
	case api.CommandContinueAsNew:
		_, ok := ev.Attrs.(*history.WorkflowContinuedAsNew)
		return ok
	case api.CommandSetBudget:
		b, ok := ev.Attrs.(*history.BudgetUpdated)
		return ok && b.Budget == c.SetBudget.Budget
	case api.CommandCompleteUpdate:
		u, ok := ev.Attrs.(*history.WorkflowUpdateCompleted)
		return ok && u.UpdateID == c.CompleteUpdate.UpdateID
	}
	return false
}

// argsHash is a short, stable fingerprint of a payload for messages.
func argsHash(p history.Payload) string {
	h := fnv.New32a()
	h.Write([]byte(p.Encoding))
	h.Write(p.StoredRef()) // the same fingerprint for a payload and its stored reference
	return fmt.Sprintf("args#%08x", h.Sum32())
}

// describeCommand renders a command as the event it would produce, so that
// NondeterminismError's Recorded and Produced read alike.
func describeCommand(c *api.Command) string {
	switch c.Type {
	case api.CommandScheduleActivity:
		s := c.ScheduleActivity
		return fmt.Sprintf("ActivityScheduled %s id=%s %s", s.ActivityType, s.ActivityID, argsHash(s.Input))
	case api.CommandRequestCancelActivity:
		return fmt.Sprintf("ActivityCancelRequested scheduled=%d", c.RequestCancelActivity.ScheduledEventID)
	case api.CommandRequestCancelChildWorkflow:
		return fmt.Sprintf("ChildWorkflowCancelRequested initiated=%d", c.RequestCancelChildWorkflow.InitiatedEventID)
	case api.CommandStartTimer:
		return fmt.Sprintf("TimerStarted id=%s (%s)", c.StartTimer.TimerID, c.StartTimer.Duration)
	case api.CommandCancelTimer:
		return fmt.Sprintf("TimerCanceled id=%s", c.CancelTimer.TimerID)
	case api.CommandRecordMarker:
		return fmt.Sprintf("MarkerRecorded %s/%s", c.RecordMarker.Name, c.RecordMarker.ID)
	case api.CommandStartChildWorkflow:
		s := c.StartChildWorkflow
		return fmt.Sprintf("ChildWorkflowStarted %s id=%s %s", s.WorkflowType, s.WorkflowID, argsHash(s.Input))
	case api.CommandSignalExternalWorkflow:
		s := c.SignalExternalWorkflow
		return fmt.Sprintf("SignalExternalSent %s to %s %s", s.SignalName, s.WorkflowID, argsHash(s.Input))
	case api.CommandCompleteWorkflow:
		return "WorkflowCompleted"
	case api.CommandFailWorkflow:
		return "WorkflowFailed"
	case api.CommandCancelWorkflow:
		return "WorkflowCanceled"
	case api.CommandContinueAsNew:
		return "WorkflowContinuedAsNew"
	case api.CommandSetBudget:
		return fmt.Sprintf("BudgetUpdated %+v", c.SetBudget.Budget)
	case api.CommandCompleteUpdate:
		return fmt.Sprintf("WorkflowUpdateCompleted id=%s", c.CompleteUpdate.UpdateID)
	}
	return c.Type.String()
}

// describeEvent renders an event in describeCommand's terms.
func describeEvent(ev *history.Event) string {
	switch a := ev.Attrs.(type) {
	case *history.ActivityScheduled:
		return fmt.Sprintf("ActivityScheduled %s id=%s %s", a.ActivityType, a.ActivityID, argsHash(a.Input))
	case *history.ActivityCancelRequested:
		return fmt.Sprintf("ActivityCancelRequested scheduled=%d", a.ScheduledEventID)
	case *history.ChildWorkflowCancelRequested:
		return fmt.Sprintf("ChildWorkflowCancelRequested initiated=%d", a.InitiatedEventID)
	case *history.TimerStarted:
		return fmt.Sprintf("TimerStarted id=%s (%s)", a.TimerID, a.Duration)
	case *history.TimerCanceled:
		return fmt.Sprintf("TimerCanceled id=%s", a.TimerID)
	case *history.TimerFired:
		return fmt.Sprintf("TimerFired id=%s", a.TimerID)
	case *history.MarkerRecorded:
		return fmt.Sprintf("MarkerRecorded %s/%s", a.Name, a.ID)
	case *history.ChildWorkflowStarted:
		return fmt.Sprintf("ChildWorkflowStarted %s id=%s %s", a.WorkflowType, a.WorkflowID, argsHash(a.Input))
	case *history.SignalExternalSent:
		return fmt.Sprintf("SignalExternalSent %s to %s %s", a.Name, a.WorkflowID, argsHash(a.Input))
	case *history.ActivityCompleted:
		return fmt.Sprintf("ActivityCompleted scheduled=%d", a.ScheduledEventID)
	case *history.ActivityFailed:
		return fmt.Sprintf("ActivityFailed scheduled=%d", a.ScheduledEventID)
	case *history.ActivityTimedOut:
		return fmt.Sprintf("ActivityTimedOut scheduled=%d", a.ScheduledEventID)
	case *history.ActivityCanceled:
		return fmt.Sprintf("ActivityCanceled scheduled=%d", a.ScheduledEventID)
	case *history.ActivityResolved:
		return fmt.Sprintf("ActivityResolved scheduled=%d (%s)", a.ScheduledEventID, a.Resolution)
	case *history.ActivityDeduplicated:
		return fmt.Sprintf("ActivityDeduplicated scheduled=%d", a.ScheduledEventID)
	case *history.ChildWorkflowCompleted:
		return fmt.Sprintf("ChildWorkflowCompleted initiated=%d", a.InitiatedEventID)
	case *history.ChildWorkflowFailed:
		return fmt.Sprintf("ChildWorkflowFailed initiated=%d", a.InitiatedEventID)
	case *history.WorkflowUpdateAccepted:
		return fmt.Sprintf("WorkflowUpdateAccepted %s id=%s", a.Name, a.UpdateID)
	case *history.WorkflowUpdateCompleted:
		return fmt.Sprintf("WorkflowUpdateCompleted id=%s", a.UpdateID)
	}
	return ev.Type().String()
}
