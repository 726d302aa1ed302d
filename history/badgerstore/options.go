package badgerstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/third_party/badger"
	"github.com/cairnflow/cairn/third_party/badger/options"
	"github.com/rs/zerolog"
)

// ErrInvalidOptions is returned (wrapped) by Options.Validate and Open when
// the options cannot work.
var ErrInvalidOptions = errors.New("badgerstore: invalid options")

// Defaults for the zero values of Options. They are deliberately small: one
// process (and one test binary) may run many stores, and the engine's records
// are small. Raise them for a server with a large working set.
const (
	// DefaultMemTableSize is the size of one in-memory write buffer
	// (memtable). A group commit can hold at most 15% of it (Badger's limit
	// on one transaction), about 2.4 MB of keys and values under 1 MiB.
	// Smaller memtables make Badger's skiplist inserts and log syncs
	// cheaper: 16 MiB sustained more commits per second than 32 or 64 MiB
	// in BenchmarkAppendConcurrent64.
	DefaultMemTableSize = 16 << 20
	// DefaultNumMemTables is how many memtables may exist at once: one being
	// written and the rest waiting to be flushed to disk.
	DefaultNumMemTables = 3
	// DefaultBlockCacheSize is the cache of decompressed table blocks.
	DefaultBlockCacheSize = 16 << 20
	// DefaultIndexCacheSize is the cache of table indexes and bloom filters.
	DefaultIndexCacheSize = 8 << 20
	// DefaultValueLogFileSize is the size of one value-log file. Only values
	// of 1 MiB or more go to the value log; everything else lives in the
	// LSM tree.
	DefaultValueLogFileSize = 64 << 20
	// DefaultCommitLinger is how long the committer may wait for more
	// batches; see Options.CommitLinger.
	DefaultCommitLinger = 200 * time.Microsecond
	// DefaultMaxBatchBytes is the soft limit on the bytes written by one
	// group commit: once a group reaches it, the group is committed and the
	// remaining queued batches start the next one.
	DefaultMaxBatchBytes = 1 << 20
	// DefaultSpaceCheckInterval: the free space is measured at most once a
	// millisecond (one statfs, about 3 µs here), not for every commit.
	DefaultSpaceCheckInterval = time.Millisecond
)

// Minimums accepted by Validate.
const (
	minMemTableSize  = 8 << 20 // 15% of it must hold a 1 MiB value
	minValueLogFile  = 1 << 20 // Badger's minimum
	maxValueLogFile  = 2<<30 - 1
	valueThreshold   = 1 << 20 // values this size and larger go to the value log
	minMaxBatchBytes = 1
)

// Options configure Open. The zero value is not usable (Dir is required
// unless InMemory); every other zero field takes the default named in its
// comment.
type Options struct {
	// Dir is the directory holding the database. It is created if missing.
	// Required unless InMemory. Only one process may open a directory at a
	// time; a second gets an error wrapping history.ErrLocked.
	Dir string

	// InMemory keeps everything in memory and writes nothing to disk (tests).
	// Dir must be empty. Values must be smaller than 1 MiB.
	InMemory bool

	// NoSync turns off the fsync of each commit. A crash may then lose
	// acknowledged commits (never tear one). Default false: durable. Only
	// for tests and benchmarks.
	NoSync bool

	// MemTableSize is the size of one memtable in bytes (default
	// DefaultMemTableSize, minimum 8 MiB).
	MemTableSize int64

	// NumMemTables is the number of memtables (default DefaultNumMemTables,
	// minimum 2).
	NumMemTables int

	// BlockCacheSize is the block cache in bytes (default
	// DefaultBlockCacheSize).
	BlockCacheSize int64

	// IndexCacheSize is the index and bloom-filter cache in bytes (default
	// DefaultIndexCacheSize).
	IndexCacheSize int64

	// ValueLogFileSize is the size of one value-log file in bytes (default
	// DefaultValueLogFileSize, between 1 MiB and 2 GiB).
	ValueLogFileSize int64

	// MaxBatchBytes is the soft limit on the bytes of one group commit
	// (default DefaultMaxBatchBytes). A single batch larger than it is still
	// committed, alone, if Badger can take it in one transaction.
	MaxBatchBytes int64

	// CommitLinger is how long the committer may wait for more batches
	// before it commits a group, when fewer are queued than the previous
	// group held, and never longer than the previous group took to commit
	// (so a lone writer never waits, and fast disks barely do). Writers
	// answered by one group then share the next fsync instead of
	// alternating between two half-size groups. Default
	// DefaultCommitLinger; negative: never wait.
	CommitLinger time.Duration

	// MinFreeBytes is the free space below which commits are refused with
	// history.ErrNoSpace before Badger writes anything, so that Badger
	// always has room to flush its memtables and finish its compactions
	// (default 3 × MemTableSize; negative: no check). Reads keep working;
	// commits succeed again by themselves once space returns.
	MinFreeBytes int64

	// SpaceCheckInterval is how long the free space measured for
	// MinFreeBytes is trusted (default DefaultSpaceCheckInterval; negative:
	// measure for every group commit).
	SpaceCheckInterval time.Duration

	// AcceptDataLoss opens a store that Open would refuse because
	// acknowledged data was lost or damaged (history.ErrCorrupt from the
	// integrity checks): the damage is treated as the end of the log, as
	// upstream Badger does, and a LossRecord saying what was refused and
	// which commits are gone is written durably (Store.Losses) and logged,
	// with a history.DoubtMark in the same transaction (the engine puts
	// the side effects of the open runs in doubt when it opens).
	// For an operator who chose this over restoring a backup; never set it
	// by default. Damage that Badger cannot read past (a table that fails
	// its checksum, an unreadable MANIFEST) still refuses.
	AcceptDataLoss bool

	// Logger receives Badger's log lines (component=badger), from several
	// goroutines: its writer must be safe for concurrent use. Nil silences
	// them.
	Logger *zerolog.Logger
}

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	setDefault(&o.MemTableSize, DefaultMemTableSize)
	setDefault(&o.NumMemTables, DefaultNumMemTables)
	setDefault(&o.BlockCacheSize, DefaultBlockCacheSize)
	setDefault(&o.IndexCacheSize, DefaultIndexCacheSize)
	setDefault(&o.ValueLogFileSize, DefaultValueLogFileSize)
	setDefault(&o.MaxBatchBytes, DefaultMaxBatchBytes)
	setDefault(&o.CommitLinger, DefaultCommitLinger)
	setDefault(&o.MinFreeBytes, 3*o.MemTableSize)
	setDefault(&o.SpaceCheckInterval, DefaultSpaceCheckInterval)
	return o
}

