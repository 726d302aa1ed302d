package badgerstore

import (
	"testing"

	"github.com/cairnflow/cairn/third_party/badger"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/historytest"
)

func TestConformanceOnDisk(t *testing.T) {
	historytest.Run(t, historytest.Harness{
		New: func(t testing.TB) history.Store {
			return mustOpen(t, Options{Dir: t.TempDir()})
		},
		Reopen: func(t testing.TB, s history.Store) history.Store {
			opts := s.(*Store).opts
			if err := s.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return mustOpen(t, opts)
		},
		Corrupt: corruptEvent,
	})
}

func TestConformanceInMemory(t *testing.T) {
	historytest.Run(t, historytest.Harness{
		New: func(t testing.TB) history.Store {
			return mustOpen(t, Options{InMemory: true})
		},
		Corrupt: corruptEvent,
	})
}

func mustOpen(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// corruptEvent flips one bit in the middle of an event record, behind the
// store's back.
func corruptEvent(t testing.TB, hs history.Store, run history.RunRef, id int64) {
	t.Helper()
	key := eventKey(eventPrefix(run), id)
	err := hs.(*Store).db.Update(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		v[len(v)/2] ^= 0x10
		return txn.Set(key, v)
	})
	if err != nil {
		t.Fatalf("corrupt event %d of %v: %v", id, run, err)
	}
}
