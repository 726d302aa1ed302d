package pgstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

var t0 = time.Unix(1_700_000_000, 0).UTC()

func signal(id int64, name string) history.Event {
	return history.Event{ID: id, Time: t0, Attrs: &history.SignalReceived{Name: name}}
}

func runRef(wf string) history.RunRef { return history.RunRef{WorkflowID: wf, RunID: "r1"} }

// appendTo is a batch appending one signal, numbered next, to run.
func appendTo(run history.RunRef, next int64, name string) *history.Batch {
	return &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: next, Events: []history.Event{signal(next, name)}}}}
}

func put(sp history.Space, key, value string) history.Record {
	return history.Record{Space: sp, Key: []byte(key), Value: []byte(value)}
}

// openHooks opens a store with test hooks, closed when the test ends.
func openHooks(t testing.TB, opts Options, hooks testHooks) *Store {
	t.Helper()
	s, err := open(bg, opts, hooks, migrationFiles)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// runGroup commits batches as one group, directly on the committer's code
// path, and returns each batch's outcome. The store's own committer stays
// idle meanwhile (nothing is queued), so this goroutine is the only
// writer.
func runGroup(t *testing.T, s *Store, batches ...*history.Batch) []error {
	t.Helper()
	reqs := make([]*request, len(batches))
	for i, b := range batches {
		r, err := s.prepare(b)
		if err != nil {
			t.Fatalf("prepare batch %d: %v", i, err)
		}
		reqs[i] = r
	}
	s.commitGroup(reqs)
	errs := make([]error, len(reqs))
	for i, r := range reqs {
		select {
		case errs[i] = <-r.done:
		default:
			t.Fatalf("batch %d was not answered", i)
		}
	}
	return errs
}

// wantOutcomes compares each outcome with want (nil, or a sentinel).
func wantOutcomes(t *testing.T, got []error, want ...error) {
	t.Helper()
	for i := range want {
		if (want[i] == nil) != (got[i] == nil) || (want[i] != nil && !errors.Is(got[i], want[i])) {
			t.Fatalf("batch %d: got %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}

func wantValue(t *testing.T, s *Store, sp history.Space, key, want string) {
	t.Helper()
	got, err := s.Get(bg, sp, []byte(key))
	if err != nil || string(got) != want {
		t.Fatalf("Get %s %q = %q, %v; want %q", sp, key, got, err, want)
	}
}

func wantAbsent(t *testing.T, s *Store, sp history.Space, key string) {
	t.Helper()
	if got, err := s.Get(bg, sp, []byte(key)); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("Get %s %q = %q, %v; want ErrNotFound", sp, key, got, err)
	}
}

func wantLast(t *testing.T, s *Store, run history.RunRef, want int64) {
	t.Helper()
	if got, err := s.LastEventID(bg, run); err != nil || got != want {
		t.Fatalf("LastEventID(%v) = %d, %v; want %d", run, got, err, want)
	}
}

// withParam adds a parameter to a database URL (either form).
func withParam(dbURL, key, value string) string {
	if !strings.Contains(dbURL, "://") {
		return fmt.Sprintf("%s %s=%s", dbURL, key, value)
	}
	sep := "?"
	if strings.Contains(dbURL, "?") {
		sep = "&"
	}
	return dbURL + sep + url.QueryEscape(key) + "=" + strings.ReplaceAll(url.QueryEscape(value), "+", "%20")
}

// until calls cond until it reports true, failing the test at its
// deadline (or after a minute). It does not sleep: each call is a round
// trip to the database, which is what the condition waits for.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if !poll(t, cond) {
		t.Fatalf("%s: not by the deadline", what)
	}
}

// poll calls cond until it reports true (true) or the test's deadline
// nears, or a minute passes (false). Unlike until it may run on any
// goroutine.
func poll(t *testing.T, cond func() bool) bool {
	deadline := time.Now().Add(time.Minute)
	if d, ok := t.Deadline(); ok && d.Add(-5*time.Second).Before(deadline) {
		deadline = d.Add(-5 * time.Second)
	}
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}
