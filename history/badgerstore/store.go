package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cairnflow/cairn/third_party/badger"
	"github.com/cairnflow/cairn/third_party/badger/y"

	"github.com/cairnflow/cairn/history"
)

// ErrFormat is returned by Open for a directory written in an on-disk format
// this version does not know.
var ErrFormat = errors.New("badgerstore: unsupported on-disk format")

// Store is a history.Store on an embedded Badger database. It is safe for
// concurrent use. Create it with Open and release it with Close.
type Store struct {
	db          *badger.DB
	opts        Options // defaults applied
	maxValueLen int64   // values this long or longer are refused
	gate        gate
	queue       queue
	loopDone    chan struct{} // closed when commitLoop returns
	closeOnce   sync.Once
	closeErr    error
	heads       headCache // committer only
	seq         uint64    // last durable group commit (committer only after Open)
	hwm         *hwmFile  // nil InMemory
	space       space
	hooks       testHooks
}

var _ history.Store = (*Store)(nil)

// testHooks let tests of this package observe and steer the committer.
// Every hook is optional and set before the committer starts.
type testHooks struct {
	enqueued func(*request)                      // after Commit queued r
	taken    func([]*request)                    // after the committer took a group
	commit   func(*badger.Txn) error             // replaces txn.Commit
	badger   func(badger.Options) badger.Options // adjusts Badger's options
}

// Open opens (creating if needed) the store described by opts. A directory
// held by another process (or another Store in this process) returns an
// error wrapping history.ErrLocked at once.
//
// Open verifies the data before it serves any: damage to Badger's files
// (a WAL record followed by valid ones, a MANIFEST shorter than was
// synced, a table that fails its checksum or does not parse) and any
// acknowledged commit missing from the database (see
// docs/reliability.md, "Storage integrity") return a *DamagedError
// (wrapping history.ErrCorrupt) that names the damaged file, where and
// what, on one line, and says whether opts.AcceptDataLoss would go past
// it, unless opts.AcceptDataLoss is set and does. A full disk returns
// history.ErrNoSpace only if even the space reserve does not let Badger
// open.
func Open(opts Options) (*Store, error) { return open(opts, testHooks{}) }

func open(opts Options, hooks testHooks) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Store{opts: opts, loopDone: make(chan struct{}), hooks: hooks}
	s.maxValueLen = opts.ValueLogFileSize
	if opts.InMemory {
		s.maxValueLen = valueThreshold
		db, err := badger.Open(opts.badgerOptions())
		if err != nil {
			return nil, fmt.Errorf("badgerstore: open in memory: %w", err)
		}
		s.db = db
		if err := checkFormat(db); err != nil {
			_ = db.Close()
			return nil, err
		}
	} else if err := s.openDir(); err != nil {
		err = damaged(opts.Dir, false, err)
		var de *DamagedError
		if errors.As(err, &de) {
			recordRefusal(de, time.Now().UTC())
		}
		return nil, err
	}
	s.gate.init()
	s.queue.init()
	go s.commitLoop()
	return s, nil
}

