package view

import (
	"strings"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// modelCalls lists a transcript's model calls with their answers: the
// assistant message after a model call is its answer, and the tool calls
// after that message are the ones it asks for.
func modelCalls(items []api.TranscriptItem) []ModelCall {
	var out []ModelCall
	for _, it := range items {
		switch {
		case it.ModelCall != nil:
			c := it.ModelCall
			out = append(out, ModelCall{Turn: len(out) + 1, ScheduledEventID: c.ScheduledEventID, Model: c.Model, State: c.State, Usage: c.Usage})
		case it.Message != nil && it.Message.Role == "assistant" && len(out) > 0:
			last := &out[len(out)-1]
			last.Output = it.Message.Content
			for _, tc := range it.Message.ToolCalls {
				last.ToolCalls = append(last.ToolCalls, tc.Name+"("+tc.Arguments+")")
			}
		}
	}
	return out
}

// transcriptToolCalls lists a transcript's tool calls, their outcomes
// told by the history's events (an answer from the ledger, a held effect).
func transcriptToolCalls(items []api.TranscriptItem, evs []history.Event, workflowID string) []ToolCall {
	ends := activityEnds(evs, workflowID)
	var out []ToolCall
	turn := 0
	for _, it := range items {
		if it.ModelCall != nil {
			turn++
		}
		t := it.ToolCall
		if t == nil {
			continue
		}
		tc := ToolCall{Turn: turn, ScheduledEventID: t.ScheduledEventID, Name: t.Name, Arguments: t.Arguments, State: t.State, Result: t.Result}
		tc.Outcome = outcomeOf(t.State)
		if e, ok := ends[t.ScheduledEventID]; ok && t.ScheduledEventID != 0 && e.outcome != OutcomeResult && e.outcome != OutcomeError {
			tc.Outcome, tc.From = e.outcome, e.from
			if tc.Result == "" {
				tc.Result = e.result
			}
		}
		out = append(out, tc)
	}
	return out
}

// outcomeOf maps a transcript call state to a tool call outcome.
func outcomeOf(state string) string {
	switch state {
	case api.CallCompleted:
		return OutcomeResult
	case api.CallFailed, api.CallRejected:
		return OutcomeError
	case api.CallHeld:
		return OutcomeHeld
	case api.CallUnknown:
		return OutcomeInDoubt
	}
	return OutcomePending
}

// activityCalls lists a run's activities as calls, for a run with no
// transcript: each with its input and how it ended.
func activityCalls(evs []history.Event, workflowID string) []ToolCall {
	ends := activityEnds(evs, workflowID)
	var out []ToolCall
	for _, ev := range evs {
		a, ok := ev.Attrs.(*history.ActivityScheduled)
		if !ok {
			continue
		}
		tc := ToolCall{ScheduledEventID: ev.ID, Name: a.ActivityType, Arguments: PayloadText(a.Input), Outcome: OutcomePending}
		if e, ok := ends[ev.ID]; ok {
			tc.Outcome, tc.Result, tc.From = e.outcome, e.result, e.from
		}
		out = append(out, tc)
	}
	return out
}

// end is how an activity ended (or where it stands), by its history.
type end struct {
	outcome, result, from string
}

// activityEnds reads, per scheduled event, the last word of history on
// the activity.
func activityEnds(evs []history.Event, workflowID string) map[int64]end {
	out := map[int64]end{}
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityCompleted:
			out[a.ScheduledEventID] = end{outcome: OutcomeResult, result: PayloadText(a.Result)}
		case *history.ActivityDeduplicated:
			out[a.ScheduledEventID] = end{outcome: OutcomeLedger, result: PayloadText(a.Result), from: ledgerRun(a, workflowID)}
		case *history.ActivityFailed:
			out[a.ScheduledEventID] = end{outcome: OutcomeError, result: a.Failure.Error()}
		case *history.ActivityTimedOut:
			out[a.ScheduledEventID] = end{outcome: OutcomeError, result: a.Timeout + " timeout"}
		case *history.ActivityCanceled:
			out[a.ScheduledEventID] = end{outcome: OutcomeError, result: "canceled"}
		case *history.ActivityHeld:
			out[a.ScheduledEventID] = end{outcome: OutcomeHeld, result: a.Reason}
		case *history.ActivityOutcomeUnknown:
			out[a.ScheduledEventID] = end{outcome: OutcomeInDoubt, result: a.Reason}
		case *history.ActivityResolved:
			out[a.ScheduledEventID] = resolvedEnd(a)
		}
	}
	return out
}

// resolvedEnd is how a person's (or a Reconcile lookup's) resolution ends
// an activity.
func resolvedEnd(a *history.ActivityResolved) end {
	switch a.Resolution {
	case history.ResolvedHappened:
		return end{outcome: OutcomeResult, result: PayloadText(a.Result)}
	case history.ResolvedFailed:
		msg := a.Reason
		if a.Failure != nil {
			msg = a.Failure.Error()
		}
		return end{outcome: OutcomeError, result: msg}
	}
	return end{outcome: OutcomePending, result: "not happened: retried"}
}

// ledgerRun names the run whose action answered a, seen from workflowID.
func ledgerRun(a *history.ActivityDeduplicated, workflowID string) string {
	run := a.OriginalRunID
	if run == "" {
		run = "(unknown run)"
	}
	if a.OriginalWorkflowID != "" && a.OriginalWorkflowID != workflowID {
		return a.OriginalWorkflowID + "/" + run
	}
	return run
}

// SplitRunRef splits "ID/RUN" into a workflow id and a run id: the part
// after the last "/" is a run id when it looks like one (32 hexadecimal
// digits, as the engine makes them); otherwise the whole is a workflow id
// (its current run).
func SplitRunRef(ref string) (workflowID, runID string) {
	i := strings.LastIndexByte(ref, '/')
	if i < 0 || !isRunID(ref[i+1:]) {
		return ref, ""
	}
	return ref[:i], ref[i+1:]
}

func isRunID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
