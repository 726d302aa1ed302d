package badgerstore

import (
	"context"
	"fmt"

	"github.com/cairnflow/cairn/third_party/badger"

	"github.com/cairnflow/cairn/history"
)

var _ history.RunLister = (*Store)(nil)

// Runs returns up to limit runs that have events, in (workflow id, run
// id) order, after the run after names; see history.RunLister. It walks
// the event keys ("h" + tuple(wf, run) + id) without reading their
// values, and jumps over each run's events with one seek.
func (s *Store) Runs(ctx context.Context, after *history.RunRef, limit int) ([]history.RunRef, error) {
	var out []history.RunRef
	err := s.view(ctx, func(txn *badger.Txn) error {
		var err error
		out, err = s.listRuns(ctx, txn, after, limit)
		return err
	})
	return out, err
}

func (s *Store) listRuns(ctx context.Context, txn *badger.Txn, after *history.RunRef, limit int) ([]history.RunRef, error) {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixEvent}})
	defer it.Close()
	seek := []byte{prefixEvent}
	if after != nil {
		seek = prefixEnd(eventPrefix(*after))
	}
	var out []history.RunRef
	for it.Seek(seek); it.Valid(); it.Seek(seek) {
		if len(out)%ctxCheckEvery == 0 {
			if err := s.interrupted(ctx); err != nil {
				return nil, err
			}
		}
		key := it.Item().Key()
		run, err := runOfEventKey(key)
		if err != nil {
			return nil, err
		}
		out = append(out, run)
		if limit > 0 && len(out) == limit {
			break
		}
		seek = prefixEnd(key[:len(key)-8]) // past every event of this run
	}
	if err := it.Err(); err != nil {
		return nil, readError("list runs", err)
	}
	return out, nil
}

// runOfEventKey decodes the run of an event key: "h" tuple(wf, run)
// followed by an 8-byte id.
func runOfEventKey(key []byte) (history.RunRef, error) {
	kr := history.ReadKey(key[1:])
	run := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
	if err := kr.Err(); err != nil || len(kr.Rest()) != 8 || run.WorkflowID == "" || run.RunID == "" {
		return history.RunRef{}, &history.CorruptError{Key: append([]byte(nil), key...), Offset: -1,
			Reason: fmt.Sprintf("event key %x does not name a run and an event", key)}
	}
	return run, nil
}
