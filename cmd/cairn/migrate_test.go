package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/history/storecopy"
	"github.com/cairnflow/cairn/internal/pgtest"
)

// cairn migrate copies a data directory into Postgres with progress on
// stderr and a summary on stdout; run again it only verifies; cairn check
// --store (or $CAIRN_STORE) then checks the copy and finds it whole.
func TestMigrateCommand(t *testing.T) {
	dir := dataDir(t)
	url, schema := pgtest.URL(t)
	r := cairnRun("migrate", "--from", dir, "--to", url, "--schema", schema)
	if r.exit != 0 || !strings.Contains(r.stdout, "verified: ") || !strings.Contains(r.stdout, "3 runs") ||
		!strings.Contains(r.stderr, "migrate: records runstate") || !strings.Contains(r.stderr, "migrate: verify events") {
		t.Fatalf("cairn migrate: exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	t.Logf("cairn migrate:\n%s%s", r.stderr, r.stdout)

	r = cairnRun("migrate", "--from", dir, "--to", url, "--schema", schema, "--json")
	var out struct {
		Copy   struct{ AlreadyVerified bool } `json:"copy"`
		Verify struct{ Runs int64 }           `json:"verify"`
	}
	if r.exit != 0 || r.stderr != "" || json.Unmarshal([]byte(r.stdout), &out) != nil || !out.Copy.AlreadyVerified || out.Verify.Runs != 3 {
		t.Fatalf("cairn migrate again --json: exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	checkJSONOut(t, "cairn migrate --json", r.stdout, false)

	r = cairnRun("check", "--store", url, "--schema", schema)
	if r.exit != 0 || !strings.Contains(r.stdout, "3 runs (2 open)") || !strings.Contains(r.stdout, "verified") {
		t.Fatalf("cairn check --store: exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	t.Setenv(envStore, url)
	r = cairnRun("check", "--schema", schema, "--json")
	if r.exit != 0 || !strings.Contains(r.stdout, `"verifiedAt"`) {
		t.Fatalf("CAIRN_STORE=… cairn check --json: exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	checkJSONOut(t, "cairn check --store --json", r.stdout, false)
}

// cairn migrate refuses, with a message saying why: a target holding
// data of its own (left as it was), a directory a server holds, a --to
// that is not a URL. cairn check finds a copy that did not finish.
func TestMigrateRefuses(t *testing.T) {
	dir := dataDir(t)
	url, schema := pgtest.URL(t)
	ctx := context.Background()
	dst, err := pgstore.Open(ctx, pgstore.Options{URL: url, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	theirs := &history.Batch{Puts: []history.Record{{Space: history.SpaceLedger, Key: []byte("theirs"), Value: []byte("v")}}}
	if err := dst.Commit(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	r := cairnRun("migrate", "--from", dir, "--to", url, "--schema", schema, "--json")
	if r.exit != 1 || !strings.Contains(r.stderr, `"invalid_argument"`) || !strings.Contains(r.stderr, "not empty") {
		t.Fatalf("migrate into a schema holding data: exit %d, stderr %s", r.exit, r.stderr)
	}
	if st, err := storecopy.ReadState(ctx, dst); st != nil || err != nil {
		t.Fatalf("the refused target holds a copy marker: %+v, %v", st, err)
	}

	held, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r = cairnRun("migrate", "--from", dir, "--to", url, "--schema", schema)
	if r.exit != 1 || !strings.Contains(r.stderr, "a server is running on") {
		t.Fatalf("migrate from a directory a server holds: exit %d, stderr %s", r.exit, r.stderr)
	}

	url2, schema2 := pgtest.URL(t)
	dst2, err := pgstore.Open(ctx, pgstore.Options{URL: url2, Schema: schema2})
	if err != nil {
		t.Fatal(err)
	}
	defer dst2.Close()
	if _, err := storecopy.Copy(ctx, held, dst2, storecopy.Options{Source: "badger:" + dir}); err != nil {
		t.Fatal(err)
	}
	r = cairnRun("check", "--store", url2, "--schema", schema2)
	if r.exit != exitCorrupt || !strings.Contains(r.stdout, "INCOMPLETE") {
		t.Fatalf("check of an unfinished copy: exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}
	_ = held.Close()
	r = cairnRun("migrate", "--from", dir, "--to", url2, "--schema", schema2)
	if r.exit != 0 || !strings.Contains(r.stdout, "resuming an interrupted copy") {
		t.Fatalf("migrate resuming the copy: exit %d\nstdout:\n%s\nstderr:\n%s", r.exit, r.stdout, r.stderr)
	}

	r = cairnRun("migrate", "--from", dir, "--to", t.TempDir())
	if r.exit != 2 || !strings.Contains(r.stderr, "PostgreSQL URL") {
		t.Fatalf("migrate --to a directory: exit %d, stderr %s", r.exit, r.stderr)
	}
}
