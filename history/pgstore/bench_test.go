package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// BenchmarkCommit commits batches shaped like the engine's transitions —
// 2 or 3 events and 3 or 4 record puts (run state, a task, an index
// entry, every other time a ledger entry), about 1.1 kB — from 1 and 64
// concurrent writers, each on its own run, on the durable Badger store and
// on this store. One op is one Commit; commits/s is ops per second. For
// Postgres, batches/commit is how many batches one Postgres transaction
// carried on average, and statements/commit the statements it took.
//
//	go test -run '^$' -bench BenchmarkCommit -benchtime 3000x ./history/pgstore
func BenchmarkCommit(b *testing.B) {
	for _, writers := range []int{1, 64} {
		b.Run(fmt.Sprintf("badger/writers=%d", writers), func(b *testing.B) {
			s, err := badgerstore.Open(badgerstore.Options{Dir: b.TempDir()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchCommits(b, s, writers, nil)
		})
		b.Run(fmt.Sprintf("postgres/writers=%d", writers), func(b *testing.B) {
			s := mustOpen(b, testOptions(b))
			var before Stats
			benchCommits(b, s, writers, func() { before = s.Stats() })
			st := s.Stats()
			commits := max(st.Commits-before.Commits, 1)
			b.ReportMetric(float64(st.Batches-before.Batches)/float64(commits), "batches/commit")
			b.ReportMetric(float64(st.Statements-before.Statements)/float64(commits), "statements/commit")
		})
		// The same statements, one transaction per batch, each writer on
		// its own connection: what concurrent clients get from Postgres
		// alone (its WAL flushes are shared too), without the committer.
		b.Run(fmt.Sprintf("postgres-unbatched/writers=%d", writers), func(b *testing.B) {
			opts := testOptions(b)
			opts.MaxConns = int32(max(writers, 2))
			s := mustOpen(b, opts)
			benchCommits(b, unbatched{s}, writers, nil)
		})
	}
}

// unbatched commits each batch in a transaction of its own, on the
// caller's goroutine.
type unbatched struct{ *Store }

func (u unbatched) Commit(_ context.Context, b *history.Batch) error {
	r, err := u.prepare(b)
	if err != nil {
		return err
	}
	out := u.round([]*request{r})
	switch {
	case out.committed:
		return nil
	case len(out.guilty) > 0:
		return out.guilty[0]
	}
	return out.mapped()
}

// benchCommits makes b.N commits from writers goroutines and reports
// commits/s. It first warms the store up with 100 commits of a run of its
// own (a new database's first commits are slower), then calls started.
func benchCommits(b *testing.B, s history.Store, writers int, started func()) {
	warm := history.RunRef{WorkflowID: "warm-up", RunID: "r1"}
	for i, id := 0, int64(1); i < 100; i++ {
		batch := engineBatch(warm, id, i)
		if err := s.Commit(bg, batch); err != nil {
			b.Fatal(err)
		}
		id += int64(len(batch.Appends[0].Events))
	}
	if started != nil {
		started()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			run := history.RunRef{WorkflowID: fmt.Sprintf("invoice-%d", w), RunID: "r1"}
			id := int64(1)
			for i := 0; next.Add(1) <= int64(b.N); i++ {
				batch := engineBatch(run, id, i)
				if err := s.Commit(bg, batch); err != nil {
					b.Error(err)
					return
				}
				id += int64(len(batch.Appends[0].Events))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "commits/s")
}

// engineBatch is the i-th transition of run, appending from event id.
func engineBatch(run history.RunRef, id int64, i int) *history.Batch {
	now := time.Now()
	evs := []history.Event{
		{ID: id, Time: now, Attrs: &history.ActivityCompleted{ScheduledEventID: id - 2, StartedEventID: id - 1,
			Result: history.Payload{Encoding: "json", Data: []byte(`{"ok":true,"amount":1200,"currency":"EUR","ref":"INV-9"}`)}}},
		{ID: id + 1, Time: now, Attrs: &history.ActivityScheduled{ActivityID: fmt.Sprint(id + 1), ActivityType: "CallModel",
			Input:          history.Payload{Encoding: "msgpack", Data: bytes.Repeat([]byte{7}, 160)},
			Options:        history.ActivityOptions{TaskQueue: "agents", StartToCloseTimeout: time.Minute},
			Effect:         history.SideEffect,
			IdempotencyKey: fmt.Sprintf("%s:CallModel:%d", run.WorkflowID, id+1)}},
	}
	if i%2 == 1 {
		evs = append(evs, history.Event{ID: id + 2, Time: now, Attrs: &history.WorkflowTaskCompleted{Identity: "worker-1", Attempt: 1}})
	}
	wf := history.Key().Str(run.WorkflowID)
	b := &history.Batch{
		Appends: []history.Append{{Run: run, ExpectedNext: id, Events: evs}},
		Puts: []history.Record{
			{Space: history.SpaceRunState, Key: wf.Str(run.RunID).Bytes(), Value: bytes.Repeat([]byte{1}, 400)},
			{Space: history.SpaceTask, Key: history.Key().Str("agents").Str(run.WorkflowID).Int(id + 1).Bytes(), Value: bytes.Repeat([]byte{2}, 80)},
			{Space: history.SpaceIndex, Key: history.Key().Str("running").Int(now.UnixNano()).Str(run.WorkflowID).Bytes(), Value: bytes.Repeat([]byte{3}, 60)},
		},
	}
	if i%2 == 0 {
		b.Puts = append(b.Puts, history.Record{Space: history.SpaceLedger,
			Key: history.Key().Str(run.WorkflowID).Str(fmt.Sprintf("CallModel:%d", id+1)).Bytes(), Value: bytes.Repeat([]byte{4}, 60)})
	}
	return b
}
