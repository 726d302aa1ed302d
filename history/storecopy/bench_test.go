package storecopy_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/historytest"
	"github.com/cairnflow/cairn/history/storecopy"
)

// BenchmarkCopyToPostgres copies a Badger directory shaped like an
// agent's data — runs of 24 events, each with a run state, a current-run
// pointer, two index entries and a ledger entry, and one 4 KiB payload
// chunk every two runs — into a fresh Postgres schema, then verifies it,
// and reports the rates of both. CAIRN_STORECOPY_BENCH_RUNS sets the
// number of runs (default 2,000).
//
//	go test ./history/storecopy -run '^$' -bench CopyToPostgres -benchtime 3x
func BenchmarkCopyToPostgres(b *testing.B) {
	runs := 2000
	if s := os.Getenv("CAIRN_STORECOPY_BENCH_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			b.Fatalf("CAIRN_STORECOPY_BENCH_RUNS=%q: %v", s, err)
		}
		runs = n
	}
	src := openBadger(b, b.TempDir())
	fillRuns(b, src, runs)
	var copyTime, verifyTime time.Duration
	var res *storecopy.Result
	for b.Loop() {
		dst := openPostgres(b)
		start := time.Now()
		rep, err := storecopy.Copy(bg, src, dst, opts())
		if err != nil {
			b.Fatal(err)
		}
		copyTime += time.Since(start)
		start = time.Now()
		v, err := storecopy.Verify(bg, src, dst, storecopy.Options{})
		if err != nil {
			b.Fatal(err)
		}
		verifyTime += time.Since(start)
		res = &storecopy.Result{Copy: rep, Verify: v}
		_ = dst.Close()
	}
	n := float64(b.N)
	records, events := float64(res.Verify.Records()), float64(res.Verify.Events)
	var bytes int64 = res.Verify.EventBytes
	for _, s := range res.Verify.Spaces {
		bytes += s.Bytes
	}
	b.ReportMetric(records*n/copyTime.Seconds(), "records/s")
	b.ReportMetric(events*n/copyTime.Seconds(), "events/s")
	b.ReportMetric(float64(bytes)*n/copyTime.Seconds()/(1<<20), "MB/s")
	b.ReportMetric(float64(bytes)*n/verifyTime.Seconds()/(1<<20), "verify-MB/s")
	b.ReportMetric(copyTime.Seconds()/n, "copy-s")
	b.ReportMetric(verifyTime.Seconds()/n, "verify-s")
	b.Logf("%d runs, %d events, %d records, %d bytes; %d batches", res.Verify.Runs, res.Verify.Events, res.Verify.Records(), bytes, res.Copy.Batches)
}

// fillRuns writes runs shaped like an agent's into st.
func fillRuns(b *testing.B, st history.Store, runs int) {
	b.Helper()
	var batch history.Batch
	for i := range runs {
		run := history.RunRef{WorkflowID: fmt.Sprintf("invoice-INV-%06d", i), RunID: fmt.Sprintf("01J%023d", i)}
		key := history.Key().Str(run.WorkflowID).Str(run.RunID).Bytes()
		batch.Appends = append(batch.Appends, history.Append{Run: run, ExpectedNext: 1, Events: historytest.Events(1, 24)})
		batch.Puts = append(batch.Puts,
			history.Record{Space: history.SpaceRunState, Key: key, Value: make([]byte, 600)},
			history.Record{Space: history.SpaceCurrentRun, Key: history.Key().Str(run.WorkflowID).Bytes(), Value: []byte(run.RunID)},
			history.Record{Space: history.SpaceIndex, Key: append(history.Key().Str("a").Bytes(), key...), Value: make([]byte, 120)},
			history.Record{Space: history.SpaceIndex, Key: append(history.Key().Str("s").Bytes(), key...), Value: make([]byte, 120)},
			history.Record{Space: history.SpaceLedger, Key: history.Key().Str(run.WorkflowID).Str("pay:1").Bytes(), Value: make([]byte, 300)})
		if i%2 == 0 {
			batch.Puts = append(batch.Puts, history.Record{Space: history.SpaceChunk, Key: []byte(fmt.Sprintf("chunk-%08d", i)), Value: make([]byte, 4<<10)})
		}
		if len(batch.Appends) == 40 {
			mustCommit(b, st, &batch)
			batch = history.Batch{}
		}
	}
	mustCommit(b, st, &batch)
}
