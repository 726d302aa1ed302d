package badgerstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnflow/cairn/third_party/badger"
)

// Reclaim gives the space of deleted keys (history.Batch.DeleteRuns,
// record deletes) and overwritten versions back to the disk: it compacts
// every table of the LSM tree down into the last level, which drops them
// (badger.DB.CompactAll, a patch of Cairn's fork), then runs the
// value log's garbage collection until no value-log file is worth
// rewriting. What the memtables hold (the last writes, up to
// Options.MemTableSize × NumMemTables) is reclaimed once Badger flushes
// them. Commits go on meanwhile. See history.Reclaimer.
//
// The commit sequence the integrity check reads (integrity.go) is kept
// as ordinary compactions keep it: the newest version of the sequence key
// stays in the tables.
func (s *Store) Reclaim(ctx context.Context) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.exit()
	if err := s.db.CompactAll(); err != nil {
		return fmt.Errorf("badgerstore: reclaim: compact: %w", err)
	}
	for ctx.Err() == nil {
		err := s.db.RunValueLogGC(0.5)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("badgerstore: reclaim: value log: %w", err)
		}
	}
	return ctx.Err()
}
