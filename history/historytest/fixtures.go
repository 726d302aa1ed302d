package historytest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

// baseTime is the engine clock of fixture event 1.
var baseTime = time.Unix(1_700_000_000, 0).UTC()

// Event returns fixture event id: a realistic rotation through the types an
// agent run produces (ActivityScheduled with a 100-byte msgpack input,
// ActivityStarted, ActivityCompleted with a result, WorkflowTaskCompleted,
// TimerStarted, TimerFired, SignalReceived, MarkerRecorded), with
// attributes derived from id. Event 1 is WorkflowStarted. Benchmarks of
// stores use it too.
func Event(id int64) history.Event {
	ev := history.Event{ID: id, Time: baseTime.Add(time.Duration(id) * time.Millisecond)}
	if id == 1 {
		ev.Attrs = &history.WorkflowStarted{WorkflowType: "Agent", TaskQueue: "agents",
			Input: history.Payload{Encoding: "json", Data: []byte(`{"goal":"pay invoice"}`)}}
		return ev
	}
	sched := id - id%8
	switch id % 8 {
	case 0:
		ev.Attrs = &history.ActivityScheduled{ActivityID: fmt.Sprint(id), ActivityType: "CallModel",
			Input:          history.Payload{Encoding: "msgpack", Data: bytes.Repeat([]byte{byte(id)}, 100)},
			Options:        history.ActivityOptions{TaskQueue: "agents", StartToCloseTimeout: time.Minute},
			Effect:         history.SideEffect,
			IdempotencyKey: fmt.Sprintf("wf:CallModel:%d", id)}
	case 1:
		ev.Attrs = &history.ActivityStarted{ScheduledEventID: sched, Attempt: 1, LeaseEpoch: id, Identity: "worker-1"}
	case 2:
		ev.Attrs = &history.ActivityCompleted{ScheduledEventID: sched, StartedEventID: sched + 1,
			Result: history.Payload{Encoding: "json", Data: []byte(fmt.Sprintf(`{"answer":%d}`, id))}}
	case 3:
		ev.Attrs = &history.WorkflowTaskCompleted{Identity: "worker-1", Attempt: 1}
	case 4:
		ev.Attrs = &history.TimerStarted{TimerID: fmt.Sprint(id), Duration: time.Second,
			FireAt: baseTime.Add(time.Duration(id) * time.Second)}
	case 5:
		ev.Attrs = &history.TimerFired{TimerID: fmt.Sprint(id - 1), StartedEventID: id - 1}
	case 6:
		ev.Attrs = &history.SignalReceived{Name: "approve", Input: history.Payload{Encoding: "json", Data: []byte(`true`)}}
	default:
		ev.Attrs = &history.MarkerRecorded{Name: "SideEffect", ID: fmt.Sprint(id),
			Data: history.Payload{Encoding: "json", Data: []byte(`"x"`)}}
	}
	return ev
}

// Events returns fixture events from..from+n-1 (see Event).
func Events(from int64, n int) []history.Event {
	out := make([]history.Event, n)
	for i := range out {
		out[i] = Event(from + int64(i))
	}
	return out
}

// appendBatch is a batch appending evs (numbered from evs[0].ID) to run.
func appendBatch(run history.RunRef, evs ...history.Event) *history.Batch {
	return &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: evs[0].ID, Events: evs}}}
}

// appendN commits fixture events from..from+n-1 to run and returns them.
func appendN(t testing.TB, s history.Store, run history.RunRef, from int64, n int) []history.Event {
	t.Helper()
	evs := Events(from, n)
	mustCommit(t, s, appendBatch(run, evs...))
	return evs
}

// sameEvent reports whether two events are equal as stored: the same id
// and the same encoding (which covers type, time and every attribute).
func sameEvent(a, b history.Event) bool {
	if a.ID != b.ID || a.Type() != b.Type() {
		return false
	}
	ea, errA := history.EncodeEvent(a)
	eb, errB := history.EncodeEvent(b)
	return errA == nil && errB == nil && bytes.Equal(ea, eb)
}

// wantEvents fails the test unless got equals want event by event.
func wantEvents(t testing.TB, what string, got, want []history.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d events, want %d", what, len(got), len(want))
	}
	for i := range want {
		if !sameEvent(got[i], want[i]) {
			t.Fatalf("%s: event %d:\n got %v %+v\nwant %v %+v", what, i, got[i], got[i].Attrs, want[i], want[i].Attrs)
		}
	}
}

// readAll reads a run's whole history.
func readAll(t testing.TB, s history.Store, run history.RunRef) []history.Event {
	t.Helper()
	evs, err := s.ReadEvents(ctx, run, 1, 0)
	wantNoErr(t, fmt.Sprintf("ReadEvents %v", run), err)
	return evs
}

// collect drains an Events iterator, returning the events and the error
// that ended it.
func collect(s history.Store, run history.RunRef, from int64) ([]history.Event, error) {
	var out []history.Event
	for ev, err := range s.Events(ctx, run, from) {
		if err != nil {
			return out, err
		}
		out = append(out, ev)
	}
	return out, nil
}

// wantLast fails the test unless run's last event id is want.
func wantLast(t testing.TB, s history.Store, run history.RunRef, want int64) {
	t.Helper()
	got, err := s.LastEventID(ctx, run)
	wantNoErr(t, "LastEventID", err)
	if got != want {
		t.Fatalf("LastEventID(%v) = %d, want %d", run, got, want)
	}
}

// wantValue fails the test unless the record holds want.
func wantValue(t testing.TB, s history.Store, sp history.Space, key, want []byte) {
	t.Helper()
	got, err := s.Get(ctx, sp, key)
	wantNoErr(t, fmt.Sprintf("Get %s %q", sp, key), err)
	if !bytes.Equal(got, want) {
		t.Fatalf("Get %s %q = %q, want %q", sp, key, got, want)
	}
}

// wantAbsent fails the test unless the record does not exist.
func wantAbsent(t testing.TB, s history.Store, sp history.Space, key []byte) {
	t.Helper()
	got, err := s.Get(ctx, sp, key)
	wantErr(t, fmt.Sprintf("Get %s %q (value %q)", sp, key, got), err, history.ErrNotFound)
}

// wantNoRun fails the test unless run has no events.
func wantNoRun(t testing.TB, s history.Store, run history.RunRef) {
	t.Helper()
	_, err := s.ReadEvents(ctx, run, 1, 0)
	wantErr(t, fmt.Sprintf("ReadEvents %v", run), err, history.ErrNotFound)
	wantLast(t, s, run, 0)
}

// put is a one-record Put.
func put(sp history.Space, key, value string) history.Record {
	return history.Record{Space: sp, Key: []byte(key), Value: []byte(value)}
}
