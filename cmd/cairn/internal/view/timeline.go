package view

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/history"
)

// Row is one event of a history as a timeline shows it.
type Row struct {
	ID     int64
	Time   time.Time
	Offset time.Duration // since the first event
	Type   string        // the event type, e.g. "ActivityCompleted"
	// Name is what the event is about: the workflow, activity or child
	// type, the timer id, the signal or marker name.
	Name string
	// Detail is a one-line summary (payloads as JSON).
	Detail string
	// Duration is, for an event that ends something (an activity, a
	// timer), the time since it began.
	Duration time.Duration
	// Attempt is the activity attempt the event belongs to (0: none).
	Attempt int32
	// Related is the event this one follows up (its ActivityScheduled,
	// TimerStarted or ChildWorkflowStarted); 0 for none.
	Related int64
	// Tone says how to colour the row: "ok", "bad", "warn" or "".
	Tone string
}

// Timeline lays out a history (in order, from its first event) as rows.
func Timeline(evs []history.Event) []Row {
	t := NewTimeline()
	rows := make([]Row, 0, len(evs))
	for _, ev := range evs {
		rows = append(rows, t.Row(ev))
	}
	return rows
}

// A Tracker lays out a history event by event, for a history that grows
// (a live view): feed it every event in order, from the first.
type Tracker struct {
	t  timeline
	t0 time.Time
	n  int64
}

// NewTimeline returns a Tracker at the start of a history.
func NewTimeline() *Tracker {
	return &Tracker{t: timeline{types: map[int64]string{}, started: map[int64]time.Time{}, attempts: map[int64]int32{}}}
}

// Row returns the next event's row.
func (tr *Tracker) Row(ev history.Event) Row {
	if tr.n == 0 {
		tr.t0 = ev.Time
	}
	tr.n++
	r := tr.t.row(ev)
	r.ID, r.Time, r.Offset, r.Type = ev.ID, ev.Time, ev.Time.Sub(tr.t0), ev.Type().String()
	return r
}

type timeline struct {
	types    map[int64]string    // scheduled/initiated event → activity or child type
	started  map[int64]time.Time // scheduled/started event → its time
	attempts map[int64]int32     // scheduled event → the attempt last started
}

func (t *timeline) since(ev history.Event, id int64) time.Duration {
	if s, ok := t.started[id]; ok {
		return ev.Time.Sub(s)
	}
	return 0
}

// activity fills the fields an activity's follow-up event shares.
func (t *timeline) activity(ev history.Event, sched int64, detail, tone string) Row {
	return Row{Name: t.types[sched], Detail: detail, Duration: t.since(ev, sched), Attempt: t.attempts[sched], Related: sched, Tone: tone}
}

