package view

import (
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// RunData is one run as Compare reads it: its history and, for an agent,
// its transcript (api.GetTranscript). LoadRun reads one over an
// api.Service.
type RunData struct {
	WorkflowID string
	RunID      string
	Events     []history.Event
	// Transcript is the run's conversation, model calls, tool calls and
	// usage; nil when not read (the tool and model calls are then the
	// history's activities).
	Transcript *api.GetTranscriptResponse
}

// Comparison is where two runs diverge and, for each, what it did: the
// answer of `cairn workflow compare` and of the web UI's compare page.
type Comparison struct {
	A, B RunSummary
	// Relation says how the runs are related, when one is a reset or a
	// fork of the other ("B was forked from A at event 12"); empty when
	// neither is.
	Relation string
	// Same counts the steps both runs took alike before they diverge.
	Same int
	// Divergence is the first step where they differ; nil when every
	// step of both is the same.
	Divergence *Divergence
}

// Divergence is the first step where two runs differ: the step of each
// (nil on the side that has no more: the run ended there, or has not got
// that far yet).
type Divergence struct {
	// Step numbers the step, from 1, as both runs count it.
	Step int
	A, B *Step
}

// Step is one decision of a run, or one answer the run received, in the
// order history records them: what Compare compares, regardless of event
// ids.
type Step struct {
	EventID int64
	// Kind is "start", "activity", "model call", "tool call", "outcome"
	// (an activity's or a model call's answer), "timer", "child",
	// "child outcome", "signal", "signal sent", "marker",
	// "cancel requested" or "close".
	Kind string
	// Name is the activity, child or workflow type, the timer id, the
	// signal or marker name, or the close event's type.
	Name string
	// Detail is what the step carries (an input, arguments, a result, an
	// answer) as text.
	Detail string
	// Turn is, for a model call and its answer, the call's turn (from 1).
	Turn int
}

// Same reports whether two steps are alike.
func (s Step) Same(o Step) bool {
	return s.Kind == o.Kind && s.Name == o.Name && s.Detail == o.Detail && s.Turn == o.Turn
}

// String renders a step on one line.
func (s Step) String() string {
	out := fmt.Sprintf("event %d: %s", s.EventID, s.Kind)
	if s.Turn > 0 {
		out += fmt.Sprintf(" (turn %d)", s.Turn)
	}
	if s.Name != "" {
		out += " " + s.Name
	}
	if s.Detail != "" {
		out += ": " + s.Detail
	}
	return out
}

// RunSummary is one side of a Comparison: the run, where it comes from,
// its status and result, its model and tool calls and what they cost.
type RunSummary struct {
	WorkflowID string
	RunID      string
	Status     api.Status
	// Base is the run this one was reset or forked from; nil for neither.
	Base *BaseRun
	// Result is the run's outcome as text: its result, or its failure;
	// empty while it is open.
	Result string
	// Steps counts the run's steps.
	Steps      int
	ModelCalls []ModelCall `view:"keep"`
	ToolCalls  []ToolCall  `view:"keep"`
	// Usage is the run's total: tokens in and out, and cost.
	Usage history.Usage
}

// BaseRun is where a reset or forked run comes from (its
// history.WorkflowReset).
type BaseRun struct {
	Kind       string // "reset" or "fork"
	WorkflowID string
	RunID      string
	// AtEventID is the base run's event the copy stopped before.
	AtEventID int64
	// MarkerEventID is the new run's WorkflowReset event.
	MarkerEventID int64
}

// ModelCall is one model call of an agent run.
type ModelCall struct {
	Turn             int
	ScheduledEventID int64
	Model            string
	State            string
	// Output is the text the model answered.
	Output string
	// ToolCalls are the calls the answer asks for, as Name(arguments).
	ToolCalls []string
	Usage     history.Usage
}

// The outcomes of a tool call.
const (
	OutcomeResult  = "result"
	OutcomeError   = "error"
	OutcomeLedger  = "answered from ledger"
	OutcomeHeld    = "held"
	OutcomeInDoubt = "in doubt"
	OutcomePending = "pending"
)

// ToolCall is one tool call of a run (for a run with no transcript, one
// activity).
type ToolCall struct {
	// Turn is the model call that asked for it (0: not an agent's).
	Turn             int
	ScheduledEventID int64
	Name             string
	Arguments        string
	// Outcome is one of the Outcome constants; State the transcript's
	// finer state ("completed", "rejected", "awaiting_approval", …).
	Outcome string
	State   string
	// Result is the result, or the error, as text.
	Result string
	// From names, for an answer from the effects ledger, the run that
	// did the action ("WORKFLOW/RUN", or RUN in the same workflow).
	From string
}

// Compare compares two runs: the first step where their decisions (or
// the answers they got) differ, how they are related, and what each did.
func Compare(a, b *RunData) *Comparison {
	sa, sb := Steps(a.Events, a.Transcript), Steps(b.Events, b.Transcript)
	c := &Comparison{A: summarize(a, len(sa)), B: summarize(b, len(sb))}
	c.Relation = relation(c.A, c.B)
	n := min(len(sa), len(sb))
	for c.Same < n && sa[c.Same].Same(sb[c.Same]) {
		c.Same++
	}
	if c.Same < len(sa) || c.Same < len(sb) {
		d := &Divergence{Step: c.Same + 1}
		if c.Same < len(sa) {
			d.A = &sa[c.Same]
		}
		if c.Same < len(sb) {
			d.B = &sb[c.Same]
		}
		c.Divergence = d
	}
	return c
}

// relation says how b is related to a (or a to b), by their
// WorkflowReset markers.
func relation(a, b RunSummary) string {
	say := func(x, y RunSummary, xn, yn string) string {
		if y.Base == nil || y.Base.WorkflowID != x.WorkflowID || y.Base.RunID != x.RunID {
			return ""
		}
		verb := "forked"
		if y.Base.Kind == "reset" {
			verb = "reset"
		}
		return fmt.Sprintf("%s was %s from %s at event %d", yn, verb, xn, y.Base.AtEventID)
	}
	if s := say(a, b, "A", "B"); s != "" {
		return s
	}
	if s := say(b, a, "B", "A"); s != "" {
		return s
	}
	if a.Base != nil && b.Base != nil && a.Base.WorkflowID == b.Base.WorkflowID && a.Base.RunID == b.Base.RunID {
		return fmt.Sprintf("both come from %s/%s", a.Base.WorkflowID, a.Base.RunID)
	}
	return ""
}

// summarize lays out one run: status, base, result, calls and totals.
func summarize(r *RunData, steps int) RunSummary {
	s := RunSummary{WorkflowID: r.WorkflowID, RunID: r.RunID, Steps: steps, Status: api.StatusRunning}
	for _, ev := range r.Events {
		if w, ok := ev.Attrs.(*history.WorkflowReset); ok {
			s.Base = &BaseRun{Kind: w.Kind, WorkflowID: w.BaseWorkflowID, RunID: w.BaseRunID, AtEventID: w.AtEventID, MarkerEventID: ev.ID}
		}
		if st, text, ok := closeOf(ev); ok {
			s.Status, s.Result = st, text
		}
	}
	if r.Transcript != nil {
		s.Status, s.Usage = r.Transcript.Status, r.Transcript.Usage.Total
		s.ModelCalls = modelCalls(r.Transcript.Items)
		s.ToolCalls = transcriptToolCalls(r.Transcript.Items, r.Events, r.WorkflowID)
	}
	if len(s.ModelCalls) == 0 && len(s.ToolCalls) == 0 {
		s.ToolCalls = activityCalls(r.Events, r.WorkflowID)
	}
	if s.Usage.IsZero() {
		s.Usage = historyUsage(r.Events)
	}
	return s
}

// closeOf returns the status and outcome a run's closing event records.
func closeOf(ev history.Event) (api.Status, string, bool) {
	switch a := ev.Attrs.(type) {
	case *history.WorkflowCompleted:
		return api.StatusCompleted, PayloadText(a.Result), true
	case *history.WorkflowFailed:
		return api.StatusFailed, a.Failure.Error(), true
	case *history.WorkflowCanceled:
		return api.StatusCanceled, "canceled " + PayloadText(a.Details), true
	case *history.WorkflowTerminated:
		return api.StatusTerminated, "terminated: " + a.Reason, true
	case *history.WorkflowTimedOut:
		return api.StatusTimedOut, a.Timeout + " timeout", true
	case *history.WorkflowContinuedAsNew:
		return api.StatusContinuedAsNew, "continued as new: run " + a.NewRunID, true
	}
	return 0, "", false
}

// historyUsage sums the usage the run's activities reported.
func historyUsage(evs []history.Event) history.Usage {
	var u history.Usage
	add := func(x history.Usage) {
		u.PromptTokens += x.PromptTokens
		u.CompletionTokens += x.CompletionTokens
		u.CachedTokens += x.CachedTokens
		u.CostUSD += x.CostUSD
	}
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityCompleted:
			add(a.Usage)
		case *history.ActivityFailed:
			add(a.Usage)
		case *history.ActivityTimedOut:
			add(a.Usage)
		case *history.ActivityCanceled:
			add(a.Usage)
		}
	}
	return u
}
