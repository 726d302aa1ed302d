package view

import (
	"fmt"
	"sort"
	"strings"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Steps lists a run's steps: the decisions its code made (the activities,
// model and tool calls it scheduled with their inputs, timers, children,
// signals sent, markers, how it closed) and what it was given (activity
// and child outcomes, model answers, signals received, cancellation), in
// the order its history records them — but consecutive outcomes in the
// order their activities were scheduled, whatever order they came in. Event ids, times, attempts and
// workflow-task bookkeeping are left out, so two runs that did the same
// have the same steps. tr (may be nil) gives model calls' answers as
// text and numbers their turns.
func Steps(evs []history.Event, tr *api.GetTranscriptResponse) []Step {
	s := stepper{answers: answers(tr), kinds: map[int64]string{}, names: map[int64]string{}, turns: map[int64]int{}, index: map[int64]int{}}
	var out []Step
	var order []int // per step: for an outcome, its activity's step; else -1
	for _, ev := range evs {
		if st, ok := s.step(ev); ok {
			st.EventID = ev.ID
			s.index[ev.ID] = len(out)
			order = append(order, s.orderOf(ev))
			out = append(out, st)
		}
	}
	sortOutcomes(out, order)
	return out
}

// orderOf is, for an event that answers an activity or a child, the
// index of the step that scheduled it; -1 for others.
func (s *stepper) orderOf(ev history.Event) int {
	var sched int64
	switch a := ev.Attrs.(type) {
	case *history.ActivityCompleted:
		sched = a.ScheduledEventID
	case *history.ActivityDeduplicated:
		sched = a.ScheduledEventID
	case *history.ActivityFailed:
		sched = a.ScheduledEventID
	case *history.ActivityTimedOut:
		sched = a.ScheduledEventID
	case *history.ActivityCanceled:
		sched = a.ScheduledEventID
	case *history.ActivityHeld:
		sched = a.ScheduledEventID
	case *history.ActivityResolved:
		sched = a.ScheduledEventID
	case *history.ChildWorkflowCompleted:
		sched = a.InitiatedEventID
	case *history.ChildWorkflowFailed:
		sched = a.InitiatedEventID
	default:
		return -1
	}
	if i, ok := s.index[sched]; ok {
		return i
	}
	return -1
}

// sortOutcomes puts each run of consecutive outcomes (answers that came
// in while the code was not deciding) in the order their activities were
// scheduled: two runs that ran the same activities at once, whose answers
// arrived in another order, take the same steps.
func sortOutcomes(steps []Step, order []int) {
	for i := 0; i < len(steps); {
		j := i
		for j < len(steps) && order[j] >= 0 {
			j++
		}
		if j-i > 1 {
			block := make([]int, j-i)
			for k := range block {
				block[k] = i + k
			}
			sort.SliceStable(block, func(x, y int) bool { return order[block[x]] < order[block[y]] })
			sorted := make([]Step, len(block))
			for k, b := range block {
				sorted[k] = steps[b]
			}
			copy(steps[i:j], sorted)
		}
		i = max(j, i+1)
	}
}

// stepper remembers what Steps needs of earlier events.
type stepper struct {
	answers map[int64]string // model call's scheduled event → its answer as text
	kinds   map[int64]string // scheduled or initiated event → its step kind
	names   map[int64]string // scheduled or initiated event → its name
	turns   map[int64]int    // model call's scheduled event → its turn
	index   map[int64]int    // event → the index of its step
	turn    int
}

func (s *stepper) step(ev history.Event) (Step, bool) {
	switch a := ev.Attrs.(type) {
	case *history.WorkflowStarted:
		return Step{Kind: "start", Name: a.WorkflowType, Detail: PayloadText(a.Input)}, true
	case *history.ActivityScheduled:
		return s.scheduled(ev.ID, a), true
	case *history.ActivityCompleted:
		return s.outcome(a.ScheduledEventID, s.result(a.ScheduledEventID, a.Result, a.ResultOmitted)), true
	case *history.ActivityDeduplicated:
		return s.outcome(a.ScheduledEventID, s.result(a.ScheduledEventID, a.Result, a.ResultOmitted)), true
	case *history.ActivityFailed:
		return s.outcome(a.ScheduledEventID, "error: "+a.Failure.Error()), true
	case *history.ActivityTimedOut:
		return s.outcome(a.ScheduledEventID, "error: "+a.Timeout+" timeout"), true
	case *history.ActivityCanceled:
		return s.outcome(a.ScheduledEventID, "canceled"), true
	case *history.ActivityHeld:
		return s.outcome(a.ScheduledEventID, "held: "+a.Reason), true
	case *history.ActivityResolved:
		return s.resolved(a)
	case *history.TimerStarted:
		return Step{Kind: "timer", Name: a.TimerID, Detail: a.Duration.String()}, true
	case *history.SignalReceived:
		return Step{Kind: "signal", Name: a.Name, Detail: PayloadText(a.Input)}, true
	case *history.SignalExternalSent:
		return Step{Kind: "signal sent", Name: a.Name, Detail: PayloadText(a.Input)}, true
	case *history.MarkerRecorded:
		return Step{Kind: "marker", Name: a.Name, Detail: a.ID + " " + PayloadText(a.Data)}, true
	case *history.WorkflowCancelRequested:
		return Step{Kind: "cancel requested", Detail: a.Reason}, true
	case *history.ChildWorkflowStarted:
		s.names[ev.ID] = a.WorkflowType
		return Step{Kind: "child", Name: a.WorkflowType, Detail: PayloadText(a.Input)}, true
	case *history.ChildWorkflowCompleted:
		return Step{Kind: "child outcome", Name: s.names[a.InitiatedEventID], Detail: PayloadText(a.Result)}, true
	case *history.ChildWorkflowFailed:
		return Step{Kind: "child outcome", Name: s.names[a.InitiatedEventID], Detail: "error: " + a.Failure.Error()}, true
	}
	if _, text, ok := closeOf(ev); ok {
		return Step{Kind: "close", Name: ev.Type().String(), Detail: text}, true
	}
	return Step{}, false
}

// scheduled is an activity's step: a model call (numbered by turn; its
// input is the conversation so far, which earlier steps made), a tool
// call of the agent kit (its arguments), or another activity (its input).
func (s *stepper) scheduled(id int64, a *history.ActivityScheduled) Step {
	st := Step{Kind: "activity", Name: a.ActivityType, Detail: PayloadText(a.Input)}
	switch {
	case a.Metered && a.Input.Encoding == history.EncodingTranscript:
		s.turn++
		st.Kind, st.Detail, st.Turn = "model call", "", s.turn
		s.turns[id] = s.turn
	case strings.HasPrefix(a.ActivityID, history.ToolActivityPrefix):
		st.Kind = "tool call"
	}
	s.kinds[id], s.names[id] = st.Kind, st.Name
	return st
}

// outcome is the step of an activity's answer.
func (s *stepper) outcome(sched int64, detail string) Step {
	kind := "outcome"
	if k := s.kinds[sched]; k != "" && k != "activity" {
		kind = k + " outcome"
	}
	return Step{Kind: kind, Name: s.names[sched], Detail: detail, Turn: s.turns[sched]}
}

// result is an activity's result as text: a model call's answer, as the
// transcript tells it, or the payload.
func (s *stepper) result(sched int64, p history.Payload, omitted string) string {
	if a, ok := s.answers[sched]; ok {
		return a
	}
	if omitted != "" {
		return "(result not recorded: " + omitted + ")"
	}
	return PayloadText(p)
}

// resolved is a person's (or a Reconcile lookup's) answer for an activity
// whose outcome was in doubt; "not happened" is no answer (it is retried).
func (s *stepper) resolved(a *history.ActivityResolved) (Step, bool) {
	switch a.Resolution {
	case history.ResolvedHappened:
		return s.outcome(a.ScheduledEventID, s.result(a.ScheduledEventID, a.Result, a.ResultOmitted)), true
	case history.ResolvedFailed:
		msg := a.Reason
		if a.Failure != nil {
			msg = a.Failure.Error()
		}
		return s.outcome(a.ScheduledEventID, "error: "+msg), true
	}
	return Step{}, false
}

// answers maps each model call of a transcript to its answer as text.
func answers(tr *api.GetTranscriptResponse) map[int64]string {
	out := map[int64]string{}
	if tr == nil {
		return out
	}
	for _, mc := range modelCalls(tr.Items) {
		if mc.State != api.CallCompleted {
			continue
		}
		text := quote(mc.Output)
		if len(mc.ToolCalls) > 0 {
			if text != "" {
				text += "; "
			}
			text += "asks for " + strings.Join(mc.ToolCalls, ", ")
		}
		out[mc.ScheduledEventID] = text
	}
	return out
}

// quote writes a model's text in quotes ("" for none).
func quote(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("%q", s)
}
