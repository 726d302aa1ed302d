package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cairnflow/cairn/history"
)

var _ history.RunLister = (*Store)(nil)

// Runs returns up to limit runs that have events, in (workflow id, run
// id) order, after the run after names; see history.RunLister. Every run
// with events has a row in runs, read along its primary key.
func (s *Store) Runs(ctx context.Context, after *history.RunRef, limit int) ([]history.RunRef, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.exit()
	sql, args := "SELECT workflow_id, run_id FROM runs", []any{}
	if after != nil {
		sql += " WHERE (workflow_id, run_id) > ($1, $2)"
		args = append(args, []byte(after.WorkflowID), []byte(after.RunID))
	}
	sql += " ORDER BY workflow_id, run_id"
	if limit > 0 {
		args = append(args, int64(limit))
		sql += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, readError(ctx, "list runs", err)
	}
	var out []history.RunRef
	var wf, run []byte
	interrupted := s.interrupted(ctx)
	_, err = pgx.ForEachRow(rows, []any{&wf, &run}, func() error {
		if len(out)%ctxCheckEvery == 0 {
			if err := interrupted(); err != nil {
				return err
			}
		}
		out = append(out, history.RunRef{WorkflowID: string(wf), RunID: string(run)})
		return nil
	})
	if err != nil {
		return nil, readError(ctx, "list runs", err)
	}
	return out, nil
}
