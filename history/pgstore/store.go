package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cairnflow/cairn/history"
)

// Store is a history.Store on PostgreSQL (and databases speaking its
// protocol; see the package doc). It is safe for concurrent use. Create it
// with Open and release it with Close.
type Store struct {
	pool       *pgxpool.Pool
	opts       Options // defaults applied
	shards     int
	durability Durability
	gate       gate
	queue      queue
	loopDone   chan struct{} // closed when commitLoop returns
	closeOnce  sync.Once
	stats      counters
	hooks      testHooks
}

var _ history.Store = (*Store)(nil)

// testHooks let tests of this package observe and steer the committer.
// Every hook is optional and set before the committer starts.
type testHooks struct {
	beforeRound  func() // before a round's statements are sent
	beforeCommit func() // after a round's checks passed, before COMMIT is sent
}

// Durability is what the database promises about an acknowledged commit,
// as read by Open from the store's own session.
type Durability struct {
	// SynchronousCommit is the session's synchronous_commit: "on" (the
	// store's default), "remote_apply" or "remote_write" wait for the
	// synchronous standbys too; "local" does not wait for them; "off" is
	// refused (unless Options.AllowUnsafeDurability).
	SynchronousCommit string
	// Fsync is the server's fsync ("off" is refused, unless
	// Options.AllowUnsafeDurability); empty when the database has no such
	// setting (CockroachDB, which always syncs its log).
	Fsync string
	// SynchronousStandbyNames is the server's synchronous_standby_names.
	// Empty means no synchronous standby: a failover to an asynchronous
	// replica can lose acknowledged commits. Cairn does not refuse it (a
	// single server is a valid setup) but an operator of an HA cluster
	// should see it.
	SynchronousStandbyNames string
}

// Open connects to the database described by opts, checks that its
// settings make commits durable (ErrUnsafeDurability), creates or
// migrates the schema (ErrSchemaTooNew for a database newer than this
// build; ErrShardCount) and starts the committer. ctx bounds Open only.
func Open(ctx context.Context, opts Options) (*Store, error) {
	return open(ctx, opts, testHooks{}, migrationFiles)
}

func open(ctx context.Context, opts Options, hooks testHooks, files fs.FS) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	ms, err := loadMigrations(files)
	if err != nil {
		return nil, err
	}
	cfg, err := poolConfig(opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: connect: %w", ErrUnavailable, err)
	}
	s := &Store{pool: pool, opts: opts, hooks: hooks, loopDone: make(chan struct{})}
	if err := s.prepareDatabase(ctx, ms); err != nil {
		pool.Close()
		return nil, err
	}
	s.gate.init()
	s.queue.init()
	go s.commitLoop()
	return s, nil
}

// prepareDatabase checks the durability settings, then creates or
// migrates the schema.
func (s *Store) prepareDatabase(ctx context.Context, ms []migration) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("%w: connect: %w", ErrUnavailable, err)
	}
	d, err := readDurability(ctx, s.pool)
	if err != nil {
		return err
	}
	if err := d.check(); err != nil && !s.opts.AllowUnsafeDurability {
		return err
	}
	s.durability = d
	if err := bootstrap(ctx, s.pool, s.opts.Schema); err != nil {
		return err
	}
	s.shards, err = migrate(ctx, s.pool, ms, s.opts.Shards)
	return err
}

// poolConfig parses the URL and sets what every session of the store
// needs: the schema as search_path, synchronous_commit=on unless the URL
// sets it, an application name.
func poolConfig(opts Options) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("%w: URL: %w", ErrInvalidOptions, err)
	}
	cfg.MaxConns = opts.MaxConns
	params := cfg.ConnConfig.RuntimeParams
	params["search_path"] = pgx.Identifier{opts.Schema}.Sanitize()
	if _, set := params["synchronous_commit"]; !set && !strings.Contains(params["options"], "synchronous_commit") {
		params["synchronous_commit"] = "on"
	}
	if _, set := params["idle_in_transaction_session_timeout"]; !set && !strings.Contains(params["options"], "idle_in_transaction_session_timeout") {
		params["idle_in_transaction_session_timeout"] = fmt.Sprint(IdleInTransactionTimeout.Milliseconds())
	}
	if params["application_name"] == "" {
		params["application_name"] = "cairn"
	}
	return cfg, nil
}

