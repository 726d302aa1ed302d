package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// payloadText renders a payload as JSON where it decodes, else describes it.
func payloadText(p history.Payload) string {
	if p.IsZero() {
		return ""
	}
	if p.Encoding == "json" && json.Valid(p.Data) {
		return string(p.Data)
	}
	var v any
	if err := sdk.DefaultConverter().FromPayload(p, &v); err == nil {
		if b, err := json.Marshal(jsonable(v)); err == nil {
			return string(b)
		}
	}
	return fmt.Sprintf("<%d bytes %s>", len(p.Data), p.Encoding)
}

// jsonable turns msgpack's map[any]any into maps JSON can encode.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

func abbreviate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// jsonPayload turns a --input flag into a JSON payload (the SDK's
// converters decode JSON payloads as well as msgpack ones).
func jsonPayload(flag, s string) (history.Payload, error) {
	if s == "" {
		return history.Payload{}, nil
	}
	if !json.Valid([]byte(s)) {
		return history.Payload{}, usagef("%s is not valid JSON: %q (quote strings: '\"text\"')", flag, s)
	}
	return history.Payload{Encoding: "json", Data: []byte(s)}, nil
}

// relative renders t relative to now ("3m ago", "in 2s").
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := now.Sub(t); d >= 0 {
		return roundDuration(d) + " ago"
	} else {
		return "in " + roundDuration(-d)
	}
}

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiGray   = "\x1b[90m"
)

// statusText colours a status on a terminal.
func (g *globals) statusText(s api.Status) string {
	name := s.String()
	if !g.color {
		return name
	}
	c := ansiGray
	switch s {
	case api.StatusRunning:
		c = ansiBlue
	case api.StatusCompleted:
		c = ansiGreen
	case api.StatusPaused:
		c = ansiYellow
	case api.StatusFailed, api.StatusTerminated, api.StatusTimedOut, api.StatusCanceled:
		c = ansiRed
	}
	return c + name + ansiReset
}

// printJSON writes v as indented JSON.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// showHistory renders a history one line per event.
func showHistory(w io.Writer, evs []history.Event, full bool) {
	types := map[int64]string{}
	started := map[int64]time.Time{}
	attempts := map[int64]int32{}
	var t0 time.Time
	if len(evs) > 0 {
		t0 = evs[0].Time
	}
	width := 60
	if full {
		width = 1 << 30
	}
	rows := make([][]string, 0, len(evs))
	for _, ev := range evs {
		name, detail, dur := eventLine(ev, types, started, attempts)
		if full {
			if b, err := json.Marshal(ev); err == nil {
				detail = string(b)
			}
		}
		rows = append(rows, []string{fmt.Sprint(ev.ID), "+" + roundDuration(ev.Time.Sub(t0)), ev.Type().String(), name, dur,
			abbreviate(detail, width)})
	}
	table(w, []string{"ID", "TIME", "EVENT", "NAME", "DURATION", "DETAILS"}, rows)
}

// eventLine names an event's activity, timer or signal, its duration where
// it ends something, and a short detail.
func eventLine(ev history.Event, types map[int64]string, started map[int64]time.Time, attempts map[int64]int32) (name, detail, dur string) {
	since := func(id int64) string {
		if t, ok := started[id]; ok {
			return roundDuration(ev.Time.Sub(t))
		}
		return ""
	}
	switch a := ev.Attrs.(type) {
	case *history.WorkflowStarted:
		return a.WorkflowType, payloadText(a.Input), ""
	case *history.ActivityScheduled:
		types[ev.ID] = a.ActivityType
		started[ev.ID] = ev.Time
		d := payloadText(a.Input)
		if a.Effect != history.Read {
			d = fmt.Sprintf("%s key=%s %s", a.Effect, abbreviate(a.IdempotencyKey, 13), d)
		}
		return a.ActivityType, d, ""
	case *history.ActivityStarted:
		attempts[a.ScheduledEventID] = a.Attempt
		d := fmt.Sprintf("attempt %d", a.Attempt)
		if a.Reconcile {
			d += " (reconcile lookup)"
		}
		return types[a.ScheduledEventID], d, ""
	case *history.ActivityCompleted:
		return types[a.ScheduledEventID], fmt.Sprintf("attempt %d → %s", attempts[a.ScheduledEventID], payloadText(a.Result)), since(a.ScheduledEventID)
	case *history.ActivityFailed:
		return types[a.ScheduledEventID], fmt.Sprintf("attempt %d: %s", a.Attempt, a.Failure.Error()), since(a.ScheduledEventID)
	case *history.ActivityTimedOut:
		return types[a.ScheduledEventID], a.Timeout, since(a.ScheduledEventID)
	case *history.ActivityOutcomeUnknown:
		return types[a.ScheduledEventID], a.Reason, since(a.ScheduledEventID)
	case *history.ActivityResolved:
		return types[a.ScheduledEventID], fmt.Sprintf("%s by %s: %s", a.Resolution, a.By, a.Reason), since(a.ScheduledEventID)
	case *history.ActivityDeduplicated:
		return types[a.ScheduledEventID], fmt.Sprintf("already done by run %s (key %s) → %s", abbreviate(a.OriginalRunID, 9),
			abbreviate(a.IdempotencyKey, 13), payloadText(a.Result)), since(a.ScheduledEventID)
	case *history.ActivityDuplicateDetected:
		return types[a.ScheduledEventID], fmt.Sprintf("DUPLICATE EFFECT: stale attempt %d reported success", a.Attempt), ""
	case *history.TimerStarted:
		started[ev.ID] = ev.Time
		return a.TimerID, a.Duration.String(), ""
	case *history.TimerFired:
		return a.TimerID, "", since(a.StartedEventID)
	case *history.TimerCanceled:
		return a.TimerID, "", since(a.StartedEventID)
	case *history.SignalReceived:
		return a.Name, payloadText(a.Input), ""
	case *history.MarkerRecorded:
		return a.Name, a.ID + " " + payloadText(a.Data), ""
	case *history.ChildWorkflowStarted:
		return a.WorkflowType, a.WorkflowID, ""
	case *history.WorkflowCompleted:
		return "", payloadText(a.Result), ""
	case *history.WorkflowFailed:
		return "", a.Failure.Error(), ""
	case *history.WorkflowTerminated:
		return "", a.Reason, ""
	case *history.WorkflowTaskFailed:
		return a.Cause, a.Failure.Error(), ""
	case *history.WorkflowTaskCompleted:
		return "", fmt.Sprintf("decided having seen event %d", a.SeenEventID), ""
	}
	return "", "", ""
}
