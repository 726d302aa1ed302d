package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// helperEnv makes TestHelperAsksForPostgres do its work (in a child
// process started by the tests below).
const helperEnv = "CAIRN_PGTEST_HELPER"

// TestHelperAsksForPostgres asks for a schema; it does nothing unless run
// as the child of TestUnreachable.
func TestHelperAsksForPostgres(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	URL(t)
	t.Log("got a schema")
}

// TestURLIsolated: each call makes its own empty schema, which exists
// during the test and is gone after it.
func TestURLIsolated(t *testing.T) {
	var a, b string
	t.Run("inner", func(t *testing.T) {
		url1, s1 := URL(t)
		url2, s2 := URL(t)
		if url1 != DatabaseURL() || url2 != url1 {
			t.Fatalf("URL returned %q and %q, want %q", url1, url2, DatabaseURL())
		}
		if s1 == s2 {
			t.Fatalf("two calls returned one schema %q", s1)
		}
		if !SchemaExists(t, s1) || !SchemaExists(t, s2) {
			t.Fatal("the schemas were not created")
		}
		pool := need(t)
		if _, err := pool.Exec(context.Background(), "CREATE TABLE "+s1+".x (a int)"); err != nil {
			t.Fatal(err)
		}
		a, b = s1, s2
	})
	if SchemaExists(t, a) || SchemaExists(t, b) {
		t.Fatalf("schemas %s and %s outlived their test", a, b)
	}
}

// TestSchemaName: a valid identifier of at most 63 bytes, whatever the
// test is called.
func TestSchemaName(t *testing.T) {
	for _, name := range []string{"T", "TestX/sub_test#01", strings.Repeat("Ünïcode/", 40)} {
		s := schemaName(name)
		if len(s) > 63 || !strings.HasPrefix(s, "t_") {
			t.Fatalf("schemaName(%q) = %q", name, s)
		}
		for _, r := range s {
			if !(r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
				t.Fatalf("schemaName(%q) = %q holds %q", name, s, r)
			}
		}
	}
}

// child runs TestHelperAsksForPostgres in a new process of this test
// binary, against a database that cannot be reached.
func child(t *testing.T, ci string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAsksForPostgres$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"=1", EnvURL+"=postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5",
		"CI="+ci, noteEnv+"=stdout")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// TestUnreachable: without CI the test is skipped and the run says so
// once (the second child of the same parent stays quiet); with CI=true it
// fails loudly.
func TestUnreachable(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		return
	}
	marker := markerPath(os.Getpid()) // the children's parent is this process
	_ = os.Remove(marker)
	t.Cleanup(func() { _ = os.Remove(marker) })

	out, err := child(t, "")
	if err != nil || !strings.Contains(out, "--- SKIP: TestHelperAsksForPostgres") {
		t.Fatalf("without CI: %v\n%s", err, out)
	}
	const line = "cairn: Postgres not reachable at postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5 — skipped the Postgres suites (set CAIRN_TEST_POSTGRES)"
	if strings.Count(out, line) != 1 {
		t.Fatalf("without CI: the note is not printed once:\n%s", out)
	}
	out, err = child(t, "")
	if err != nil || strings.Contains(out, "not reachable at postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=5 —") {
		t.Fatalf("second run of the same go test: %v, note printed again:\n%s", err, out)
	}

	out, err = child(t, "true")
	if err == nil || !strings.Contains(out, "--- FAIL: TestHelperAsksForPostgres") || !strings.Contains(out, "CI=true, so the Postgres suites must run") {
		t.Fatalf("with CI=true the test must fail: %v\n%s", err, out)
	}
}

// TestSweepMarkers: the marker of a run that has ended is removed; that of
// a live one stays.
func TestSweepMarkers(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		return
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to wait for: %v", err)
	}
	dead := markerPath(cmd.Process.Pid)
	live := markerPath(os.Getpid())
	for _, p := range []string{dead, live} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.Remove(live); _ = os.Remove(dead) })
	sweepMarkers()
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Fatalf("marker of an ended process survived: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("marker of a live process removed: %v", err)
	}
}

// TestSweepSchemas: a schema left by a test process that died is dropped
// at the next sweep; one of a live process, or of another host, is not.
func TestSweepSchemas(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		return
	}
	pool := need(t)
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to wait for: %v", err)
	}
	ctx := context.Background()
	mk := func(comment string) string {
		t.Helper()
		name := schemaName(t.Name())
		q := pgx.Identifier{name}.Sanitize()
		if _, err := pool.Exec(ctx, "CREATE SCHEMA "+q+"; COMMENT ON SCHEMA "+q+" IS '"+comment+"'"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { drop(t, pool, name) })
		return name
	}
	dead := mk(fmt.Sprintf("%s host=%s pid=%d", ownerPrefix, hostname(), cmd.Process.Pid))
	live := mk(owner())
	elsewhere := mk(fmt.Sprintf("%s host=%s pid=%d", ownerPrefix, "another-host", cmd.Process.Pid))
	sweepSchemas(ctx, pool)
	if SchemaExists(t, dead) || !SchemaExists(t, live) || !SchemaExists(t, elsewhere) {
		t.Fatalf("after the sweep: dead %v, live %v, other host's %v", SchemaExists(t, dead), SchemaExists(t, live), SchemaExists(t, elsewhere))
	}
	if _, _, ok := parseOwner("not ours"); ok {
		t.Fatal("parsed a foreign comment")
	}
}
