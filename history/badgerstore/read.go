package badgerstore

import (
	"bytes"
	"context"
	"fmt"
	"iter"

	"github.com/cairnflow/cairn/third_party/badger"

	"github.com/cairnflow/cairn/history"
)

// ctxCheckEvery is how many events a read decodes between looks at its
// context and at Close.
const ctxCheckEvery = 64

// view runs fn in a read-only snapshot.
func (s *Store) view(ctx context.Context, fn func(txn *badger.Txn) error) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.exit()
	if err := ctx.Err(); err != nil {
		return err
	}
	txn := s.db.NewTransaction(false)
	defer txn.Discard()
	return fn(txn)
}

// ReadEvents returns up to limit events of run with IDs ≥ from; see
// history.Store.
func (s *Store) ReadEvents(ctx context.Context, run history.RunRef, from int64, limit int) ([]history.Event, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	var out []history.Event
	err := s.view(ctx, func(txn *badger.Txn) error {
		return s.scanEvents(ctx, txn, run, from, limit, func(n int64) {
			out = make([]history.Event, 0, min(n, 1<<16))
		}, func(ev history.Event) bool {
			out = append(out, ev)
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Events iterates run's events with IDs ≥ from in one snapshot; see
// history.Store. The iteration holds a Badger read transaction until the
// loop ends; once Close has begun it ends early, yielding
// history.ErrClosed, and Close waits for that.
func (s *Store) Events(ctx context.Context, run history.RunRef, from int64) iter.Seq2[history.Event, error] {
	return func(yield func(history.Event, error) bool) {
		err := checkRun(run)
		if err == nil {
			err = s.view(ctx, func(txn *badger.Txn) error {
				return s.scanEvents(ctx, txn, run, from, 0, nil, func(ev history.Event) bool {
					return yield(ev, nil)
				})
			})
		}
		if err != nil {
			yield(history.Event{}, err)
		}
	}
}

// scanEvents decodes run's events from..(from+limit-1) in txn and passes
// them to fn until fn returns false. sized, if not nil, first learns how
// many events there will be. A missing or damaged record is reported as a
// *history.CorruptError naming the event.
func (s *Store) scanEvents(ctx context.Context, txn *badger.Txn, run history.RunRef, from int64, limit int,
	sized func(n int64), fn func(history.Event) bool) error {
	last, err := lastEvent(txn, run)
	if err != nil {
		return err
	}
	if last == 0 {
		return fmt.Errorf("%w: workflow %q run %q has no events", history.ErrNotFound, run.WorkflowID, run.RunID)
	}
	from = max(from, 1)
	end := last
	if limit > 0 && int64(limit) <= end-from {
		end = from + int64(limit) - 1
	}
	if sized != nil {
		sized(max(end-from+1, 0))
	}
	prefix := eventPrefix(run)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	next := from
	for it.Seek(eventKey(prefix, from)); it.Valid() && next <= end; it.Next() {
		if (next-from)%ctxCheckEvery == 0 {
			if err := s.interrupted(ctx); err != nil {
				return err
			}
		}
		ev, err := decodeItem(it.Item(), len(prefix), run, next)
		if err != nil {
			if ierr := it.Err(); ierr != nil {
				return readError(fmt.Sprintf("read events of workflow %q run %q", run.WorkflowID, run.RunID), ierr)
			}
			return err
		}
		if !fn(ev) {
			return nil
		}
		next++
	}
	if err := it.Err(); err != nil {
		return readError(fmt.Sprintf("read events of workflow %q run %q", run.WorkflowID, run.RunID), err)
	}
	if next <= end {
		return missingEvent(run, next)
	}
	return nil
}

// interrupted reports why a long read must stop, if it must.
func (s *Store) interrupted(ctx context.Context) error {
	if s.gate.isClosed() {
		return history.ErrClosed
	}
	return ctx.Err()
}

// decodeItem decodes the event record in item, which must hold event want.
func decodeItem(item *badger.Item, prefixLen int, run history.RunRef, want int64) (history.Event, error) {
	if id, ok := eventIDOf(item.Key(), prefixLen); !ok || id != want {
		return history.Event{}, missingEvent(run, want)
	}
	var ev history.Event
	var decodeErr error
	err := item.Value(func(v []byte) error {
		// DecodeEvent copies what it keeps: v is only valid in here.
		ev, decodeErr = history.DecodeEvent(v, run, want)
		return nil
	})
	if err != nil {
		c := readError("read value", err).(*history.CorruptError)
		c.Run, c.EventID = run, want
		return history.Event{}, c
	}
	return ev, decodeErr
}

func missingEvent(run history.RunRef, id int64) error {
	return &history.CorruptError{Run: run, EventID: id, Reason: "event record missing"}
}

// LastEventID returns the id of run's last event, or 0; see history.Store.
func (s *Store) LastEventID(ctx context.Context, run history.RunRef) (int64, error) {
	if err := checkRun(run); err != nil {
		return 0, err
	}
	var last int64
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		last, err = lastEvent(txn, run)
		return err
	})
	return last, err
}

// Get returns a record's value or an error wrapping history.ErrNotFound.
func (s *Store) Get(ctx context.Context, space history.Space, key []byte) ([]byte, error) {
	if err := checkRecordKey(space, key); err != nil {
		return nil, err
	}
	var value []byte
	err := s.view(ctx, func(txn *badger.Txn) error {
		v, found, err := getValue(txn, recordKey(space, key))
		if err == nil && !found {
			err = fmt.Errorf("%w: %s key %x", history.ErrNotFound, space, key)
		}
		value = v
		return err
	})
	if err != nil {
		return nil, err
	}
	return value, nil
}

// Scan returns the records of space selected by opts; see history.Store.
func (s *Store) Scan(ctx context.Context, space history.Space, opts history.ScanOptions) ([]history.Record, error) {
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	var out []history.Record
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		out, err = s.scanRecords(ctx, txn, space, opts)
		return err
	})
	return out, err
}

func (s *Store) scanRecords(ctx context.Context, txn *badger.Txn, space history.Space, opts history.ScanOptions) ([]history.Record, error) {
	prefix := recordKey(space, opts.Prefix)
	var after []byte
	if opts.After != nil {
		after = recordKey(space, opts.After)
	}
	itOpts := badger.IteratorOptions{Reverse: opts.Reverse}
	if !opts.Reverse {
		// Badger's prefix check would stop a reverse scan on the key just
		// past the prefix, where it starts; reverse scans check it here.
		itOpts.Prefix = prefix
	}
	it := txn.NewIterator(itOpts)
	defer it.Close()
	var out []history.Record
	for it.Seek(scanStart(prefix, after, opts.Reverse)); it.Valid(); it.Next() {
		if len(out)%ctxCheckEvery == 0 {
			if err := s.interrupted(ctx); err != nil {
				return nil, err
			}
		}
		item := it.Item()
		k := item.Key()
		if !bytes.HasPrefix(k, prefix) {
			if opts.Reverse && bytes.Compare(k, prefix) > 0 {
				continue // the first key past the prefix, where a reverse scan starts
			}
			break
		}
		if after != nil && bytes.Equal(k, after) {
			continue
		}
		rec, err := copyRecord(space, item)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
		if opts.Limit > 0 && len(out) == opts.Limit {
			break
		}
	}
	// A damaged table block ends its table's part of the scan early while
	// the other tables go on: what was read cannot be trusted.
	if err := it.Err(); err != nil {
		return nil, readError(fmt.Sprintf("scan %s", space), err)
	}
	return out, nil
}

// scanStart returns the key to seek to. Forward: the prefix, or after when
// it sorts later. Reverse (Badger seeks to the last key ≤ the target): the
// first key past the prefix, or after when it sorts earlier. The exclusive
// after itself, and the key past the prefix, are skipped by the caller.
func scanStart(prefix, after []byte, reverse bool) []byte {
	if !reverse {
		if after != nil && bytes.Compare(after, prefix) > 0 {
			return after
		}
		return prefix
	}
	// prefix starts with a space byte < 0xFF, so it has an end.
	end := prefixEnd(prefix)
	if after != nil && bytes.Compare(after, end) < 0 {
		return after
	}
	return end
}

func copyRecord(space history.Space, item *badger.Item) (history.Record, error) {
	key := item.KeyCopy(nil)
	raw, err := item.ValueCopy(nil)
	if err != nil {
		return history.Record{}, readError(fmt.Sprintf("read %s key %x", space, key[1:]), err)
	}
	v, err := unseal(key, raw)
	if err != nil {
		return history.Record{}, err
	}
	return history.Record{Space: space, Key: key[1:], Value: v}, nil
}