// openDir opens the on-disk database and checks its integrity.
func (s *Store) openDir() error {
	opts := s.opts
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return fmt.Errorf("badgerstore: create %q: %w", opts.Dir, err)
	}
	prior, err := priorRefusal(opts.Dir)
	if err != nil {
		return err
	}
	if prior != nil && !opts.AcceptDataLoss {
		return prior // a refusal sticks (RefusedFile)
	}
	hwm, st, err := openHWM(opts.Dir)
	if err != nil {
		return err
	}
	var refused error = errOrNil(prior) // the damage an AcceptDataLoss open goes past
	db, err := openBadger(opts, hwm, st, false, s.hooks.badger)
	if err != nil && errors.Is(err, history.ErrCorrupt) && opts.AcceptDataLoss {
		refused = err
		db, err = openBadger(opts, hwm, st, true, s.hooks.badger)
	}
	if err != nil {
		_ = hwm.close()
		return err
	}
	fail := func(err error) error {
		_ = db.Close()
		_ = hwm.close()
		return err
	}
	if err := checkFormat(db); err != nil {
		return fail(err)
	}
	accepted, err := losses(db)
	if err != nil {
		return fail(err)
	}
	r, err := checkSequence(db, accepted)
	if err == nil {
		err = verifySequence(r, st.seq, opts.Dir)
	}
	if err == nil && !st.existed && r.last > 0 {
		err = corruptFile(filepath.Join(opts.Dir, HWMFile), -1, "the integrity file is missing, but the database holds %d group commits", r.last)
	}
	if err != nil && (!errors.Is(err, history.ErrCorrupt) || !opts.AcceptDataLoss) {
		return fail(damaged(opts.Dir, true, err)) // lost commits: AcceptDataLoss goes on without them
	}
	if refused == nil {
		refused = err
	}
	if refused != nil {
		rec := LossRecord{At: time.Now().UTC(), Refused: refused.Error(), Resumed: r.last}
		if st.seq > r.last {
			rec.LostFrom, rec.LostTo = r.last+1, st.seq
		} else if r.gapTo != 0 {
			rec.LostFrom, rec.LostTo = r.gapFrom, r.gapTo
		}
		if err := recordLoss(db, rec); err != nil {
			return fail(fmt.Errorf("badgerstore: record accepted data loss: %w", writeError(err)))
		}
		if err := hwm.reset(r.last); err != nil {
			return fail(err)
		}
		if err := clearRefusal(opts.Dir); err != nil {
			return fail(err) // the loss is recorded: the next AcceptDataLoss open records it again
		}
		if opts.Logger != nil {
			opts.Logger.Error().Str("refused", rec.Refused).Uint64("lost_from", rec.LostFrom).Uint64("lost_to", rec.LostTo).
				Uint64("resumed", rec.Resumed).Msg("badgerstore: opened over damaged or lost data (AcceptDataLoss); the loss is recorded")
		}
	}
	hwm.advance(r.last) // after a power loss the mark on disk may lag
	s.db, s.hwm, s.seq = db, hwm, r.last
	s.space = space{dir: opts.Dir, min: opts.MinFreeBytes, every: opts.SpaceCheckInterval}
	if makeReserve(opts.Dir) != nil {
		s.space.missing.Store(true)
	}
	return nil
}

// openBadger opens Badger with the integrity checks (relaxed: without
// them, for AcceptDataLoss). On a full disk it drops the space reserve
// and tries once more.
func openBadger(opts Options, hwm *hwmFile, st hwmState, relaxed bool, tweak func(badger.Options) badger.Options) (*badger.DB, error) {
	bo := opts.badgerOptions().WithDetectLogDamage(!relaxed).WithOnManifestWrite(hwm.setManifest)
	if !relaxed {
		bo = bo.WithManifestMinSize(st.manifest)
	}
	if tweak != nil {
		bo = tweak(bo)
	}
	db, err := badger.Open(bo)
	if err != nil && y.IsNoSpace(err) && dropReserve(opts.Dir) {
		db, err = badger.Open(bo)
	}
	if err != nil {
		return nil, openError(opts.Dir, relaxed, err)
	}
	return db, nil
}

// openError maps Badger's open errors. Badger reports a held directory lock
// only as text (its error chain is flattened), so the message is matched;
// TestLockedBySecondProcess guards the match against Badger upgrades. Any
// other failure to open a directory that could be read is damage: a
// *DamagedError, acceptable when a relaxed open would go past it (and this
// one was not relaxed already).
func openError(dir string, relaxed bool, err error) error {
	switch {
	case strings.Contains(err.Error(), "Cannot acquire directory lock"):
		return fmt.Errorf("badgerstore: open %q: %w (%v)", dir, history.ErrLocked, err)
	case y.IsNoSpace(err):
		return fmt.Errorf("badgerstore: open %q: %w: %w", dir, history.ErrNoSpace, err)
	case errors.Is(err, fs.ErrPermission), strings.Contains(err.Error(), "permission denied"),
		strings.Contains(err.Error(), "too many open files"), strings.Contains(err.Error(), "cannot allocate memory"):
		return fmt.Errorf("badgerstore: open %q: %w", dir, err)
	}
	var be *badger.CorruptError
	return damaged(dir, !relaxed && errors.As(err, &be) && be.Relaxable, fromBadgerCorrupt(err))
}

