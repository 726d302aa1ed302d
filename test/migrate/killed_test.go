package migrate_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/historytest"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/testkit"
)

// cairn migrate killed with SIGKILL in the middle of the copy leaves the
// target holding part of it, which cairn check --store reports as
// INCOMPLETE (exit 3); the same command run again resumes, verifies, and
// the check passes.
func TestMigrateKilledAndRunAgain(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir, NoSync: true})
	must(t, err)
	fillRuns(t, st, 3000)
	must(t, st.Close())
	url, schema := pgtest.URL(t)
	args := []string{"migrate", "--from", dir, "--to", url, "--schema", schema}

	p := testkit.Start(t, testkit.Cmd{Path: testkit.Cairn(t), Args: args, Name: "cairn migrate"})
	p.WaitLine(ctx, "migrate: records usage") // the records are in; 72,000 events to go
	p.Kill()
	if p.State().Success() {
		t.Fatal("cairn migrate finished before it was killed")
	}
	out, _ := testkit.CLI(ctx, t, "", "check", "--store", url, "--schema", schema)
	if out.Code != 3 || !strings.Contains(out.Stdout, "INCOMPLETE") {
		t.Fatalf("cairn check --store after the kill: exit %d\n%s", out.Code, out.Combined)
	}

	out, err = testkit.CLI(ctx, t, "", args...)
	if err != nil || !strings.Contains(out.Stdout, "resuming an interrupted copy") || !strings.Contains(out.Stdout, "3000 runs, 72000 events read back") {
		t.Fatalf("cairn migrate run again: %v\n%s", err, out.Combined)
	}
	out, err = testkit.CLI(ctx, t, "", "check", "--store", url, "--schema", schema)
	if err != nil || !strings.Contains(out.Stdout, "OK: ") {
		t.Fatalf("cairn check --store after the copy: %v\n%s", err, out.Combined)
	}
}

// fillRuns writes runs of 24 events and a usage record each into st (no
// run states: engine.Check sees no runs, storecopy copies them all).
func fillRuns(t *testing.T, st history.Store, runs int) {
	t.Helper()
	var b history.Batch
	for i := range runs {
		run := history.RunRef{WorkflowID: fmt.Sprintf("invoice-%05d", i), RunID: "r1"}
		b.Appends = append(b.Appends, history.Append{Run: run, ExpectedNext: 1, Events: historytest.Events(1, 24)})
		b.Puts = append(b.Puts, history.Record{Space: history.SpaceUsage, Key: history.Key().Str(run.WorkflowID).Bytes(), Value: []byte("usage")})
		if len(b.Appends) == 50 || i == runs-1 {
			must(t, st.Commit(t.Context(), &b))
			b = history.Batch{}
		}
	}
}