// readDurability reads the settings that decide whether a commit survives.
func readDurability(ctx context.Context, pool *pgxpool.Pool) (Durability, error) {
	var d Durability
	for _, s := range []struct {
		name string
		to   *string
	}{{"synchronous_commit", &d.SynchronousCommit}, {"fsync", &d.Fsync}, {"synchronous_standby_names", &d.SynchronousStandbyNames}} {
		err := pool.QueryRow(ctx, "SHOW "+s.name).Scan(s.to)
		if err != nil && pgCode(err) != codeUndefinedObject {
			return d, fmt.Errorf("%w: read %s: %w", ErrUnavailable, s.name, err)
		}
	}
	return d, nil
}

// check refuses settings under which an acknowledged commit can be lost
// in a crash of the database server.
func (d Durability) check() error {
	if strings.EqualFold(d.SynchronousCommit, "off") {
		return fmt.Errorf("%w: synchronous_commit is off: a crash of the database loses commits it acknowledged", ErrUnsafeDurability)
	}
	if strings.EqualFold(d.Fsync, "off") {
		return fmt.Errorf("%w: fsync is off: a crash of the machine loses or corrupts commits the database acknowledged", ErrUnsafeDurability)
	}
	return nil
}

// Durability returns the durability settings Open found.
func (s *Store) Durability() Durability { return s.durability }

// Shards returns the database's shard count, fixed when it was created.
func (s *Store) Shards() int { return s.shards }

// Close waits for running calls (queued commits are committed, running
// reads end, iterations stop at their next event with history.ErrClosed),
// then closes the connections. It is idempotent; every other method
// returns history.ErrClosed afterwards. Do not call Close from inside a
// loop over Events: it would wait for that loop.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.queue.close()
		s.gate.close()
		s.queue.stop()
		<-s.loopDone
		s.pool.Close()
	})
	return nil
}

// Stats are counters of the committer since Open.
type Stats struct {
	// Commits is the number of Postgres transactions the committer
	// committed; Batches the number of batches they carried (Commit calls
	// answered nil, fence- and condition-only ones included).
	Commits, Batches int64
	// Rounds is the number of transactions the committer began: a group
	// whose checks failed for some batch, or that the database asked to
	// retry, takes more than one.
	Rounds int64
	// Statements is the number of SQL statements the committer sent,
	// BEGIN, ROLLBACK and COMMIT included.
	Statements int64
	// Conflicts and Fenced count the batches answered with
	// history.ErrConflict and history.ErrFenced; Retries the rounds run
	// again after a serialization failure or deadlock.
	Conflicts, Fenced, Retries int64
}

// counters are the live Stats.
type counters struct {
	commits, batches, rounds, statements, conflicts, fenced, retries atomic.Int64
}

// Stats returns the committer's counters.
func (s *Store) Stats() Stats {
	c := &s.stats
	return Stats{Commits: c.commits.Load(), Batches: c.batches.Load(), Rounds: c.rounds.Load(),
		Statements: c.statements.Load(), Conflicts: c.conflicts.Load(), Fenced: c.fenced.Load(), Retries: c.retries.Load()}
}

// count adds an outcome to the counters.
func (c *counters) count(err error) {
	switch {
	case err == nil:
		c.batches.Add(1)
	case errors.Is(err, history.ErrFenced):
		c.fenced.Add(1)
	case errors.Is(err, history.ErrConflict):
		c.conflicts.Add(1)
	}
}