func (t *timeline) row(ev history.Event) Row {
	switch a := ev.Attrs.(type) {
	case *history.WorkflowStarted:
		return Row{Name: a.WorkflowType, Detail: PayloadText(a.Input)}
	case *history.ActivityScheduled:
		t.types[ev.ID] = a.ActivityType
		t.started[ev.ID] = ev.Time
		d := PayloadText(a.Input)
		if a.Effect != history.Read {
			d = fmt.Sprintf("%s key=%s %s", a.Effect, abbreviate(a.IdempotencyKey, 13), d)
		}
		return Row{Name: a.ActivityType, Detail: d}
	case *history.ActivityStarted:
		t.attempts[a.ScheduledEventID] = a.Attempt
		d := fmt.Sprintf("attempt %d", a.Attempt)
		if a.Reconcile {
			d += " (reconcile lookup)"
		}
		if a.Identity != "" {
			d += " by " + a.Identity
		}
		return Row{Name: t.types[a.ScheduledEventID], Detail: d, Attempt: a.Attempt, Related: a.ScheduledEventID}
	case *history.ActivityCompleted:
		return t.activity(ev, a.ScheduledEventID, fmt.Sprintf("attempt %d → %s", t.attempts[a.ScheduledEventID], PayloadText(a.Result)), "ok")
	case *history.ActivityFailed:
		r := t.activity(ev, a.ScheduledEventID, fmt.Sprintf("attempt %d: %s", a.Attempt, a.Failure.Error()), "bad")
		r.Attempt = a.Attempt
		return r
	case *history.ActivityTimedOut:
		r := t.activity(ev, a.ScheduledEventID, a.Timeout+" timeout", "bad")
		r.Attempt = a.Attempt
		return r
	case *history.ActivityCanceled:
		return t.activity(ev, a.ScheduledEventID, "canceled", "warn")
	case *history.ActivityCancelRequested:
		return Row{Name: t.types[a.ScheduledEventID], Related: a.ScheduledEventID}
	case *history.ActivityOutcomeUnknown:
		r := t.activity(ev, a.ScheduledEventID, a.Reason, "warn")
		r.Attempt = a.Attempt
		return r
	case *history.ActivityResolved:
		d := fmt.Sprintf("%s by %s: %s", a.Resolution, a.By, a.Reason)
		if !a.Result.IsZero() {
			d += " → " + PayloadText(a.Result)
		}
		return t.activity(ev, a.ScheduledEventID, d, "ok")
	case *history.ActivityDeduplicated:
		by := "run " + abbreviate(a.OriginalRunID, 12)
		if a.OriginalWorkflowID != "" {
			by = a.OriginalWorkflowID + " " + by
		}
		return t.activity(ev, a.ScheduledEventID, fmt.Sprintf("answered from the effects ledger: already done by %s (key %s) → %s", by,
			abbreviate(a.IdempotencyKey, 13), PayloadText(a.Result)), "ok")
	case *history.ActivityHeld:
		return t.activity(ev, a.ScheduledEventID, "fork: effect held ("+a.Reason+"): perform it, give its result, or fail it (cairn workflow resolve)", "warn")
	case *history.WorkflowReset:
		return Row{Detail: resetText(a), Tone: "warn"}
	case *history.ActivityDuplicateDetected:
		d := fmt.Sprintf("DUPLICATE EFFECT: attempt %d reported %s", a.Attempt, orDefault(a.Outcome, "success"))
		if a.Possible {
			d = fmt.Sprintf("POSSIBLE DUPLICATE EFFECT: attempt %d (%s)", a.Attempt, orDefault(a.Outcome, "outcome unknown"))
		}
		if a.OtherAttempt > 0 {
			d += fmt.Sprintf("; attempt %d performed the action", a.OtherAttempt)
		}
		r := t.activity(ev, a.ScheduledEventID, d, "bad")
		r.Duration, r.Attempt = 0, a.Attempt
		return r
	case *history.ActivityLateReport:
		tone := "ok"
		if a.Verdict == "conflict" {
			tone = "bad"
		}
		r := t.activity(ev, a.ScheduledEventID, fmt.Sprintf("late report of attempt %d: %s — %s", a.Attempt, a.Verdict, a.Detail), tone)
		r.Duration, r.Attempt = 0, a.Attempt
		return r
	case *history.ActivityKeyed:
		r := t.activity(ev, a.ScheduledEventID, fmt.Sprintf("%s key=%s, as declared by %s", a.Effect, abbreviate(a.IdempotencyKey, 13),
			orDefault(a.DeclaredBy, "its worker")), "")
		r.Duration = 0
		return r
	case *history.TimerStarted:
		t.started[ev.ID] = ev.Time
		return Row{Name: a.TimerID, Detail: a.Duration.String()}
	case *history.TimerFired:
		return Row{Name: a.TimerID, Duration: t.since(ev, a.StartedEventID), Related: a.StartedEventID}
	case *history.TimerCanceled:
		return Row{Name: a.TimerID, Duration: t.since(ev, a.StartedEventID), Related: a.StartedEventID}
	case *history.SignalReceived:
		return Row{Name: a.Name, Detail: PayloadText(a.Input)}
	case *history.SignalExternalSent:
		return Row{Name: a.Name, Detail: a.WorkflowID}
	case *history.MarkerRecorded:
		if r, ok := ignoredApproval(a); ok {
			return r
		}
		if r, ok := approvalMarker(a); ok {
			return r
		}
		return Row{Name: a.Name, Detail: a.ID + " " + PayloadText(a.Data)}
	case *history.ChildWorkflowStarted:
		t.types[ev.ID] = a.WorkflowType
		t.started[ev.ID] = ev.Time
		return Row{Name: a.WorkflowType, Detail: a.WorkflowID}
	case *history.ChildWorkflowCompleted:
		return Row{Name: t.types[a.InitiatedEventID], Detail: PayloadText(a.Result), Duration: t.since(ev, a.InitiatedEventID),
			Related: a.InitiatedEventID, Tone: "ok"}
	case *history.ChildWorkflowFailed:
		return Row{Name: t.types[a.InitiatedEventID], Detail: a.Failure.Error(), Duration: t.since(ev, a.InitiatedEventID),
			Related: a.InitiatedEventID, Tone: "bad"}
	case *history.ChildWorkflowCancelRequested:
		return Row{Name: t.types[a.InitiatedEventID], Detail: a.WorkflowID, Related: a.InitiatedEventID, Tone: "warn"}
	case *history.WorkflowCompleted:
		return Row{Detail: PayloadText(a.Result), Tone: "ok"}
	case *history.WorkflowFailed:
		return Row{Detail: a.Failure.Error(), Tone: "bad"}
	case *history.WorkflowCanceled:
		return Row{Detail: PayloadText(a.Details), Tone: "warn"}
	case *history.WorkflowTerminated:
		if a.ResetRunID != "" {
			return Row{Detail: a.Reason + " (new run " + a.ResetRunID + ")", Tone: "warn"}
		}
		return Row{Detail: a.Reason, Tone: "bad"}
	case *history.WorkflowTimedOut:
		return Row{Detail: a.Timeout + " timeout", Tone: "bad"}
	case *history.WorkflowContinuedAsNew:
		return Row{Detail: "next run " + a.NewRunID, Tone: "ok"}
	case *history.WorkflowCancelRequested:
		return Row{Detail: a.Reason, Tone: "warn"}
	case *history.WorkflowTaskFailed:
		return Row{Name: a.Cause, Detail: a.Failure.Error(), Tone: "bad"}
	case *history.WorkflowTaskCompleted:
		return Row{Detail: fmt.Sprintf("decided having seen event %d", a.SeenEventID)}
	case *history.BudgetUpdated:
		return budgetUpdated(a)
	case *history.BudgetExceeded:
		return Row{Name: t.types[a.ScheduledEventID], Related: a.ScheduledEventID, Tone: "warn",
			Detail: fmt.Sprintf("%s; held (used %d tokens, $%s)", a.Reason, a.Used.Tokens(), strconv.FormatFloat(a.Used.CostUSD, 'f', -1, 64))}
	}
	return Row{}
}

