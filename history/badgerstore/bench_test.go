package badgerstore

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/third_party/badger"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/historytest"
)

// Benchmarks run on disk with fsync on (the defaults), in b.TempDir().

func openBench(b *testing.B) *Store {
	b.Helper()
	s := mustOpen(b, Options{Dir: b.TempDir()})
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// benchEvent is the event the write benchmarks append: an activity result.
func benchEvent(id int64) history.Event {
	return history.Event{ID: id, Time: time.Now(), Attrs: &history.ActivityCompleted{
		ScheduledEventID: id, Result: history.Payload{Encoding: "json", Data: []byte(`{"ok":true,"amount":1200}`)}}}
}

// runConcurrent makes b.N single-event appends from writers goroutines,
// each on its own run, with commit, and reports events/s.
func runConcurrent(b *testing.B, writers int, commit func(run history.RunRef, id int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			run := history.RunRef{WorkflowID: fmt.Sprintf("wf-%d", w), RunID: "r1"}
			for id := int64(1); next.Add(1) <= int64(b.N); id++ {
				if err := commit(run, id); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkAppendConcurrent64: 64 writers, one event per durable commit,
// each on its own run. Group commit lets them share fsyncs; batches/group
// says how many did on average.
func BenchmarkAppendConcurrent64(b *testing.B) {
	var groups, batches atomic.Int64
	s, err := open(Options{Dir: b.TempDir()}, testHooks{taken: func(reqs []*request) {
		groups.Add(1)
		batches.Add(int64(len(reqs)))
	}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	runConcurrent(b, 64, func(run history.RunRef, id int64) error {
		return s.Commit(bg, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: id, Events: []history.Event{benchEvent(id)}}}})
	})
	b.ReportMetric(float64(batches.Load())/float64(max(groups.Load(), 1)), "batches/group")
}

// BenchmarkAppendConcurrent64NoGroup is the same load on raw Badger, one
// transaction (and one fsync) per commit: the figure group commit improves.
func BenchmarkAppendConcurrent64NoGroup(b *testing.B) {
	s := openBench(b)
	runConcurrent(b, 64, func(run history.RunRef, id int64) error { return rawAppend(s.db, run, id) })
}

// BenchmarkAppendSequentialNoGroup: one writer on raw Badger, one
// transaction per commit.
func BenchmarkAppendSequentialNoGroup(b *testing.B) {
	s := openBench(b)
	runConcurrent(b, 1, func(run history.RunRef, id int64) error { return rawAppend(s.db, run, id) })
}

// rawAppend does what one Commit of a one-event append does, in its own
// Badger transaction.
func rawAppend(db *badger.DB, run history.RunRef, id int64) error {
	v, err := history.EncodeEvent(benchEvent(id))
	if err != nil {
		return err
	}
	return db.Update(func(txn *badger.Txn) error {
		last, err := lastEvent(txn, run)
		if err != nil {
			return err
		}
		if last+1 != id {
			return history.ErrConflict
		}
		return txn.Set(eventKey(eventPrefix(run), id), v)
	})
}

// BenchmarkCommitLatency: one writer, one durable single-event commit per
// op; reports the 50th and 99th percentile latency.
func BenchmarkCommitLatency(b *testing.B) {
	s := openBench(b)
	run := history.RunRef{WorkflowID: "wf", RunID: "r1"}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		id := int64(i + 1)
		start := time.Now()
		err := s.Commit(bg, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: id, Events: []history.Event{benchEvent(id)}}}})
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))]) / 1e6 }
	b.ReportMetric(ms(0.50), "p50-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
}

// BenchmarkReadHistory10k reads and decodes one 10,000-event history (the
// historytest fixture mix), from the memtable and, after a reopen, from
// table files.
func BenchmarkReadHistory10k(b *testing.B) {
	const n = 10_000
	dir := b.TempDir()
	s := mustOpen(b, Options{Dir: dir})
	run := history.RunRef{WorkflowID: "wf-read", RunID: "r1"}
	for from := int64(1); from <= n; from += 1000 {
		evs := historytest.Events(from, 1000)
		if err := s.Commit(bg, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: from, Events: evs}}}); err != nil {
			b.Fatal(err)
		}
	}
	read := func(b *testing.B, s *Store) {
		for b.Loop() {
			evs, err := s.ReadEvents(bg, run, 1, 0)
			if err != nil || len(evs) != n {
				b.Fatalf("ReadEvents: %d events, %v", len(evs), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/read")
	}
	b.Run("memtable", func(b *testing.B) { read(b, s) })
	if err := s.Close(); err != nil { // Close flushes the memtable to a table file
		b.Fatal(err)
	}
	s = mustOpen(b, Options{Dir: dir})
	defer s.Close()
	b.Run("tables", func(b *testing.B) { read(b, s) })
}
