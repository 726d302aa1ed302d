package storetest_test

import (
	"context"
	"slices"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/storetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The places a child process reopens name the same store as their parts.
func TestPlaces(t *testing.T) {
	b := storetest.Badger("/some/dir")
	if b.Postgres() || b.Dir() != "/some/dir" || !slices.Equal(b.ServerArgs(), []string{"--data", "/some/dir"}) {
		t.Fatalf("Badger: %v %q %q", b.Postgres(), b.Dir(), b.ServerArgs())
	}
	p := storetest.Schema("postgres://db/test", "t_x")
	if !p.Postgres() || p.URL() != "postgres://db/test" || p.Schema() != "t_x" ||
		!slices.Equal(p.ServerArgs(), []string{"--store", "postgres://db/test", "--schema", "t_x"}) {
		t.Fatalf("Schema: %v %q %q %q", p.Postgres(), p.URL(), p.Schema(), p.ServerArgs())
	}
}

// Embedded is nothing on Badger; on Postgres a store whose every shard
// the returned Owner holds.
func TestEmbedded(t *testing.T) {
	st, owner := storetest.Embedded(t, "storetest")
	if !storetest.Postgres() {
		if st != nil || owner != nil {
			t.Fatalf("Embedded on Badger: %v, %v", st, owner)
		}
		return
	}
	pg, ok := st.(*pgstore.Store)
	if !ok || owner.Count() != pg.Shards() || len(owner.All()) != pg.Shards() {
		t.Fatalf("Embedded on Postgres: %T, %d shards held of %d", st, owner.Count(), pg.Shards())
	}
	leases, _, err := pg.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		fence, held := owner.Lease(l.Shard)
		if !l.Held || l.Owner != "storetest" || !held || fence.Epoch != l.Epoch {
			t.Fatalf("shard %d: %+v, the owner's fence %+v (%v)", l.Shard, l, fence, held)
		}
	}
}

// A place opened again after a close holds the same data, and OpenOwned
// by the same owner takes the shards again (a restarted engine).
func TestReopen(t *testing.T) {
	ctx := context.Background()
	d := storetest.New(t)
	key := []byte("storetest")
	for i := range 2 {
		st, owner, err := d.OpenOwned(ctx, "storetest")
		if err != nil {
			t.Fatal(err)
		}
		if (owner != nil) != d.Postgres() {
			t.Fatalf("OpenOwned: shards %v on Postgres %v", owner, d.Postgres())
		}
		if i == 0 {
			err = st.Commit(ctx, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: key, Value: []byte("kept")}}})
		} else if v, gerr := st.Get(ctx, history.SpaceMeta, key); gerr != nil || string(v) != "kept" {
			t.Fatalf("reopened: %q, %v", v, gerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
