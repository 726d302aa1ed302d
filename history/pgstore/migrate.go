package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationFiles are the schema's migrations: migrations/NNNN_name.sql,
// numbered from 0001 without gaps, each applied once, in order, inside
// one transaction with its row in schema_migrations. Never edit a
// migration that has shipped; add the next one.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads and orders the migrations in fsys (a directory
// "migrations" of NNNN_name.sql files).
func loadMigrations(fsys fs.FS) ([]migration, error) {
	paths, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, p := range paths {
		name := path.Base(p)
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || len(num) != 4 || v < 1 {
			return nil, fmt.Errorf("pgstore: migration %s is not named NNNN_name.sql", name)
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		out = append(out, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("pgstore: migrations are not numbered 1, 2, 3 … (found %s at position %d)", m.name, i+1)
		}
	}
	return out, nil
}

// bootstrap creates the schema, the migration lock row and the table of
// applied migrations, each if missing. Two servers opening a new database
// at once may both try; the loser of a race to create an object retries
// and finds it.
func bootstrap(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	q := pgx.Identifier{schema}.Sanitize()
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + q,
		"CREATE TABLE IF NOT EXISTS " + q + ".schema_lock (id int PRIMARY KEY CHECK (id = 1))",
		"INSERT INTO " + q + ".schema_lock (id) VALUES (1) ON CONFLICT (id) DO NOTHING",
		"CREATE TABLE IF NOT EXISTS " + q + ".schema_migrations (version int PRIMARY KEY, name text NOT NULL, " +
			"applied_at timestamptz NOT NULL DEFAULT now())",
	}
	for _, stmt := range stmts {
		var err error
		for try := 0; try < 5; try++ {
			if _, err = pool.Exec(ctx, stmt); !createRace(err) {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("pgstore: create the schema %s: %w", schema, err)
		}
	}
	return nil
}

// createRace reports an error of a CREATE … IF NOT EXISTS that lost a
// race with the same statement in another session.
func createRace(err error) bool {
	switch pgCode(err) {
	case codeUniqueViolation, codeDuplicateSchema, codeDuplicateTable, codeDuplicateObject:
		return true
	}
	return false
}

// migrate brings the schema to the newest version in ms and returns the
// shard count, creating the shards (want, or DefaultShards when want is
// 0) if the database is new. It holds the lock row of schema_lock for the
// whole transaction, so that servers opening the database at once apply
// each migration once, one after the other; a database at a newer version
// than ms knows is refused with ErrSchemaTooNew.
func migrate(ctx context.Context, pool *pgxpool.Pool, ms []migration, want int) (shards int, err error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	if _, err := tx.Exec(ctx, "SELECT id FROM schema_lock WHERE id = 1 FOR UPDATE"); err != nil {
		return 0, fmt.Errorf("pgstore: migrate: lock: %w", err)
	}
	var current int
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&current); err != nil {
		return 0, fmt.Errorf("pgstore: migrate: read the version: %w", err)
	}
	if current > len(ms) {
		return 0, fmt.Errorf("%w: the database is at version %d, this build knows up to %d", ErrSchemaTooNew, current, len(ms))
	}
	for _, m := range ms[current:] {
		if _, err := tx.Exec(ctx, m.sql); err != nil {
			return 0, fmt.Errorf("pgstore: migration %s: %w", m.name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version, m.name); err != nil {
			return 0, fmt.Errorf("pgstore: migration %s: record it: %w", m.name, err)
		}
	}
	if shards, err = initCluster(ctx, tx, want); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("pgstore: migrate: commit: %w", err)
	}
	return shards, nil
}

// initCluster writes the cluster row and the shards of a new database, or
// reads the shard count of an existing one.
func initCluster(ctx context.Context, tx pgx.Tx, want int) (int, error) {
	var shards int
	err := tx.QueryRow(ctx, "SELECT shards FROM cluster WHERE id = 1").Scan(&shards)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		shards = want
		if shards == 0 {
			shards = DefaultShards
		}
		if _, err := tx.Exec(ctx, "INSERT INTO cluster (id, shards) VALUES (1, $1)", shards); err != nil {
			return 0, fmt.Errorf("pgstore: create the cluster row: %w", err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO shards (shard_id) SELECT generate_series(0, $1::int - 1)", shards); err != nil {
			return 0, fmt.Errorf("pgstore: create %d shards: %w", shards, err)
		}
		return shards, nil
	case err != nil:
		return 0, fmt.Errorf("pgstore: read the cluster row: %w", err)
	case want != 0 && want != shards:
		return 0, fmt.Errorf("%w: the database has %d shards, the options ask for %d (the count is fixed at creation)",
			ErrShardCount, shards, want)
	}
	return shards, nil
}