func setDefault[T int | int64 | time.Duration](v *T, def T) {
	if *v == 0 {
		*v = def
	}
}

// Validate reports whether the options (after defaults) can be used. The
// error wraps ErrInvalidOptions.
func (o Options) Validate() error {
	o = o.withDefaults()
	switch {
	case o.InMemory && o.Dir != "":
		return badOptions("Dir must be empty with InMemory")
	case !o.InMemory && o.Dir == "":
		return badOptions("Dir is required (or set InMemory)")
	case o.MemTableSize < minMemTableSize:
		return badOptions("MemTableSize %d is below the minimum %d", o.MemTableSize, minMemTableSize)
	case o.NumMemTables < 2:
		return badOptions("NumMemTables %d is below the minimum 2", o.NumMemTables)
	case o.BlockCacheSize < 0 || o.IndexCacheSize < 0:
		return badOptions("cache sizes must not be negative")
	case o.ValueLogFileSize < minValueLogFile || o.ValueLogFileSize > maxValueLogFile:
		return badOptions("ValueLogFileSize %d is outside [%d, %d]", o.ValueLogFileSize, minValueLogFile, maxValueLogFile)
	case o.MaxBatchBytes < minMaxBatchBytes:
		return badOptions("MaxBatchBytes %d must be positive", o.MaxBatchBytes)
	}
	return nil
}

func badOptions(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidOptions, fmt.Sprintf(format, args...))
}

// badgerOptions translates validated options (defaults applied) to Badger's.
func (o Options) badgerOptions() badger.Options {
	bo := badger.DefaultOptions(o.Dir).
		WithInMemory(o.InMemory).
		WithSyncWrites(!o.NoSync && !o.InMemory).
		WithMemTableSize(o.MemTableSize).
		WithNumMemtables(o.NumMemTables).
		WithBlockCacheSize(o.BlockCacheSize).
		WithIndexCacheSize(o.IndexCacheSize).
		WithValueLogFileSize(o.ValueLogFileSize).
		WithValueThreshold(valueThreshold).
		WithNumCompactors(2).
		WithNumGoroutines(2).
		WithMetricsEnabled(false).
		// Every table block is checked against its checksum when it is
		// read from disk (cached blocks were checked when loaded): a
		// damaged block is an error, never keys that silently vanish.
		WithChecksumVerificationMode(options.OnBlockRead).
		// The committer goroutine is the only writer, so Badger's
		// optimistic conflict detection has nothing to detect.
		WithDetectConflicts(false).
		WithLogger(nil)
	if o.InMemory {
		bo = bo.WithDir("").WithValueDir("")
	}
	if o.Logger != nil {
		bo = bo.WithLogger(zerologAdapter{o.Logger.With().Str("component", "badger").Logger()})
	}
	return bo
}
