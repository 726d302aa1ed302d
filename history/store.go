package history

import (
	"context"
	"errors"
	"iter"
)

// Sentinel errors returned by every Store. Check them with errors.Is; the
// returned error usually wraps one of these with more context.
var (
	// ErrNotFound: the run, event or record does not exist.
	ErrNotFound = errors.New("history: not found")
	// ErrConflict: an optimistic-concurrency check failed (an append's
	// expected next event id, or a record Condition). Nothing was written.
	ErrConflict = errors.New("history: conflict")
	// ErrCorrupt: a stored record failed its checksum or could not be decoded.
	// The wrapping error says where (see CorruptError).
	ErrCorrupt = errors.New("history: corrupt record")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("history: store closed")
	// ErrInvalid: the request itself is malformed (empty ids, events not
	// numbered contiguously, an empty key, an unknown space …).
	ErrInvalid = errors.New("history: invalid request")
	// ErrLocked: the store's directory is held by another process.
	ErrLocked = errors.New("history: directory locked by another process")
	// ErrTooLarge: a single batch exceeds what the store can commit atomically.
	ErrTooLarge = errors.New("history: batch too large")
	// ErrNoSpace: the store's filesystem is full (or below the store's
	// free-space floor). Nothing of the batch was written; commits succeed
	// again once space returns. Reads keep working.
	ErrNoSpace = errors.New("history: disk full")
	// ErrFenced: a batch's fence no longer holds (the shard's lease epoch
	// moved on: another owner acquired the shard since the writer did).
	// Nothing of the batch was written. The writer has lost the shard and
	// must stop writing for it; see Fence.
	ErrFenced = errors.New("history: fenced")
)

// Space names a key space for the engine's small keyed records. Each space
// is an independent ordered map from key bytes to value bytes; a SQL store
// maps a space to a table with a bytea primary key.
type Space uint8

// The record spaces. Never renumber.
const (
	spaceInvalid Space = iota
	// SpaceRunState holds each run's derived state (rewritten each transition).
	SpaceRunState
	// SpaceCurrentRun maps a workflow id to its current (latest) run id.
	SpaceCurrentRun
	// SpaceTask holds ready tasks (workflow, activity, query tasks).
	SpaceTask
	// SpaceTimer holds durable timers ordered by fire time.
	SpaceTimer
	// SpaceLedger is the effects ledger keyed by (workflow id, idempotency
	// key). It outlives runs and is never trimmed by normal operation.
	SpaceLedger
	// SpaceIndex holds list/visibility indexes.
	SpaceIndex
	// SpaceMeta holds small engine-wide records (schema version, counters).
	SpaceMeta
	// SpaceChunk holds content-addressed payload chunks: key ChunkHash,
	// value EncodeChunk (see chunk.go). Shared by runs and workflows.
	SpaceChunk
	// SpaceUsage holds the token and cost ledger per workflow id (it
	// outlives runs, like the effects ledger).
	SpaceUsage
	// SpaceSchedule holds schedules (engine/schedule): their specs, state
	// and the index of their next fire times.
	SpaceSchedule
	spaceCount
)

var spaceNames = [spaceCount]string{"invalid", "runstate", "current", "task", "timer", "ledger", "index", "meta", "chunk", "usage", "schedule"}

// String returns the space's short name.
func (s Space) String() string {
	if s < spaceCount {
		return spaceNames[s]
	}
	return "space?"
}

// Valid reports whether s is one of the defined spaces.
func (s Space) Valid() bool { return s > spaceInvalid && s < spaceCount }

// RunRef identifies one run of a workflow.
type RunRef struct {
	WorkflowID string
	RunID      string
}

// Append adds events to the end of one run's history. Events must be numbered
// contiguously starting at ExpectedNext; ExpectedNext is 1 for a new run. An
// Append without events is invalid.
type Append struct {
	Run          RunRef
	ExpectedNext int64
	Events       []Event
}

// Record is one keyed record in a space. A nil Value in Batch.Puts is stored
// as an empty value (the key exists).
type Record struct {
	Space Space
	Key   []byte
	Value []byte
}

// RecordKey names one record.
type RecordKey struct {
	Space Space
	Key   []byte
}

// Condition is a precondition on a record, checked atomically with the
// batch. With Exists false the record must be absent; with Exists true it
// must be present and, when Value is non-nil, equal to Value byte for byte.
type Condition struct {
	Space  Space
	Key    []byte
	Exists bool
	Value  []byte
}

// Fence makes a batch conditional on its writer still owning a shard: the
// batch commits only if the shard's lease epoch, checked atomically with
// the write, is still Epoch. Several servers sharing one database each own
// some shards through leases (pgstore's AcquireShard); every acquisition
// starts a new epoch, so a server that was frozen or cut off past its lease
// and lost the shard to another finds its epoch moved on: its batch fails
// with ErrFenced and writes nothing. Lease expiry is advice; the fence is
// the safety.
//
// Stores without shard leases (badgerstore: one process owns the data)
// refuse a batch with fences as ErrInvalid.
type Fence struct {
	// Shard is the shard the writer owns (0 ≤ Shard < the store's shard
	// count).
	Shard int
	// Epoch is the lease epoch the writer acquired the shard with.
	Epoch int64
}

