package pgstore

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// TestRecordEnvelopeOnDisk: a record's stored value is history's sealed
// envelope over (space letter, key, value): the same bytes badgerstore
// stores.
func TestRecordEnvelopeOnDisk(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	if err := s.Commit(bg, &history.Batch{Puts: []history.Record{put(history.SpaceLedger, "pay-1", "paid")}}); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := s.pool.QueryRow(bg, "SELECT value FROM records WHERE space = $1 AND key = $2",
		int16(history.SpaceLedger), []byte("pay-1")).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := history.SealRecord([]byte("epay-1"), []byte("paid")); !bytes.Equal(stored, want) {
		t.Fatalf("stored %x, want %x", stored, want)
	}
}

// wantCorruptRecord fails unless err is ErrCorrupt naming sp and key.
func wantCorruptRecord(t *testing.T, what string, err error, sp history.Space, key string) {
	t.Helper()
	var ce *history.CorruptError
	if !errors.As(err, &ce) || ce.Space != sp || string(ce.Key) != key {
		t.Fatalf("%s: %v, want a CorruptError naming %s key %q", what, err, sp, key)
	}
	if !strings.Contains(err.Error(), sp.String()) {
		t.Fatalf("%s: %q does not name the space", what, err)
	}
}

// TestDamagedRecords: a flipped bit, a value moved under another key and a
// truncated value are refused by Get, Scan and a Condition with
// ErrCorrupt naming space and key; the other records stay readable.
func TestDamagedRecords(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	sp := history.SpaceRunState
	if err := s.Commit(bg, &history.Batch{Puts: []history.Record{put(sp, "a", "alpha"), put(sp, "b", "beta"),
		put(sp, "c", "gamma"), put(sp, "d", "delta")}}); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := s.pool.Exec(bg, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	// a: one bit flipped; b: c's value; c: cut short.
	exec("UPDATE records SET value = overlay(value placing '\\x41'::bytea from 6 for 1) WHERE space = $1 AND key = 'a'", int16(sp))
	exec("UPDATE records SET value = (SELECT value FROM records WHERE space = $1 AND key = 'c') WHERE space = $1 AND key = 'b'", int16(sp))
	exec("UPDATE records SET value = substring(value from 1 for 3) WHERE space = $1 AND key = 'c'", int16(sp))
	for _, k := range []string{"a", "b", "c"} {
		_, err := s.Get(bg, sp, []byte(k))
		wantCorruptRecord(t, "Get "+k, err, sp, k)
		err = s.Commit(bg, &history.Batch{Conditions: []history.Condition{{Space: sp, Key: []byte(k), Exists: true}}})
		wantCorruptRecord(t, "Condition on "+k, err, sp, k)
	}
	_, err := s.Scan(bg, sp, history.ScanOptions{})
	wantCorruptRecord(t, "Scan", err, sp, "a")
	wantValue(t, s, sp, "d", "delta")
	recs, err := s.Scan(bg, sp, history.ScanOptions{After: []byte("c")})
	if err != nil || len(recs) != 1 || string(recs[0].Value) != "delta" {
		t.Fatalf("Scan past the damage: %v, %v", recs, err)
	}
}

// TestMissingAndStrayEvents: an event row missing inside a history, or
// at its end, and a row past the run's head, are ErrCorrupt naming the
// event, never a silently shorter (or longer) history.
func TestMissingAndStrayEvents(t *testing.T) {
	s := mustOpen(t, testOptions(t))
	run := runRef("wf-holes")
	for id := int64(1); id <= 6; id++ {
		if err := s.Commit(bg, appendTo(run, id, "x")); err != nil {
			t.Fatal(err)
		}
	}
	del := func(id int64) {
		t.Helper()
		if _, err := s.pool.Exec(bg, "DELETE FROM events WHERE workflow_id = $1 AND event_id = $2", []byte(run.WorkflowID), id); err != nil {
			t.Fatal(err)
		}
	}
	wantEventCorrupt := func(what string, err error, id int64) {
		t.Helper()
		var ce *history.CorruptError
		if !errors.As(err, &ce) || ce.Run != run || ce.EventID != id {
			t.Fatalf("%s: %v, want ErrCorrupt naming event %d", what, err, id)
		}
	}
	del(3)
	_, err := s.ReadEvents(bg, run, 1, 0)
	wantEventCorrupt("hole at 3", err, 3)
	if evs, err := s.ReadEvents(bg, run, 4, 0); err != nil || len(evs) != 3 {
		t.Fatalf("events after the hole: %d, %v", len(evs), err)
	}
	del(6)
	_, err = s.ReadEvents(bg, run, 4, 0)
	wantEventCorrupt("lost last event", err, 6)
	_, err = s.ReadEvents(bg, run, 6, 1)
	wantEventCorrupt("lost last event alone", err, 6)
	if _, err := s.pool.Exec(bg, "INSERT INTO events SELECT workflow_id, run_id, 9, data FROM events WHERE workflow_id = $1 AND event_id = 5",
		[]byte(run.WorkflowID)); err != nil {
		t.Fatal(err)
	}
	var got error
	for _, err := range s.Events(bg, run, 7) {
		got = err
	}
	wantEventCorrupt("stray event past the head", got, 9)
}
