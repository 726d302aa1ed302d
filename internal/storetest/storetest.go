// Package storetest opens the store a test runs on: Badger by default,
// PostgreSQL when CAIRN_TEST_STORE=postgres (the database named by
// CAIRN_TEST_POSTGRES, each test in a schema of its own: internal/pgtest).
// CI runs the engine, scenario and effects suites once on each.
//
//	data := storetest.New(t)      // a fresh, empty store's place: a directory or a schema
//	st, err := data.Open(ctx)     // open it (again, after a close: the same data)
//	if data.Postgres() {          // an engine on Postgres serves the shards it holds
//		owner, _ := storetest.AcquireAll(ctx, st.(*pgstore.Store), "test")
//		opts.Shards = owner       // then eng.Acquire(ctx, owner.All())
//	}
//
// Only tests import it.
package storetest

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/internal/pgtest"
)

// EnvStore selects the store of the suites: "postgres", or "badger" (the
// default).
const EnvStore = "CAIRN_TEST_STORE"

// Postgres reports whether the suites run on Postgres.
func Postgres() bool { return os.Getenv(EnvStore) == "postgres" }

// Data is the place of one test's store.
type Data struct {
	dir         string // Badger
	url, schema string // Postgres
}

// New returns a fresh, empty place for a store, removed when t ends. On
// Postgres it skips t when the database cannot be reached (and fails it
// under CI=true: internal/pgtest).
func New(t testing.TB) *Data {
	t.Helper()
	if !Postgres() {
		return &Data{dir: t.TempDir()}
	}
	url, schema := pgtest.URL(t)
	return &Data{url: url, schema: schema}
}

// Postgres reports whether the data is in Postgres.
func (d *Data) Postgres() bool { return d.url != "" }

// Dir is the Badger directory ("" on Postgres).
func (d *Data) Dir() string { return d.dir }

// ServerArgs are the flags that point `cairn server` (or `cairn check`,
// `cairn migrate --to`) at this data: --data DIR for Badger, --store URL
// --schema NAME for Postgres.
func (d *Data) ServerArgs() []string {
	if d.Postgres() {
		return []string{"--store", d.url, "--schema", d.schema}
	}
	return []string{"--data", d.dir}
}

// Open opens the store; a store opened again after Close holds the same
// data.
func (d *Data) Open(ctx context.Context) (history.Store, error) {
	if d.Postgres() {
		return pgstore.Open(ctx, pgstore.Options{URL: d.url, Schema: d.schema})
	}
	return badgerstore.Open(badgerstore.Options{Dir: d.dir})
}

// Owner holds every shard of a Postgres store for one engine: what a
// single server of a cluster holds. It satisfies engine.Shards.
type Owner struct {
	st     *pgstore.Store
	leases []pgstore.Lease
}

// AcquireAll takes every shard's lease for owner, for an hour (tests do not
// renew them).
func AcquireAll(ctx context.Context, st *pgstore.Store, owner string) (*Owner, error) {
	o := &Owner{st: st}
	for sh := range st.Shards() {
		l, err := st.AcquireShard(ctx, sh, owner, time.Hour)
		if err != nil {
			return nil, fmt.Errorf("storetest: acquire shard %d: %w", sh, err)
		}
		o.leases = append(o.leases, l)
	}
	return o, nil
}

// Count is the store's shard count.
func (o *Owner) Count() int { return len(o.leases) }

// Of is history.ShardOf.
func (o *Owner) Of(workflowID string) int { return history.ShardOf(workflowID, len(o.leases)) }

// Lease returns the fence of a shard.
func (o *Owner) Lease(shard int) (history.Fence, bool) {
	if shard < 0 || shard >= len(o.leases) {
		return history.Fence{}, false
	}
	return o.leases[shard].Fence(), true
}

// Fenced is told of a refused commit; a test holding every shard for an
// hour is never fenced unless it arranged it.
func (o *Owner) Fenced(int, int64) {}

// All lists every shard.
func (o *Owner) All() []int {
	out := make([]int, len(o.leases))
	for i := range out {
		out[i] = i
	}
	return out
}