// checkFormat writes the format version into a new database, migrates a
// database of format 1 (records without checksums) and refuses one written
// in a format this build does not know.
func checkFormat(db *badger.DB) error {
	var v []byte
	var found bool
	err := db.View(func(txn *badger.Txn) error {
		var err error
		v, found, err = getRaw(txn, formatKey)
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("badgerstore: read format: %w", err)
	case !found:
		return db.Update(func(txn *badger.Txn) error { return txn.Set(formatKey, formatVersion) })
	case bytes.Equal(v, formatV1):
		return migrateV1(db)
	case !bytes.Equal(v, formatVersion):
		return fmt.Errorf("%w: version %x (this build reads %x)", ErrFormat, v, formatVersion)
	}
	return nil
}

// Close waits for running calls (queued commits are committed, running
// reads and iterations end at their next event with history.ErrClosed),
// then closes Badger. It is idempotent; every later call returns the first
// call's result, and every other method returns history.ErrClosed.
// Do not call Close from inside a loop over Events: it would wait for that
// loop.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.queue.close()
		s.gate.close()
		s.queue.stop()
		<-s.loopDone
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("badgerstore: close: %w", err)
		}
		if s.hwm != nil {
			if err := s.hwm.close(); err != nil && s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

// getRaw reads one key in txn, copying its stored bytes (never nil when
// found).
func getRaw(txn *badger.Txn, key []byte) (value []byte, found bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, readError(fmt.Sprintf("get key %x", key), err)
	}
	value, err = item.ValueCopy(nil)
	if err != nil {
		return nil, false, readError(fmt.Sprintf("read value of key %x", key), err)
	}
	if value == nil {
		value = []byte{}
	}
	return value, true, nil
}

// getValue reads one record in txn and checks its envelope, returning a
// copy of its value (never nil when found).
func getValue(txn *badger.Txn, key []byte) (value []byte, found bool, err error) {
	raw, found, err := getRaw(txn, key)
	if err != nil || !found {
		return nil, found, err
	}
	value, err = unseal(key, raw)
	return value, err == nil, err
}

// lastKeySuffix sorts after any event id (and any short junk) under a
// run's event prefix.
var lastKeySuffix = bytes.Repeat([]byte{0xff}, 16)

// lastEvent returns a run's last event id (0 when it has none): the key of
// its last event record, found with one reverse seek. There is no separate
// head record to keep in step with the events (one key fewer per append,
// which was a fifth of the write path's CPU); the engine's run state, written
// in the same transaction as the events, still names the id the history
// must end at, so a lost last event surfaces there (an append then
// conflicts, a read comes back short).
func lastEvent(txn *badger.Txn, run history.RunRef) (int64, error) {
	prefix := eventPrefix(run)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
	defer it.Close()
	// Past every key under the prefix, not just every event id, so that a
	// malformed key there is seen and reported.
	it.Seek(append(bytes.Clone(prefix), lastKeySuffix...))
	if err := it.Err(); err != nil {
		return 0, readError(fmt.Sprintf("find the last event of workflow %q run %q", run.WorkflowID, run.RunID), err)
	}
	if !it.Valid() {
		return 0, nil
	}
	id, ok := eventIDOf(it.Item().Key(), len(prefix))
	if !ok || id < 1 {
		return 0, &history.CorruptError{Run: run, Reason: fmt.Sprintf("event record with a malformed key %x", it.Item().Key())}
	}
	return id, nil
}
