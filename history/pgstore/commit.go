package pgstore

import (
	"context"
	"time"

	"github.com/cairnflow/cairn/history"
)

// Commit applies the batch atomically and durably; see history.Store.
//
// Group commit: Commit validates and encodes the batch in the caller's
// goroutine, queues it and waits. One committer goroutine takes every
// queued batch and commits as many as it can in one Postgres transaction
// (a group; see commitGroup), then answers each caller with its own
// outcome: nil, ErrConflict or ErrFenced for exactly the batches whose
// checks failed, or the group's failure. A failure after COMMIT was sent
// (the connection dropped, the answer never came) is ErrCommitUnknown:
// the batch may be written.
//
// Cancellation: if ctx ends while the batch is still queued, Commit returns
// ctx.Err() and the batch is never written. Once the committer has taken
// it, Commit waits for the outcome (the committer's own CommitTimeout
// bounds it), so a nil error always means durable and ctx.Err() always
// means not written.
func (s *Store) Commit(ctx context.Context, b *history.Batch) error {
	if err := s.gate.enter(); err != nil {
		return err
	}
	defer s.gate.exit()
	if err := ctx.Err(); err != nil {
		return err
	}
	r, err := s.prepare(b)
	if err != nil {
		return err
	}
	if r.nothing() {
		return nil
	}
	s.queue.push(r)
	return s.wait(ctx, r)
}

// wait returns r's outcome, or ctx.Err() if ctx ends before the committer
// took r.
func (s *Store) wait(ctx context.Context, r *request) error {
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
	}
	if s.queue.cancel(r) {
		return ctx.Err()
	}
	return <-r.done
}

// commitLoop is the committer goroutine. It runs until Close stops the
// queue and everything queued is answered.
func (s *Store) commitLoop() {
	defer close(s.loopDone)
	var carry []*request // taken, but left for a later group
	var last int         // batches in the previous group
	var took time.Duration
	for {
		reqs, ok := s.queue.take(len(carry) == 0, last, min(s.opts.CommitLinger, took))
		if !ok && len(carry) == 0 {
			return
		}
		var group []*request
		group, carry = s.formGroup(append(carry, reqs...))
		start := time.Now()
		s.commitGroup(group)
		last, took = len(group), time.Since(start)
	}
}

// formGroup picks, in queue order, the requests the next transaction
// carries, and returns the others (in order) for a later one. A request
// with conditions commits alone (its transaction is serializable, see
// round); a request appending to a run already in the group waits for
// the next one (the run's compare-and-set is one row per statement); the
// group stops at Options.MaxGroupBatches and MaxGroupBytes.
func (s *Store) formGroup(pending []*request) (group, rest []*request) {
	if len(pending) > 0 && len(pending[0].conds) > 0 {
		return pending[:1], pending[1:]
	}
	runs := make(map[runKey]bool)
	var bytes int64
	for i, r := range pending {
		full := len(group) >= s.opts.MaxGroupBatches || bytes >= s.opts.MaxGroupBytes
		if full || len(r.conds) > 0 || touchesAny(r, runs) {
			rest = append(rest, pending[i])
			continue
		}
		for _, a := range r.appends {
			runs[a.key] = true
		}
		for _, k := range r.deletes {
			runs[k] = true
		}
		bytes += r.size
		group = append(group, r)
	}
	return group, rest
}

// touchesAny reports whether r appends to or deletes one of runs.
func touchesAny(r *request, runs map[runKey]bool) bool {
	for _, a := range r.appends {
		if runs[a.key] {
			return true
		}
	}
	for _, k := range r.deletes {
		if runs[k] {
			return true
		}
	}
	return false
}

// maxRetries bounds the rounds a group runs again after the database gave
// up on them (serialization failure, deadlock).
const maxRetries = 8

// commitGroup commits members in one transaction and answers every one of
// them. A round whose checks fail for some members (conflict, fence)
// answers those and runs again without them; a round that fails for a
// reason no check names is, when the failure may come from one batch's
// data, split into one transaction per member, so that every caller gets
// its own outcome.
func (s *Store) commitGroup(members []*request) {
	retries := 0
	for len(members) > 0 {
		out := s.round(members)
		switch {
		case out.committed:
			s.stats.commits.Add(1)
			s.answer(members, nil)
			return
		case len(out.guilty) > 0:
			members = s.answerGuilty(members, out.guilty)
		case retryable(out.err) && retries < maxRetries:
			retries++
			s.stats.retries.Add(1)
		case len(members) > 1 && attributable(out.err):
			for _, m := range members {
				s.commitGroup([]*request{m})
			}
			return
		default:
			s.answer(members, out.mapped())
			return
		}
	}
}

// answerGuilty answers the members named in guilty and returns the others.
func (s *Store) answerGuilty(members []*request, guilty map[int]error) []*request {
	rest := members[:0:0]
	for i, m := range members {
		if err, ok := guilty[i]; ok {
			s.answer([]*request{m}, err)
		} else {
			rest = append(rest, m)
		}
	}
	return rest
}

// answer delivers err to every request in rs. The first answer of a group
// marks the queue: the callers answered from here on are the ones the
// next take lingers for.
func (s *Store) answer(rs []*request, err error) {
	s.queue.markReplies()
	for _, r := range rs {
		s.stats.count(err)
		r.finish(err)
	}
}
