package pgstore

import (
	"fmt"
	"regexp"
	"time"
)

// Defaults for the zero values of Options.
const (
	// DefaultSchema is the schema holding Cairn's tables.
	DefaultSchema = "cairn"
	// DefaultShards is the number of shards a new database is created with.
	DefaultShards = 256
	// DefaultMaxConns is the size of the connection pool: the committer
	// uses one connection at a time, readers and lease calls the rest.
	DefaultMaxConns = 8
	// DefaultMaxBatchBytes is the largest batch Commit accepts (keys and
	// values, events encoded); a larger one is refused with
	// history.ErrTooLarge. Postgres bounds one bound parameter, and so one
	// statement's array of values, at 1 GB; staying far below keeps a
	// group's statements and the memory of a commit small.
	DefaultMaxBatchBytes = 64 << 20
	// DefaultMaxGroupBytes is the soft limit on the bytes one group commit
	// carries: once a group reaches it, the queued batches left over
	// start the next group.
	DefaultMaxGroupBytes = 8 << 20
	// DefaultMaxGroupBatches bounds the batches of one group commit.
	DefaultMaxGroupBatches = 1024
	// DefaultCommitLinger is how long the committer may wait for the
	// writers of the previous group to come back (see Options.CommitLinger).
	DefaultCommitLinger = 500 * time.Microsecond
	// DefaultCommitTimeout bounds one group's transaction, from BEGIN to
	// the answer to COMMIT.
	DefaultCommitTimeout = 30 * time.Second
	// IdleInTransactionTimeout is the idle_in_transaction_session_timeout
	// of the store's sessions (unless the URL sets it): the database ends
	// a session that has left a transaction open and silent this long. The
	// committer holds a transaction open only between its checks and its
	// COMMIT — microseconds of its own code —, so the session that hits it
	// is a process frozen (SIGSTOP, a paused VM) or stalled mid-commit. Its
	// transaction holds the lease rows of its shards FOR SHARE (the
	// fence): without the timeout no other server could take those shards
	// over until it woke up. It is below the default lease (10 s), so a
	// frozen owner's shards move when its lease runs out.
	IdleInTransactionTimeout = 5 * time.Second
)

// Limits checked by Validate and by Commit.
const (
	// MaxBatchBytesLimit is the largest Options.MaxBatchBytes accepted.
	MaxBatchBytesLimit = 256 << 20
	// MaxShards is the largest shard count.
	MaxShards = 1 << 16
	// MaxKeyLen bounds a record key, and MaxRunIDLen the workflow id plus
	// the run id of an append: both are primary-key columns, and a btree
	// entry of Postgres holds at most about 2.7 kB (an eighth of a page
	// on other databases is the safer bound).
	MaxKeyLen   = 2000
	MaxRunIDLen = 2000
)

// Options configure Open. URL is required; every other zero field takes the
// default named in its comment.
type Options struct {
	// URL is the database, as a libpq URL or keyword/value string
	// ("postgres://user:pass@host:5432/db?sslmode=verify-full&sslrootcert=ca.pem").
	// Every libpq parameter pgx knows applies: TLS (sslmode, sslrootcert,
	// sslcert, sslkey), connect_timeout, target_session_attrs, several
	// hosts, PGPASSFILE … Other parameters become session settings. The
	// store sets search_path to Schema and, unless the URL sets them,
	// synchronous_commit=on and idle_in_transaction_session_timeout (see
	// IdleInTransactionTimeout).
	URL string

	// Schema is the schema holding every table of the store (default
	// DefaultSchema). Open creates it. A lowercase SQL identifier.
	Schema string

	// Shards is the number of shards of a new database (default
	// DefaultShards). It is recorded when the schema is created and never
	// changes: Open of an existing database with Shards 0 uses the
	// recorded count; with another explicit count it fails with
	// ErrShardCount.
	Shards int

	// MaxConns is the size of the connection pool (default
	// DefaultMaxConns, minimum 2).
	MaxConns int32

	// MaxBatchBytes is the largest batch accepted (default
	// DefaultMaxBatchBytes, at most MaxBatchBytesLimit).
	MaxBatchBytes int64

	// MaxGroupBytes and MaxGroupBatches bound one group commit (defaults
	// DefaultMaxGroupBytes and DefaultMaxGroupBatches).
	MaxGroupBytes   int64
	MaxGroupBatches int

	// CommitLinger is how long the committer may wait, before it takes the
	// queued batches, for as many as the previous group had (default
	// DefaultCommitLinger; never longer than the previous commit took).
	// Writers answered together come back together just after the next
	// group was taken; without the wait they settle into two alternating
	// half-size groups, each paying its own commit.
	CommitLinger time.Duration

	// CommitTimeout bounds one group's transaction (default
	// DefaultCommitTimeout). A group that times out before COMMIT was
	// sent fails with ErrUnavailable; one waiting for COMMIT's answer with
	// ErrCommitUnknown.
	CommitTimeout time.Duration

	// AllowUnsafeDurability opens a database whose settings let an
	// acknowledged commit be lost (synchronous_commit=off, fsync=off),
	// which Open refuses otherwise with ErrUnsafeDurability. For tests and
	// benchmarks only: Cairn's promise (an intent is durable before its
	// effect is dispatched) does not hold then.
	AllowUnsafeDurability bool
}

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Validate reports options that cannot work, wrapping ErrInvalidOptions.
func (o Options) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
	}
	switch {
	case o.URL == "":
		return bad("URL is required")
	case o.Schema != "" && !schemaPattern.MatchString(o.Schema):
		return bad("schema %q is not a lowercase SQL identifier of at most 63 bytes", o.Schema)
	case o.Shards < 0 || o.Shards > MaxShards:
		return bad("shards %d outside 1..%d", o.Shards, MaxShards)
	case o.MaxConns != 0 && o.MaxConns < 2:
		return bad("max conns %d: the committer and the readers need at least 2", o.MaxConns)
	case o.MaxBatchBytes < 0 || o.MaxBatchBytes > MaxBatchBytesLimit:
		return bad("max batch bytes %d outside 1..%d", o.MaxBatchBytes, MaxBatchBytesLimit)
	case o.MaxGroupBytes < 0, o.MaxGroupBatches < 0, o.CommitLinger < 0, o.CommitTimeout < 0:
		return bad("negative group limit, linger or timeout")
	}
	return nil
}

// withDefaults fills in the zero fields.
func (o Options) withDefaults() Options {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Schema == "" {
		o.Schema = DefaultSchema
	}
	if o.MaxConns == 0 {
		o.MaxConns = DefaultMaxConns
	}
	def(&o.MaxBatchBytes, DefaultMaxBatchBytes)
	def(&o.MaxGroupBytes, DefaultMaxGroupBytes)
	if o.MaxGroupBatches == 0 {
		o.MaxGroupBatches = DefaultMaxGroupBatches
	}
	if o.CommitLinger == 0 {
		o.CommitLinger = DefaultCommitLinger
	}
	if o.CommitTimeout == 0 {
		o.CommitTimeout = DefaultCommitTimeout
	}
	return o
}
