package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/pgstore"
)

// envStore names the store when --store is not given (`cairn check`, and
// `cairn server`).
const envStore = "CAIRN_STORE"

// storeFlags are --store (a data directory or a PostgreSQL URL) and
// --schema (the tables' schema in PostgreSQL).
type storeFlags struct {
	store, schema string
}

func (f *storeFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.store, "store", "", "the store: a data directory, or a PostgreSQL URL postgres://… (default $"+envStore+")")
	cmd.Flags().StringVar(&f.schema, "schema", pgstore.DefaultSchema, "the schema of Cairn's tables, for a PostgreSQL store")
}

// spec returns the store named by --store, else by $CAIRN_STORE.
func (f *storeFlags) spec() string {
	if f.store != "" {
		return f.store
	}
	return os.Getenv(envStore)
}

// isPostgresURL reports whether a store spec is a PostgreSQL URL rather
// than a data directory.
func isPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// redactURL is a URL without its password, for output.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(a PostgreSQL URL that does not parse)"
	}
	return u.Redacted()
}

// openPostgres opens a PostgreSQL store; a database that cannot be
// reached is api.ErrUnavailable, refused options api.ErrInvalidArgument.
func openPostgres(ctx context.Context, dbURL, schema string) (*pgstore.Store, error) {
	return openPostgresShards(ctx, dbURL, schema, 0)
}

// openPostgresShards is openPostgres with the shard count of a new
// database (0: the default; an existing one keeps its own).
func openPostgresShards(ctx context.Context, dbURL, schema string, shards int) (*pgstore.Store, error) {
	st, err := pgstore.Open(ctx, pgstore.Options{URL: dbURL, Schema: schema, Shards: shards})
	switch {
	case errors.Is(err, pgstore.ErrUnavailable):
		return nil, fmt.Errorf("%w: %w", api.ErrUnavailable, err)
	case errors.Is(err, pgstore.ErrInvalidOptions), errors.Is(err, pgstore.ErrUnsafeDurability), errors.Is(err, pgstore.ErrSchemaTooNew):
		return nil, fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	case err != nil:
		return nil, err
	}
	return st, nil
}

// openDir opens an existing data directory no server is running on. A
// directory refused as damaged returns the store's error (history.ErrCorrupt).
func openDir(dir string) (*badgerstore.Store, error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if errors.Is(err, history.ErrLocked) {
		return nil, fmt.Errorf("%w: %w: a server is running on %s: stop it first", api.ErrUnavailable, err, dir)
	}
	return st, err
}
