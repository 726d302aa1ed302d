package badgerstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/cairnflow/cairn/third_party/badger"

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
	hooks       testHooks
}

var _ history.Store = (*Store)(nil)

// testHooks let tests of this package observe and steer the committer.
// Every hook is optional and set before the committer starts.
type testHooks struct {
	enqueued func(*request)          // after Commit queued r
	taken    func([]*request)        // after the committer took a group
	commit   func(*badger.Txn) error // replaces txn.Commit
}

// Open opens (creating if needed) the store described by opts. A directory
// held by another process (or another Store in this process) returns an
// error wrapping history.ErrLocked at once.
func Open(opts Options) (*Store, error) { return open(opts, testHooks{}) }

func open(opts Options, hooks testHooks) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	db, err := badger.Open(opts.badgerOptions())
	if err != nil {
		return nil, openError(opts.Dir, err)
	}
	if err := checkFormat(db); err != nil {
		_ = db.Close()
		return nil, err
	}
	s := &Store{db: db, opts: opts, loopDone: make(chan struct{}), hooks: hooks}
	s.maxValueLen = opts.ValueLogFileSize
	if opts.InMemory {
		s.maxValueLen = valueThreshold
	}
	s.gate.init()
	s.queue.init()
	go s.commitLoop()
	return s, nil
}

// openError maps Badger's open errors. Badger reports a held directory lock
// only as text (its error chain is flattened), so the message is matched;
// TestLockedBySecondProcess guards the match against Badger upgrades.
func openError(dir string, err error) error {
	if strings.Contains(err.Error(), "Cannot acquire directory lock") {
		return fmt.Errorf("badgerstore: open %q: %w (%v)", dir, history.ErrLocked, err)
	}
	return fmt.Errorf("badgerstore: open %q: %w", dir, err)
}

// checkFormat writes the format version into a new database and refuses a
// database written in another format.
func checkFormat(db *badger.DB) error {
	return db.Update(func(txn *badger.Txn) error {
		v, found, err := getValue(txn, formatKey)
		switch {
		case err != nil:
			return fmt.Errorf("badgerstore: read format: %w", err)
		case !found:
			return txn.Set(formatKey, formatVersion)
		case !bytes.Equal(v, formatVersion):
			return fmt.Errorf("%w: version %x (this build reads %x)", ErrFormat, v, formatVersion)
		}
		return nil
	})
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
	})
	return s.closeErr
}

// lookup reads one key in txn and passes its value, valid only during the
// call, to fn.
func lookup(txn *badger.Txn, key []byte, fn func(v []byte)) (found bool, err error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("badgerstore: get: %w", err)
	}
	if err := item.Value(func(v []byte) error { fn(v); return nil }); err != nil {
		return false, fmt.Errorf("badgerstore: read value: %w", err)
	}
	return true, nil
}

// getValue reads one key in txn, copying its value (never nil when found).
func getValue(txn *badger.Txn, key []byte) (value []byte, found bool, err error) {
	found, err = lookup(txn, key, func(v []byte) { value = append([]byte{}, v...) })
	return value, found, err
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
	if !it.Valid() {
		return 0, nil
	}
	id, ok := eventIDOf(it.Item().Key(), len(prefix))
	if !ok || id < 1 {
		return 0, &history.CorruptError{Run: run, Reason: fmt.Sprintf("event record with a malformed key %x", it.Item().Key())}
	}
	return id, nil
}
