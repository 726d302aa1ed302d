package pgstore

import (
	"context"
	"fmt"
)

// Reclaim vacuums the tables that deletes shrink (events, runs, records):
// the space of deleted rows becomes reusable by later writes. PostgreSQL
// does not give it back to the filesystem without VACUUM FULL, which locks
// the tables: an operator runs that in a quiet window if the disk must
// shrink. Autovacuum does the same on its own schedule; see
// history.Reclaimer.
func (s *Store) Reclaim(ctx context.Context) error {
	for _, table := range []string{"events", "runs", "records"} {
		if _, err := s.pool.Exec(ctx, "VACUUM "+table); err != nil {
			return fmt.Errorf("pgstore: reclaim: vacuum %s: %w", table, err)
		}
	}
	return nil
}
