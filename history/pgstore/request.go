package pgstore

import (
	"bytes"
	"fmt"

	"github.com/cairnflow/cairn/history"
)

// request is one Commit call on its way through the committer: the batch,
// validated and encoded by the caller's goroutine, and the channel that
// carries its outcome back.
type request struct {
	appends []appendReq
	deletes []runKey // Batch.DeleteRuns
	conds   []history.Condition
	writes  []recWrite
	fences  []history.Fence
	size    int64      // bytes of ids, keys and values
	done    chan error // buffered; receives exactly one outcome
	state   reqState   // guarded by queue.mu
}

// appendReq is one Append, encoded.
type appendReq struct {
	run      history.RunRef
	key      runKey
	wf, rid  []byte
	expected int64 // the id of its first event
	next     int64 // the run's next id once it is written
	data     [][]byte
}

// runKey names a run in maps.
type runKey struct{ wf, run string }

// recWrite is one record to upsert (value sealed) or delete.
type recWrite struct {
	space history.Space
	key   []byte
	value []byte
	del   bool
}

// recKey names a record in maps.
type recKey struct {
	space history.Space
	key   string
}

// finish delivers the request's outcome.
func (r *request) finish(err error) { r.done <- err }

// nothing reports whether the request neither writes nor checks anything.
func (r *request) nothing() bool {
	return len(r.appends) == 0 && len(r.writes) == 0 && len(r.conds) == 0 && len(r.fences) == 0 && len(r.deletes) == 0
}

// prepare validates b without touching the database (see history.Batch for
// the rules) and encodes everything it will write. Errors wrap
// history.ErrInvalid or history.ErrTooLarge.
func (s *Store) prepare(b *history.Batch) (*request, error) {
	if b == nil {
		return nil, invalidf("nil batch")
	}
	r := &request{done: make(chan error, 1)}
	runs := make(map[runKey]bool, len(b.Appends))
	for i := range b.Appends {
		if err := r.addAppend(&b.Appends[i], runs); err != nil {
			return nil, fmt.Errorf("pgstore: append %d: %w", i, err)
		}
	}
	for i, run := range b.DeleteRuns {
		if err := checkRun(run); err != nil {
			return nil, fmt.Errorf("pgstore: delete run %d: %w", i, err)
		}
		key := runKey{run.WorkflowID, run.RunID}
		if runs[key] {
			return nil, fmt.Errorf("pgstore: delete run %d: %w", i,
				invalidf("workflow %q run %q is appended to or deleted twice in one batch", run.WorkflowID, run.RunID))
		}
		runs[key] = true
		r.deletes = append(r.deletes, key)
		r.size += int64(len(run.WorkflowID) + len(run.RunID))
	}
	for i, c := range b.Conditions {
		if err := checkRecordKey(c.Space, c.Key); err != nil {
			return nil, fmt.Errorf("pgstore: condition %d: %w", i, err)
		}
		r.conds = append(r.conds, c)
	}
	seen := make(map[recKey]bool, len(b.Puts)+len(b.Deletes))
	for i, p := range b.Puts {
		if err := r.addWrite(p.Space, p.Key, p.Value, false, seen); err != nil {
			return nil, fmt.Errorf("pgstore: put %d: %w", i, err)
		}
	}
	for i, d := range b.Deletes {
		if err := r.addWrite(d.Space, d.Key, nil, true, seen); err != nil {
			return nil, fmt.Errorf("pgstore: delete %d: %w", i, err)
		}
	}
	for i, f := range b.Fences {
		if f.Shard < 0 || f.Shard >= s.shards {
			return nil, fmt.Errorf("pgstore: fence %d: %w", i, invalidf("shard %d outside 0..%d", f.Shard, s.shards-1))
		}
		r.fences = append(r.fences, f)
	}
	if r.size > s.opts.MaxBatchBytes {
		return nil, fmt.Errorf("%w: pgstore: a batch of %d bytes (limit %d, Options.MaxBatchBytes)",
			history.ErrTooLarge, r.size, s.opts.MaxBatchBytes)
	}
	return r, nil
}

// addAppend checks one Append and encodes its events.
func (r *request) addAppend(a *history.Append, runs map[runKey]bool) error {
	if err := checkRun(a.Run); err != nil {
		return err
	}
	if a.ExpectedNext < 1 {
		return invalidf("workflow %q run %q: expected next event %d must be at least 1",
			a.Run.WorkflowID, a.Run.RunID, a.ExpectedNext)
	}
	if len(a.Events) == 0 {
		return invalidf("workflow %q run %q: no events", a.Run.WorkflowID, a.Run.RunID)
	}
	key := runKey{a.Run.WorkflowID, a.Run.RunID}
	if runs[key] {
		return invalidf("workflow %q run %q: appended to twice in one batch", a.Run.WorkflowID, a.Run.RunID)
	}
	runs[key] = true
	ar := appendReq{run: a.Run, key: key, wf: []byte(a.Run.WorkflowID), rid: []byte(a.Run.RunID),
		expected: a.ExpectedNext, next: a.ExpectedNext + int64(len(a.Events)), data: make([][]byte, len(a.Events))}
	var buf []byte
	ends := make([]int, len(a.Events))
	for i, ev := range a.Events {
		if want := a.ExpectedNext + int64(i); ev.ID != want {
			return invalidf("workflow %q run %q: event %d is numbered %d", a.Run.WorkflowID, a.Run.RunID, want, ev.ID)
		}
		var err error
		if buf, err = history.AppendEvent(buf, ev); err != nil {
			return err
		}
		ends[i] = len(buf)
	}
	start := 0
	for i, end := range ends {
		ar.data[i] = buf[start:end:end]
		start = end
	}
	r.size += int64(len(buf) + len(a.Events)*(len(ar.wf)+len(ar.rid)+8))
	r.appends = append(r.appends, ar)
	return nil
}

// addWrite checks and adds one Put or Delete.
func (r *request) addWrite(sp history.Space, key, value []byte, del bool, seen map[recKey]bool) error {
	if err := checkRecordKey(sp, key); err != nil {
		return err
	}
	k := recKey{sp, string(key)}
	if seen[k] {
		return invalidf("%s key %x is written twice in one batch", sp, key)
	}
	seen[k] = true
	w := recWrite{space: sp, key: bytes.Clone(key), del: del}
	if !del {
		w.value = history.SealRecord(history.RecordID(sp, key), value)
	}
	r.size += int64(len(key) + len(w.value))
	r.writes = append(r.writes, w)
	return nil
}

func checkRun(run history.RunRef) error {
	if run.WorkflowID == "" || run.RunID == "" {
		return invalidf("empty workflow or run id (%q, %q)", run.WorkflowID, run.RunID)
	}
	if n := len(run.WorkflowID) + len(run.RunID); n > MaxRunIDLen {
		return invalidf("workflow and run ids of %d bytes (limit %d)", n, MaxRunIDLen)
	}
	return nil
}

func checkSpace(sp history.Space) error {
	if !sp.Valid() {
		return invalidf("unknown space %d", uint8(sp))
	}
	return nil
}

func checkRecordKey(sp history.Space, key []byte) error {
	if err := checkSpace(sp); err != nil {
		return err
	}
	if len(key) == 0 {
		return invalidf("empty key in space %s", sp)
	}
	if len(key) > MaxKeyLen {
		return invalidf("key of %d bytes in space %s (limit %d)", len(key), sp, MaxKeyLen)
	}
	return nil
}
