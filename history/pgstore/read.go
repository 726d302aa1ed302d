package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairnflow/cairn/history"
)

// ctxCheckEvery is how many events a read decodes between looks at its
// context and at Close.
const ctxCheckEvery = 64

// sqlReadEvents reads a run's head and its events in [$3, $4), in one
// statement (one snapshot). A run without a row has no events; a run
// with a row but no events in the range yields one row with a NULL event.
const sqlReadEvents = `SELECT r.next_id, e.event_id, e.data
FROM runs r LEFT JOIN events e
  ON e.workflow_id = r.workflow_id AND e.run_id = r.run_id AND e.event_id >= $3 AND e.event_id < $4
WHERE r.workflow_id = $1 AND r.run_id = $2
ORDER BY e.event_id`

// enter admits a read: the store is open and ctx has not ended.
func (s *Store) enter(ctx context.Context) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		s.gate.exit()
		return err
	}
	return nil
}

// ReadEvents returns up to limit events of run with IDs ≥ from; see
// history.Store.
func (s *Store) ReadEvents(ctx context.Context, run history.RunRef, from int64, limit int) ([]history.Event, error) {
	if err := checkRun(run); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.exit()
	var out []history.Event
	var dec history.EventDecoder
	err := s.scanEvents(ctx, run, from, limit, func(data []byte, id int64) error {
		ev, err := dec.Decode(data, run, id)
		if err == nil {
			out = append(out, ev)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Events iterates run's events with IDs ≥ from in one snapshot (one
// statement, streamed); see history.Store. The iteration holds a
// connection until the loop ends; once Close has begun it ends early,
// yielding history.ErrClosed, and Close waits for that. Breaking out of
// the loop early reads and drops the statement's remaining rows before
// the loop returns (the connection must be idle to be used again).
func (s *Store) Events(ctx context.Context, run history.RunRef, from int64) iter.Seq2[history.Event, error] {
	return func(yield func(history.Event, error) bool) {
		err := checkRun(run)
		if err == nil {
			err = s.enter(ctx)
		}
		if err != nil {
			yield(history.Event{}, err)
			return
		}
		defer s.gate.exit()
		stopped := errors.New("stopped")
		err = s.scanEvents(ctx, run, from, 0, func(data []byte, id int64) error {
			ev, err := history.DecodeEvent(data, run, id)
			if err != nil {
				return err
			}
			if !yield(ev, nil) {
				return stopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, stopped) {
			yield(history.Event{}, err)
		}
	}
}

// scanEvents reads run's events from..(from+limit-1) and passes each
// record to fn (data valid only during the call) until fn fails. A
// missing record, or one past the run's head, is a *history.CorruptError
// naming the event; an unknown run is history.ErrNotFound.
func (s *Store) scanEvents(ctx context.Context, run history.RunRef, from int64, limit int, fn func(data []byte, id int64) error) error {
	from = max(from, 1)
	end := int64(math.MaxInt64) // exclusive
	if limit > 0 && int64(limit) < end-from {
		end = from + int64(limit)
	}
	rows, err := s.pool.Query(ctx, sqlReadEvents, []byte(run.WorkflowID), []byte(run.RunID), from, end)
	if err != nil {
		return readError(ctx, "read events", err)
	}
	defer rows.Close()
	err = walkEvents(rows, run, from, end, s.interrupted(ctx), fn)
	if err == nil {
		err = rows.Err()
	}
	return readError(ctx, fmt.Sprintf("read events of workflow %q run %q", run.WorkflowID, run.RunID), err)
}

// walkEvents checks the rows of sqlReadEvents against the run's head:
// events from, from+1, … up to the head or end, none missing.
func walkEvents(rows pgx.Rows, run history.RunRef, from, end int64, interrupted func() error, fn func([]byte, int64) error) error {
	var next int64 // the run's next event id (its head)
	var id pgtype.Int8
	var data pgtype.DriverBytes
	want, found := from, false
	for rows.Next() {
		found = true
		if (want-from)%ctxCheckEvery == 0 {
			if err := interrupted(); err != nil {
				return err
			}
		}
		if err := rows.Scan(&next, &id, &data); err != nil {
			return err
		}
		if !id.Valid {
			break // no events in the range
		}
		switch {
		case id.Int64 >= next:
			return &history.CorruptError{Run: run, EventID: id.Int64,
				Reason: fmt.Sprintf("event record past the end of the history (next event %d)", next)}
		case id.Int64 != want:
			return missingEvent(run, want)
		}
		if err := fn(data, want); err != nil {
			return err
		}
		want++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: workflow %q run %q has no events", history.ErrNotFound, run.WorkflowID, run.RunID)
	}
	if want < min(next, end) {
		return missingEvent(run, want)
	}
	return nil
}

func missingEvent(run history.RunRef, id int64) error {
	return &history.CorruptError{Run: run, EventID: id, Reason: "event record missing"}
}

// interrupted returns the check a long read makes between events.
func (s *Store) interrupted(ctx context.Context) func() error {
	return func() error {
		if s.gate.isClosed() {
			return history.ErrClosed
		}
		return ctx.Err()
	}
}

// LastEventID returns the id of run's last event, or 0; see history.Store.
func (s *Store) LastEventID(ctx context.Context, run history.RunRef) (int64, error) {
	if err := checkRun(run); err != nil {
		return 0, err
	}
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	defer s.gate.exit()
	var next int64
	err := s.pool.QueryRow(ctx, "SELECT next_id FROM runs WHERE workflow_id = $1 AND run_id = $2",
		[]byte(run.WorkflowID), []byte(run.RunID)).Scan(&next)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, readError(ctx, "read the last event id", err)
	}
	return next - 1, nil
}

// Get returns a record's value or an error wrapping history.ErrNotFound.
// A damaged record is a *history.CorruptError naming space and key.
func (s *Store) Get(ctx context.Context, space history.Space, key []byte) ([]byte, error) {
	if err := checkRecordKey(space, key); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.exit()
	var sealed []byte
	err := s.pool.QueryRow(ctx, "SELECT value FROM records WHERE space = $1 AND key = $2", int16(space), key).Scan(&sealed)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("%w: %s key %x", history.ErrNotFound, space, key)
	case err != nil:
		return nil, readError(ctx, fmt.Sprintf("get %s key %x", space, key), err)
	}
	return history.UnsealRecord(history.RecordID(space, key), sealed)
}

// Scan returns the records of space selected by opts; see history.Store.
func (s *Store) Scan(ctx context.Context, space history.Space, opts history.ScanOptions) ([]history.Record, error) {
	if err := checkSpace(space); err != nil {
		return nil, err
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.exit()
	sql, args := scanQuery(space, opts)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, readError(ctx, fmt.Sprintf("scan %s", space), err)
	}
	var out []history.Record
	var key, sealed []byte
	_, err = pgx.ForEachRow(rows, []any{&key, &sealed}, func() error {
		v, err := history.UnsealRecord(history.RecordID(space, key), sealed)
		if err == nil {
			out = append(out, history.Record{Space: space, Key: key, Value: v})
		}
		return err
	})
	if err != nil {
		return nil, readError(ctx, fmt.Sprintf("scan %s", space), err)
	}
	return out, nil
}

// scanQuery builds the statement of a scan: a range of the space's keys
// bounded by the prefix and After, so that the primary key's index is
// walked from where the scan starts (forward or backward) to where it
// ends. Keys are bytea, compared byte by byte.
func scanQuery(space history.Space, opts history.ScanOptions) (string, []any) {
	args := []any{int16(space)}
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	where := "space = $1"
	lower, lowerOp := opts.Prefix, ">="
	upper := prefixEnd(opts.Prefix) // nil: no upper bound
	if opts.After != nil {
		if !opts.Reverse && bytes.Compare(opts.After, opts.Prefix) >= 0 {
			lower, lowerOp = opts.After, ">"
		}
		if opts.Reverse && (upper == nil || bytes.Compare(opts.After, upper) < 0) {
			upper = opts.After
		}
	}
	if len(lower) > 0 || lowerOp == ">" {
		where += " AND key " + lowerOp + " " + arg(nonNil(lower))
	}
	if upper != nil {
		where += " AND key < " + arg(upper)
	}
	order := "ASC"
	if opts.Reverse {
		order = "DESC"
	}
	sql := "SELECT key, value FROM records WHERE " + where + " ORDER BY key " + order
	if opts.Limit > 0 {
		sql += " LIMIT " + arg(int64(opts.Limit))
	}
	return sql, args
}

// nonNil makes an empty bound a non-NULL empty bytea.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// prefixEnd returns the smallest key greater than every key starting with
// p, or nil when there is none (p is empty or all 0xFF).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
