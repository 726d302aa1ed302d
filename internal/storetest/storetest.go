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
// Embedded does all of that for a test's embedded engine (sdk/testenv's,
// one served over HTTP), and leaves a Badger run on the caller's own store:
//
//	if st, owner := storetest.Embedded(t, "scenario"); st != nil {
//		opts.Engine.Store, opts.Engine.Shards = st, owner // testenv acquires every shard
//	}
//
// A child process of a test opens its parent's data by the place's
// parts (Dir, or URL and Schema): Badger(dir), Schema(url, schema). Only
// tests import it.
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

// Badger returns the place of a Badger store in dir, whatever
// CAIRN_TEST_STORE says: for a test that needs Badger's files (damage,
// backup), or a child process opening its parent's directory.
func Badger(dir string) *Data { return &Data{dir: dir} }

// Schema returns the place of a Postgres store: the tables in schema of
// the database at url. A child process of a test opens its parent's data
// so (the parent made the schema: New; it drops it).
func Schema(url, schema string) *Data { return &Data{url: url, schema: schema} }

// Postgres reports whether the data is in Postgres.
func (d *Data) Postgres() bool { return d.url != "" }

// Dir is the Badger directory ("" on Postgres).
func (d *Data) Dir() string { return d.dir }

// URL is the Postgres database's URL ("" on Badger).
func (d *Data) URL() string { return d.url }

// Schema is the Postgres schema of the store's tables ("" on Badger).
func (d *Data) Schema() string { return d.schema }

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

// OpenOwned opens the store and, on Postgres, takes every shard's lease
// for owner (AcquireAll): an engine over it then serves them all, with
// engine.Options.Shards set to the returned Owner and, once the engine is
// open, Acquire(ctx, shards.All()). shards is nil on Badger (leave
// Options.Shards unset: a nil *Owner in the interface is not a nil
// interface). The caller closes the store.
func (d *Data) OpenOwned(ctx context.Context, owner string) (st history.Store, shards *Owner, err error) {
	st, err = d.Open(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("storetest: open: %w", err)
	}
	pg, ok := st.(*pgstore.Store)
	if !ok {
		return st, nil, nil
	}
	if shards, err = AcquireAll(ctx, pg, owner); err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return st, shards, nil
}

// Embedded returns the store of a test's embedded engine under
// CAIRN_TEST_STORE=postgres: a fresh schema's store (New, OpenOwned),
// closed when t ends, with every shard held by owner — the engine's
// Options.Store and Options.Shards. On Badger it returns nil, nil: the
// caller keeps its own store (an in-memory one, typically). It fails t
// when the store cannot be opened.
func Embedded(t testing.TB, owner string) (history.Store, *Owner) {
	t.Helper()
	if !Postgres() {
		return nil, nil
	}
	d := New(t)
	st, shards, err := d.OpenOwned(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() }) // after the engine's (registered later)
	return st, shards
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