// Batch is one atomic transaction: all of it is durable or none of it is.
// Fences, Conditions and every Append's ExpectedNext are checked first; if
// a fence does not hold the batch returns ErrFenced, if any other check
// fails ErrConflict, and it writes nothing. A batch appends to a run at
// most once and names a record key at most once across Puts and Deletes
// (else ErrInvalid): the order of two writes to one place would be
// ambiguous.
type Batch struct {
	Conditions []Condition
	Appends    []Append
	Puts       []Record
	Deletes    []RecordKey
	// Fences: the batch commits only while every one of them holds (see
	// Fence). A batch with fences and nothing else only checks them.
	Fences []Fence
	// DeleteRuns removes every stored event of each run, atomically with
	// the rest of the batch (retention and `cairn workflow delete`):
	// afterwards the run has no events (ReadEvents returns ErrNotFound,
	// LastEventID 0, RunLister no longer names it) and a later Append
	// starts it again at 1. Deleting a run that has no events is not an
	// error. A batch may not both append to and delete one run, nor delete
	// one twice (ErrInvalid). The engine's records of the run are the
	// caller's to delete in the same batch (Deletes). A run with more
	// events than one transaction holds returns ErrTooLarge and nothing
	// is deleted.
	DeleteRuns []RunRef
}

// Empty reports whether the batch would change nothing.
func (b *Batch) Empty() bool {
	return len(b.Appends) == 0 && len(b.Puts) == 0 && len(b.Deletes) == 0 && len(b.DeleteRuns) == 0
}

// ScanOptions select a range of records in one space. Keys are compared
// bytewise. Only keys starting with Prefix are returned; the scan starts
// after After (exclusive) when it is non-nil, walking in ascending order, or
// descending when Reverse is set. Limit ≤ 0 means no limit.
type ScanOptions struct {
	Prefix  []byte
	After   []byte
	Reverse bool
	Limit   int
}

// Store is Cairn's durable event log and record store. Implementations must
// be safe for concurrent use and must pass historytest.Run.
//
// Durability: when Commit returns nil the batch is on stable storage (unless
// the store was opened with durability off, which is for tests only).
type Store interface {
	// Commit applies the batch atomically. It returns ErrConflict (wrapped)
	// when a Condition or an Append's ExpectedNext does not hold, ErrFenced
	// when a Fence does not hold, ErrInvalid for a malformed batch (or for
	// fences, in a store without shard leases), ErrTooLarge when the batch cannot be committed
	// in one transaction, ErrClosed after Close, or ctx.Err() when the
	// context ends before the batch was committed (then it was not).
	Commit(ctx context.Context, b *Batch) error

	// ReadEvents returns up to limit events of a run with IDs ≥ from, in
	// order (limit ≤ 0: all). A run with no events returns ErrNotFound. A
	// damaged record returns an error wrapping ErrCorrupt naming the event.
	ReadEvents(ctx context.Context, run RunRef, from int64, limit int) ([]Event, error)

	// Events iterates a run's events with IDs ≥ from in order, stopping at
	// the first error (ErrNotFound for an unknown run, ErrCorrupt …). The
	// sequence reads one consistent snapshot.
	Events(ctx context.Context, run RunRef, from int64) iter.Seq2[Event, error]

	// LastEventID returns the ID of the run's last event, or 0 when the run
	// has no events.
	LastEventID(ctx context.Context, run RunRef) (int64, error)

	// Get returns a record's value, or ErrNotFound.
	Get(ctx context.Context, space Space, key []byte) ([]byte, error)

	// Scan returns the records selected by opts, in key order (or reverse).
	Scan(ctx context.Context, space Space, opts ScanOptions) ([]Record, error)

	// Close flushes and releases the store. It is idempotent; after it every
	// other method returns ErrClosed. A Commit running when Close begins
	// either completes or returns ErrClosed having written nothing.
	Close() error
}

// Reclaimer is implemented by stores that can give the space of deleted
// data back (after Batch.DeleteRuns and record deletes): the engine calls
// it after a retention sweep that deleted runs. It may take long and does
// not block commits for its duration (it is not a transaction).
type Reclaimer interface {
	Reclaim(ctx context.Context) error
}

// RunLister is implemented by stores that can name every run they hold
// events for. Store reads a run's events only by its name, and the
// engine's records name runs (their states, in SpaceRunState), but a run
// whose state record is missing would be invisible through them: a
// whole-store copy (history/storecopy) lists runs from the events
// themselves. Both of Cairn's stores implement it.
type RunLister interface {
	// Runs returns up to limit runs that have at least one event, in
	// ascending order of workflow id then run id (bytewise), starting
	// after the run after names (exclusive) when after is not nil.
	// limit ≤ 0 means no limit. It returns ErrClosed after Close, or
	// ctx.Err().
	Runs(ctx context.Context, after *RunRef, limit int) ([]RunRef, error)
}
