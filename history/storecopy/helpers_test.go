package storecopy_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/historytest"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/history/storecopy"
	"github.com/cairnflow/cairn/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var bg = context.Background()

// source names the source in every test's options.
const source = "badger:/test/source"

func opts() storecopy.Options { return storecopy.Options{Source: source} }

// openBadger opens a store on a new directory (in memory when dir is
// empty), closed when the test ends.
func openBadger(t testing.TB, dir string) *badgerstore.Store {
	t.Helper()
	o := badgerstore.Options{Dir: dir, NoSync: true, InMemory: dir == ""}
	st, err := badgerstore.Open(o)
	if err != nil {
		t.Fatalf("open badger: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openPostgres opens a store in a schema of the test's own.
func openPostgres(t testing.TB) *pgstore.Store {
	t.Helper()
	url, schema := pgtest.URL(t)
	st, err := pgstore.Open(bg, pgstore.Options{URL: url, Schema: schema, Shards: 4})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// shape says what fill writes.
type shape struct {
	// records per space; chunkBytes the size of each chunk value.
	records, chunkBytes int
	// runs with 1..maxEvents events; long adds one run of that many.
	runs, maxEvents, long int
}

var small = shape{records: 40, chunkBytes: 50 << 10, runs: 25, maxEvents: 30, long: 2600}

// odd ids: prefixes of each other, NUL and 0xFF bytes.
var oddRuns = []history.RunRef{
	{WorkflowID: "a", RunID: "b"}, {WorkflowID: "a", RunID: "bc"}, {WorkflowID: "a\x00b", RunID: "c"},
	{WorkflowID: "ab", RunID: "\x00"}, {WorkflowID: "\xff", RunID: "\xff\xfe"},
}

// fill writes records in every space and the runs of sh into st. No run
// has a run state: runs are named by their events.
func fill(t testing.TB, st history.Store, sh shape) {
	t.Helper()
	for sp := history.Space(1); sp.Valid(); sp++ {
		var b history.Batch
		size := 0
		for i := range sh.records {
			v := []byte(fmt.Sprintf("%s value %d", sp, i))
			switch {
			case sp == history.SpaceChunk:
				v = bytes.Repeat([]byte{byte(i)}, sh.chunkBytes)
			case i%7 == 0:
				v = nil // an empty value
			}
			b.Puts = append(b.Puts, history.Record{Space: sp, Key: history.Key().Str(sp.String()).Int(int64(i)).Bytes(), Value: v})
			if size += len(v); len(b.Puts) == 20 || size > 1<<20 {
				mustCommit(t, st, &b)
				b, size = history.Batch{}, 0
			}
		}
		mustCommit(t, st, &b)
	}
	for i, run := range runsOf(sh) {
		n := 1 + i%max(sh.maxEvents, 1)
		if i == 0 && sh.long > 0 {
			n = sh.long
		}
		appendEvents(t, st, run, 1, n)
	}
}

// runsOf names the runs fill writes.
func runsOf(sh shape) []history.RunRef {
	runs := append([]history.RunRef(nil), oddRuns...)
	for i := range sh.runs {
		runs = append(runs, history.RunRef{WorkflowID: fmt.Sprintf("wf-%03d", i), RunID: fmt.Sprintf("run-%d", i%3)})
	}
	return runs
}

// appendEvents appends fixture events from..from+n-1 to run, 500 a batch.
func appendEvents(t testing.TB, st history.Store, run history.RunRef, from int64, n int) {
	t.Helper()
	for n > 0 {
		k := min(n, 500)
		mustCommit(t, st, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: from, Events: historytest.Events(from, k)}}})
		from += int64(k)
		n -= k
	}
}

func mustCommit(t testing.TB, st history.Store, b *history.Batch) {
	t.Helper()
	if b.Empty() {
		return
	}
	if err := st.Commit(bg, b); err != nil {
		t.Fatalf("commit: %v", err)
	}
}

// wantCounts fails unless v compared what fill wrote for sh.
func wantCounts(t testing.TB, v *storecopy.Verification, sh shape) {
	t.Helper()
	runs, events := int64(0), int64(0)
	for i := range runsOf(sh) {
		runs++
		n := 1 + i%max(sh.maxEvents, 1)
		if i == 0 && sh.long > 0 {
			n = sh.long
		}
		events += int64(n)
	}
	spaces := int64(0)
	for sp := history.Space(1); sp.Valid(); sp++ {
		spaces++
	}
	if v.Records() != spaces*int64(sh.records) || v.Runs != runs || v.Events != events || len(v.Spaces) != int(spaces) {
		t.Fatalf("verified %d records in %d spaces, %d runs, %d events; want %d, %d, %d, %d",
			v.Records(), len(v.Spaces), v.Runs, v.Events, spaces*int64(sh.records), spaces, runs, events)
	}
}
