package pgstore

import (
	"errors"
	"io/fs"
	"sync"
	"testing"
	"testing/fstest"
)

// withMigration is the store's migrations plus extra files.
func withMigration(t *testing.T, extra map[string]string) fs.FS {
	t.Helper()
	m := fstest.MapFS{}
	ms, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range ms {
		b, err := fs.ReadFile(migrationFiles, p)
		if err != nil {
			t.Fatal(err)
		}
		m[p] = &fstest.MapFile{Data: b}
	}
	for name, sql := range extra {
		m["migrations/"+name] = &fstest.MapFile{Data: []byte(sql)}
	}
	return m
}

// openFiles opens a store with the migrations in files.
func openFiles(t *testing.T, opts Options, files fs.FS) (*Store, error) {
	t.Helper()
	s, err := open(bg, opts, testHooks{}, files)
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// versions returns the applied migrations.
func versions(t *testing.T, s *Store) []int {
	t.Helper()
	rows, err := s.pool.Query(bg, "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	var v int
	for rows.Next() {
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func tableExists(t *testing.T, s *Store, table string) bool {
	t.Helper()
	var n int
	err := s.pool.QueryRow(bg, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = $2",
		s.opts.Schema, table).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestConcurrentOpen: servers opening a new database at once create the
// schema once: every Open succeeds, each migration is recorded once, the
// shards exist once.
func TestConcurrentOpen(t *testing.T) {
	opts := testOptions(t)
	const servers = 6
	var wg sync.WaitGroup
	stores := make([]*Store, servers)
	errs := make([]error, servers)
	start := make(chan struct{})
	for i := range servers {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(bg, opts)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	s := stores[0]
	if v := versions(t, s); len(v) != 1 || v[0] != 1 {
		t.Fatalf("schema_migrations holds %v", v)
	}
	var shards int
	if err := s.pool.QueryRow(bg, "SELECT count(*) FROM shards").Scan(&shards); err != nil || shards != opts.Shards {
		t.Fatalf("%d shard rows, %v; want %d", shards, err, opts.Shards)
	}
	for _, st := range stores {
		if st.Shards() != opts.Shards {
			t.Fatalf("a store sees %d shards", st.Shards())
		}
	}
}

// TestMigrations: a new migration is applied once, in order, at Open; an
// older build refuses the newer schema; a failing migration leaves the
// schema as it was.
func TestMigrations(t *testing.T) {
	opts := testOptions(t)
	s := mustOpen(t, opts)
	_ = s.Close()
	two := withMigration(t, map[string]string{"0002_extra.sql": "CREATE TABLE extra (x int); INSERT INTO extra VALUES (1);"})
	s, err := openFiles(t, opts, two)
	if err != nil {
		t.Fatal(err)
	}
	if v := versions(t, s); len(v) != 2 || v[1] != 2 || !tableExists(t, s, "extra") {
		t.Fatalf("after migration 2: versions %v", v)
	}
	_ = s.Close()
	if s, err = openFiles(t, opts, two); err != nil { // applied already: nothing to do
		t.Fatalf("reopen at version 2: %v", err)
	}
	var n int
	if err := s.pool.QueryRow(bg, "SELECT count(*) FROM extra").Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 2 ran %d times, %v", n, err)
	}
	_ = s.Close()
	if _, err := Open(bg, opts); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("an older build on a newer schema: %v, want ErrSchemaTooNew", err)
	}

	three := withMigration(t, map[string]string{"0002_extra.sql": "CREATE TABLE extra (x int);",
		"0003_bad.sql": "CREATE TABLE half (x int); SELECT 1/0;"})
	if _, err := openFiles(t, opts, three); err == nil {
		t.Fatal("a failing migration opened")
	}
	s, err = openFiles(t, opts, two)
	if err != nil {
		t.Fatal(err)
	}
	if v := versions(t, s); len(v) != 2 || tableExists(t, s, "half") {
		t.Fatalf("after a failed migration 3: versions %v, half-made table %v", v, tableExists(t, s, "half"))
	}
}

// TestLoadMigrations: names must be NNNN_name.sql and numbered without
// gaps.
func TestLoadMigrations(t *testing.T) {
	for name, files := range map[string]fstest.MapFS{
		"gap":      {"migrations/0001_a.sql": {}, "migrations/0003_c.sql": {}},
		"bad name": {"migrations/1_a.sql": {}},
		"zero":     {"migrations/0000_a.sql": {}},
	} {
		if _, err := loadMigrations(files); err == nil {
			t.Fatalf("%s: loaded", name)
		}
	}
	ms, err := loadMigrations(migrationFiles)
	if err != nil || len(ms) == 0 || ms[0].version != 1 {
		t.Fatalf("the store's migrations: %v, %v", ms, err)
	}
}

// TestShardCount: the count is fixed when the database is created; Open
// with 0 uses it, with another count fails.
func TestShardCount(t *testing.T) {
	opts := testOptions(t)
	opts.Shards = 0
	s := mustOpen(t, opts)
	if s.Shards() != DefaultShards {
		t.Fatalf("a new database has %d shards, want %d", s.Shards(), DefaultShards)
	}
	_ = s.Close()
	opts.Shards = DefaultShards
	_ = mustOpen(t, opts).Close()
	opts.Shards = 16
	if _, err := Open(bg, opts); !errors.Is(err, ErrShardCount) {
		t.Fatalf("Open asking for another shard count: %v, want ErrShardCount", err)
	}
}
