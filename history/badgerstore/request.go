package badgerstore

import (
	"fmt"

	"github.com/cairnflow/cairn/history"
)

// request is one Commit call on its way through the committer: the batch,
// validated and encoded by the caller's goroutine, and the channel that
// carries its outcome back.
type request struct {
	appends []appendCheck
	deletes []runDelete
	conds   []condCheck
	writes  []write
	size    int64      // bytes of keys and values in writes
	done    chan error // buffered; receives exactly one outcome
	state   reqState   // guarded by queue.mu
}

// appendCheck is an Append's optimistic-concurrency check.
type appendCheck struct {
	run          history.RunRef
	head         []byte // the run's identity in the heads cache (headKey)
	expectedNext int64
	last         int64 // the run's last event id after the append
}

// runDelete is one of Batch.DeleteRuns. last is the run's last event id
// as the committer saw it when it admitted the request (check): apply
// deletes events 1..last.
type runDelete struct {
	run          history.RunRef
	head, prefix []byte
	last         int64
}

// condCheck is a Condition with its Badger key.
type condCheck struct {
	history.Condition
	key []byte
}

// write is one key to set (or delete) when the batch is accepted.
type write struct {
	key, value []byte
	del        bool
}

// finish delivers the request's outcome.
func (r *request) finish(err error) { r.done <- err }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", history.ErrInvalid, fmt.Sprintf(format, args...))
}

// prepare validates b without touching the database (see history.Batch for
// the rules) and encodes everything it will write. Errors wrap
// history.ErrInvalid or history.ErrTooLarge.
func (s *Store) prepare(b *history.Batch) (*request, error) {
	if b == nil {
		return nil, invalidf("nil batch")
	}
	if len(b.Fences) > 0 {
		// One process owns the directory: there are no shard leases
		// whose epochs a fence could check.
		return nil, invalidf("badgerstore has no shard leases: a batch with %d fences cannot be checked", len(b.Fences))
	}
	r := &request{done: make(chan error, 1)}
	seen := newKeySet(len(b.Appends) + len(b.Puts) + len(b.Deletes) + len(b.DeleteRuns))
	for i := range b.Appends {
		if err := s.prepareAppend(r, &b.Appends[i], seen); err != nil {
			return nil, fmt.Errorf("badgerstore: append %d: %w", i, err)
		}
	}
	for i, run := range b.DeleteRuns {
		if err := checkRun(run); err != nil {
			return nil, fmt.Errorf("badgerstore: delete run %d: %w", i, err)
		}
		head, prefix := runKeys(run)
		if !seen.add(head) {
			return nil, fmt.Errorf("badgerstore: delete run %d: %w", i,
				invalidf("workflow %q run %q is appended to or deleted twice in one batch", run.WorkflowID, run.RunID))
		}
		r.deletes = append(r.deletes, runDelete{run: run, head: head, prefix: prefix})
	}
	for i, c := range b.Conditions {
		if err := checkRecordKey(c.Space, c.Key); err != nil {
			return nil, fmt.Errorf("badgerstore: condition %d: %w", i, err)
		}
		r.conds = append(r.conds, condCheck{Condition: c, key: recordKey(c.Space, c.Key)})
	}
	for i, p := range b.Puts {
		if err := s.addRecordWrite(r, p.Space, p.Key, p.Value, false, seen); err != nil {
			return nil, fmt.Errorf("badgerstore: put %d: %w", i, err)
		}
	}
	for i, d := range b.Deletes {
		if err := s.addRecordWrite(r, d.Space, d.Key, nil, true, seen); err != nil {
			return nil, fmt.Errorf("badgerstore: delete %d: %w", i, err)
		}
	}
	return r, nil
}

// prepareAppend checks one Append and adds its event records to r.
func (s *Store) prepareAppend(r *request, a *history.Append, seen keySet) error {
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
	head, prefix := runKeys(a.Run)
	if !seen.add(head) {
		return invalidf("workflow %q run %q: appended to twice in one batch", a.Run.WorkflowID, a.Run.RunID)
	}
	values, err := encodeEvents(a)
	if err != nil {
		return err
	}
	for i, v := range values {
		if err := s.checkValueLen(v); err != nil {
			return fmt.Errorf("event %d: %w", a.Events[i].ID, err)
		}
		r.add(write{key: eventKey(prefix, a.Events[i].ID), value: v})
	}
	last := a.ExpectedNext + int64(len(a.Events)) - 1
	r.appends = append(r.appends, appendCheck{run: a.Run, head: head, expectedNext: a.ExpectedNext, last: last})
	return nil
}

// encodeEvents checks that a's events are numbered from ExpectedNext and
// encodes them into one buffer, returning one slice per event.
func encodeEvents(a *history.Append) ([][]byte, error) {
	var buf []byte
	ends := make([]int, len(a.Events))
	for i, ev := range a.Events {
		if want := a.ExpectedNext + int64(i); ev.ID != want {
			return nil, invalidf("workflow %q run %q: event %d is numbered %d",
				a.Run.WorkflowID, a.Run.RunID, want, ev.ID)
		}
		var err error
		if buf, err = history.AppendEvent(buf, ev); err != nil {
			return nil, err
		}
		ends[i] = len(buf)
	}
	values := make([][]byte, len(a.Events))
	start := 0
	for i, end := range ends {
		values[i] = buf[start:end:end]
		start = end
	}
	return values, nil
}

// addRecordWrite checks and adds one Put or Delete.
func (s *Store) addRecordWrite(r *request, sp history.Space, key, value []byte, del bool, seen keySet) error {
	if err := checkRecordKey(sp, key); err != nil {
		return err
	}
	if err := s.checkValueLen(value); err != nil {
		return fmt.Errorf("%s key %x: %w", sp, key, err)
	}
	k := recordKey(sp, key)
	if !seen.add(k) {
		return invalidf("%s key %x is written twice in one batch", sp, key)
	}
	if !del {
		value = seal(k, value)
	}
	r.add(write{key: k, value: value, del: del})
	return nil
}

func (r *request) add(w write) {
	r.writes = append(r.writes, w)
	r.size += int64(len(w.key) + len(w.value))
}

// checkValueLen refuses values Badger cannot store.
func (s *Store) checkValueLen(v []byte) error {
	if int64(len(v)) >= s.maxValueLen {
		return fmt.Errorf("%w: value of %d bytes (limit %d)", history.ErrTooLarge, len(v), s.maxValueLen-1)
	}
	return nil
}

func checkRun(run history.RunRef) error {
	if run.WorkflowID == "" || run.RunID == "" {
		return invalidf("empty workflow or run id (%q, %q)", run.WorkflowID, run.RunID)
	}
	// Escaping can double an id's length in a key.
	if 2*(len(run.WorkflowID)+len(run.RunID)) > maxKeyLen-32 {
		return invalidf("workflow and run ids of %d bytes are too long", len(run.WorkflowID)+len(run.RunID))
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
	if len(key) > maxKeyLen {
		return invalidf("key of %d bytes in space %s (limit %d)", len(key), sp, maxKeyLen)
	}
	return nil
}

// keySet finds keys written twice in one batch. It is nil when the batch
// has at most one key to write, which is the common case.
type keySet map[string]struct{}

func newKeySet(n int) keySet {
	if n <= 1 {
		return nil
	}
	return make(keySet, n)
}

// add reports false when key was added before.
func (s keySet) add(key []byte) bool {
	if s == nil {
		return true
	}
	if _, dup := s[string(key)]; dup {
		return false
	}
	s[string(key)] = struct{}{}
	return true
}