// resetText says where a reset's or a fork's copied history came from.
func resetText(a *history.WorkflowReset) string {
	d := fmt.Sprintf("%s: the events above are %s run %s's up to event %d", a.Kind, a.BaseWorkflowID, a.BaseRunID, a.AtEventID)
	if a.Effects != "" {
		d += "; effects the base's ledger cannot answer: " + a.Effects
	}
	if a.Reapplied > 0 {
		d += fmt.Sprintf("; %d later signals re-applied below", a.Reapplied)
	}
	if a.Reason != "" {
		d += " — " + a.Reason
	}
	return d
}

// budgetUpdated says what a BudgetUpdated set — the budget in its JSON
// shape, the one --input and the API read ({"maxTurns":4}) — or that it
// stopped the held calls, and who did and why.
func budgetUpdated(a *history.BudgetUpdated) Row {
	r := Row{Detail: "stop: the held calls fail", Tone: "bad"}
	if !a.Stop {
		b, _ := json.Marshal(a.Budget) // numbers only: cannot fail
		r.Detail, r.Tone = string(b), "ok"
		if a.Budget.IsZero() {
			r.Detail += " (no limit)"
		}
		if a.WorkflowTaskCompletedEventID != 0 { // set by the workflow's code, not raised by a person
			r.Tone = ""
		}
	}
	if a.By != "" {
		r.Detail += " by " + a.By
	}
	if a.Reason != "" {
		r.Detail += ": " + a.Reason
	}
	return r
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// ignoredApproval renders the agent kit's record of an approval signal it
// applied to no call (history.MarkerApprovalIgnored): what it said and why.
func ignoredApproval(m *history.MarkerRecorded) (Row, bool) {
	var ig history.IgnoredApproval
	if m.Name != history.MarkerApprovalIgnored || m.Data.ByRef() || msgpack.Unmarshal(m.Data.Data, &ig) != nil {
		return Row{}, false
	}
	verb := "reject"
	if ig.Approved {
		verb = "approve"
	}
	if ig.CallID != "" {
		verb += " " + ig.CallID
	}
	if ig.By != "" {
		verb += " by " + ig.By
	}
	return Row{Name: m.Name, Detail: verb + " ignored: " + ig.Why, Tone: "warn"}, true
}

// approvalMarker renders the agent kit's records of a tool call awaiting a
// person's approval and of the decision (history.MarkerApprovalRequested,
// MarkerApprovalDecided): what they mean, not their data's stored names
// ({"ok":false} of a request read as a rejection; {"by","ok","why"} is not
// what an approval signal takes).
func approvalMarker(m *history.MarkerRecorded) (Row, bool) {
	call := history.ToolCallIDOf(m.ID)
	switch m.Name {
	case history.MarkerApprovalRequested:
		req := history.ApprovalRequestOf(m.ID, m.Data) // older histories: the call id of the marker's id, the default signal
		js, _ := json.Marshal(req.CallID)              // a string: cannot fail
		what := req.CallID
		if req.Tool != "" {
			what = req.Tool + " call " + req.CallID
		}
		return Row{Name: m.Name, Tone: "warn",
			Detail: fmt.Sprintf(`%s awaits a person's approval: {"CallID":%s,"Approved":true} on the signal %s`, what, js, req.Signal)}, true
	case history.MarkerApprovalDecided:
	default:
		return Row{}, false
	}
	var ap history.Approval
	if m.Data.ByRef() || msgpack.Unmarshal(m.Data.Data, &ap) != nil {
		return Row{}, false
	}
	r := Row{Name: m.Name, Detail: call + " approved", Tone: "ok"}
	if !ap.Approved {
		r.Detail, r.Tone = call+" rejected", "bad"
	}
	if ap.By != "" {
		r.Detail += " by " + ap.By
	}
	if ap.Reason != "" {
		r.Detail += ": " + ap.Reason
	}
	return r, true
}
