package pgstore

import (
	"context"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/historytest"
	"github.com/cairnflow/cairn/internal/pgtest"
)

var bg = context.Background()

// testOptions returns options for a store in a schema of its own.
func testOptions(t testing.TB) Options {
	t.Helper()
	url, schema := pgtest.URL(t)
	return Options{URL: url, Schema: schema, Shards: 16}
}

// mustOpen opens a store that is closed when the test ends.
func mustOpen(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(bg, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	historytest.Run(t, historytest.Harness{
		New: func(t testing.TB) history.Store { return mustOpen(t, testOptions(t)) },
		Reopen: func(t testing.TB, s history.Store) history.Store {
			opts := s.(*Store).opts
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return mustOpen(t, opts)
		},
		Corrupt: corruptEvent,
	})
}

// corruptEvent flips one bit in the middle of an event's stored record,
// behind the store's back.
func corruptEvent(t testing.TB, hs history.Store, run history.RunRef, id int64) {
	t.Helper()
	s := hs.(*Store)
	var data []byte
	const where = " FROM events WHERE workflow_id = $1 AND run_id = $2 AND event_id = $3"
	if err := s.pool.QueryRow(bg, "SELECT data"+where, []byte(run.WorkflowID), []byte(run.RunID), id).Scan(&data); err != nil {
		t.Fatalf("read event %d of %v: %v", id, run, err)
	}
	data[len(data)/2] ^= 0x10
	if _, err := s.pool.Exec(bg, "UPDATE events SET data = $4"+where[len(" FROM events"):],
		[]byte(run.WorkflowID), []byte(run.RunID), id, data); err != nil {
		t.Fatalf("corrupt event %d of %v: %v", id, run, err)
	}
}
