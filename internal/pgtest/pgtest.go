// Package pgtest gives tests a namespace of their own in a real PostgreSQL
// database. It is imported only by tests.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		url, schema := pgtest.URL(t) // a fresh schema, dropped when the test ends
//		s, err := pgstore.Open(ctx, pgstore.Options{URL: url, Schema: schema})
//		…
//	}
//
// The database is the one named by CAIRN_TEST_POSTGRES (default
// postgres://root@127.0.0.1:5432/test?sslmode=disable). When it cannot be
// reached, a test that asks for it is skipped — unless CI=true, where it
// fails: CI must never skip the Postgres suites silently. Main then says
// once, on the terminal, that the Postgres suites were skipped.
//
// A test's schema is dropped by its cleanup; the schemas of test
// processes that were killed before theirs ran are dropped by the next
// test binary that asks for one (see sweep.go).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// EnvURL names the environment variable holding the test database's URL.
const EnvURL = "CAIRN_TEST_POSTGRES"

// DefaultURL is the test database when EnvURL is not set.
const DefaultURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// probeTimeout bounds the first connection to the test database.
const probeTimeout = 5 * time.Second

// DatabaseURL returns the URL of the test database: EnvURL, or DefaultURL.
func DatabaseURL() string {
	if u := os.Getenv(EnvURL); u != "" {
		return u
	}
	return DefaultURL
}

var (
	probeOnce sync.Once
	admin     *pgxpool.Pool // creates and drops the schemas; nil when unreachable
	probeErr  error
	skipped   atomic.Bool // a test was skipped because the database is unreachable
)

// probe connects to the test database once per test binary.
func probe() (*pgxpool.Pool, error) {
	probeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		cfg, err := pgxpool.ParseConfig(DatabaseURL())
		if err != nil {
			probeErr = err
			return
		}
		cfg.MaxConns = 2
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		if err == nil {
			err = pool.Ping(ctx)
		}
		if err != nil {
			if pool != nil {
				pool.Close()
			}
			probeErr = err
			return
		}
		admin = pool
		sweepSchemas(ctx, pool)
	})
	return admin, probeErr
}

// Reachable reports whether the test database can be reached (and why
// not).
func Reachable() error {
	_, err := probe()
	return err
}

// inCI reports whether the tests run in CI, where an unreachable database
// is a failure.
func inCI() bool { return os.Getenv("CI") == "true" }

// need returns the admin pool, or skips t (fails it in CI) when the test
// database cannot be reached.
func need(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := probe()
	if err == nil {
		return pool
	}
	if inCI() {
		t.Fatalf("cairn: Postgres not reachable at %s: %v — CI=true, so the Postgres suites must run (set %s)", redacted(), err, EnvURL)
	}
	skipped.Store(true)
	t.Skipf("Postgres not reachable at %s (%v); set %s", redacted(), err, EnvURL)
	return nil
}

// URL returns the test database's URL and the name of a schema created
// for t alone, empty, dropped with everything in it when t ends (after the
// test's own cleanups, which were registered later). Pass both to the
// store (pgstore.Options{URL: url, Schema: schema}): tests running at once
// never see each other's tables.
func URL(t testing.TB) (dbURL, schema string) {
	t.Helper()
	pool := need(t)
	schema = schemaName(t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	q := pgx.Identifier{schema}.Sanitize()
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+q+"; COMMENT ON SCHEMA "+q+" IS '"+owner()+"'"); err != nil {
		t.Fatalf("pgtest: create schema %s: %v", schema, err)
	}
	t.Cleanup(func() { drop(t, pool, schema) })
	return DatabaseURL(), schema
}

// drop removes a test's schema.
func drop(t testing.TB, pool *pgxpool.Pool, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		t.Errorf("pgtest: drop schema %s: %v", schema, err)
	}
}

// SchemaExists reports whether a schema exists in the test database (for
// tests of cleanup).
func SchemaExists(t testing.TB, schema string) bool {
	t.Helper()
	pool := need(t)
	var n int
	err := pool.QueryRow(context.Background(), "SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema).Scan(&n)
	if err != nil {
		t.Fatalf("pgtest: look up schema %s: %v", schema, err)
	}
	return n > 0
}

// schemaName makes a lowercase identifier from a test name plus 8 random
// hex digits, within Postgres's 63 bytes.
func schemaName(test string) string {
	var b strings.Builder
	b.WriteString("t_")
	for _, r := range strings.ToLower(test) {
		if b.Len() >= 40 {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	return b.String() + "_" + hex.EncodeToString(rnd[:])
}

// redacted is the database URL without its password.
func redacted() string {
	u, err := url.Parse(DatabaseURL())
	if err != nil {
		return "(unparsable " + EnvURL + ")"
	}
	return u.Redacted()
}

// Main runs the tests of a package (call it from TestMain) and exits. If
// any test was skipped because the database could not be reached, it says
// so in one line — on the terminal (go test ./... hides what passing
// packages print), once per go test run however many packages skip.
func Main(m *testing.M) {
	code := m.Run()
	Done()
	os.Exit(code)
}

// Done is what Main does once the tests ran, for a TestMain that hands
// its tests to another kit's Main (testkit.Main(m, pgtest.Done)): the
// line saying the Postgres suites were skipped, if they were, and the
// connection closed.
func Done() {
	if skipped.Load() {
		note(fmt.Sprintf("cairn: Postgres not reachable at %s — skipped the Postgres suites (set %s)\n", redacted(), EnvURL))
	}
	if admin != nil {
		admin.Close()
	}
}

// errNoted: the line was printed already in this go test run.
var errNoted = errors.New("already noted")
