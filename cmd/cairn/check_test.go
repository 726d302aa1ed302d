package main

import (
	"context"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// cliRun is one cairn command line run in process.
type cliRun struct {
	exit           int
	stdout, stderr string
}

func cairnRun(args ...string) cliRun {
	var out, errb strings.Builder
	exit := cli(args, strings.NewReader(""), &out, &errb)
	return cliRun{exit, out.String(), errb.String()}
}

// dataDir makes a data directory holding three runs, one of them closed,
// and no server running on it.
func dataDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "Hold", TaskQueue: "q"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := eng.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: "c", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cairn check exits 3 when it finds damage (a run state that does not
// decode), as documented, and 0 on a whole directory.
func TestCheckExitCodes(t *testing.T) {
	dir := dataDir(t)
	if r := cairnRun("check", "--data", dir); r.exit != 0 {
		t.Fatalf("cairn check of a whole directory: exit %d\n%s%s", r.exit, r.stdout, r.stderr)
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	bad := &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: history.Key().Str("x").Str("y").Bytes(), Value: []byte("not a run state")}}}
	if err := st.Commit(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if r := cairnRun("check", "--data", dir); r.exit != exitCorrupt || !strings.Contains(r.stdout, "1 problems") {
		t.Fatalf("cairn check of a directory holding a damaged run state: exit %d\n%s%s", r.exit, r.stdout, r.stderr)
	}
}
