// Package faultstore wraps a history.Store and makes chosen operations fail,
// for tests of what the layers above a store do with bad luck: an I/O
// error, a full disk, a damaged record, or a commit that reached the disk
// but was reported as failed (the reply was lost).
//
// A Rule names an operation, optionally narrows it to some calls with
// Match, and says what happens: the call fails without reaching the store
// (Before, the default), or it is performed and then reported as failed
// (After: for Commit, "committed but reported as failed").
//
//	fs := faultstore.New(badger)
//	remove := fs.Inject(faultstore.Rule{Op: faultstore.OpCommit, Err: faultstore.ErrDiskFull, Times: 1})
//	defer remove()
//	fs.Inject(faultstore.Rule{Op: faultstore.OpGet, Match: faultstore.SpaceIs(history.SpaceRunState),
//		Err: faultstore.Corrupt("bit flip")})
//	fs.Inject(faultstore.Rule{Op: faultstore.OpCommit, Mode: faultstore.After, Err: faultstore.ErrIO, Times: 1})
//
// With no rule injected a call costs one mutex and a slice walk; the
// wrapper is for tests and fault campaigns, not for production.
package faultstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"syscall"

	"github.com/cairnflow/cairn/history"
)

// Op names a Store method.
type Op uint8

// The operations a rule can target.
const (
	OpCommit Op = iota + 1
	OpReadEvents
	OpEvents
	OpLastEventID
	OpGet
	OpScan
	// OpRuns is history.RunLister's Runs.
	OpRuns
	opCount
)

var opNames = [opCount]string{"?", "Commit", "ReadEvents", "Events", "LastEventID", "Get", "Scan", "Runs"}

// String returns the method's name.
func (o Op) String() string {
	if o < opCount {
		return opNames[o]
	}
	return "?"
}

// Mode says when an injected failure happens.
type Mode uint8

const (
	// Before: the call fails without reaching the wrapped store.
	Before Mode = iota
	// After: the call is performed, then reported as failed. For Commit this
	// is "committed but reported as failed": the batch is durable, the
	// caller hears an error.
	After
)

// Injected errors. Each wraps the errno a real disk would give, so code
// that checks errors.Is(err, syscall.ENOSPC) sees a full disk.
var (
	// ErrIO is an I/O error (EIO).
	ErrIO = fmt.Errorf("faultstore: injected I/O error: %w", syscall.EIO)
	// ErrDiskFull is a full disk: history.ErrNoSpace, as a store reports
	// it, wrapping ENOSPC.
	ErrDiskFull = fmt.Errorf("faultstore: injected: %w: %w", history.ErrNoSpace, syscall.ENOSPC)
)

// Corrupt returns a damaged-record error (matching history.ErrCorrupt).
func Corrupt(reason string) error {
	return &history.CorruptError{Reason: "injected: " + reason}
}

// Call describes one call to the store, for Rule.Match.
type Call struct {
	Op Op
	// Batch is Commit's batch.
	Batch *history.Batch
	// Run is the run of ReadEvents, Events and LastEventID.
	Run history.RunRef
	// From is the first event id of ReadEvents and Events.
	From int64
	// Space and Key are Get's (Space also Scan's).
	Space history.Space
	Key   []byte
	// Scan is Scan's options.
	Scan history.ScanOptions
}

// Rule is one injected fault.
type Rule struct {
	// Op is the operation the rule targets (required).
	Op Op
	// Match narrows the rule to some calls (nil: every call of Op).
	Match func(*Call) bool
	// Err is what the failing call returns (default ErrIO). For Get and
	// ReadEvents a *history.CorruptError that names no place is completed
	// with the call's space and key, or run and first event.
	Err error
	// Mode says whether the call is performed before it is reported as
	// failed (default Before).
	Mode Mode
	// Skip lets this many matching calls through before the rule fires.
	Skip int
	// Times is how many matching calls fail (0: every one, until removed).
	Times int
}

type rule struct {
	Rule
	seen, fired int
}

// Store is a history.Store that fails the calls its rules select and passes
// every other call to the wrapped store.
type Store struct {
	inner history.Store

	mu    sync.Mutex
	rules []*rule
	calls [opCount]int
	fails [opCount]int
	// onCall, when set, is called (outside the lock) before every call
	// reaches a rule (see OnCall).
	onCall func(*Call)
	killed error // set by Kill: every call fails with it
}

var (
	_ history.Store     = (*Store)(nil)
	_ history.RunLister = (*Store)(nil)
)

// New wraps inner.
func New(inner history.Store) *Store { return &Store{inner: inner} }

// Inner returns the wrapped store.
func (s *Store) Inner() history.Store { return s.inner }

// Inject adds a rule; the returned function removes it.
func (s *Store) Inject(r Rule) (remove func()) {
	if r.Err == nil {
		r.Err = ErrIO
	}
	rr := &rule{Rule: r}
	s.mu.Lock()
	s.rules = append(s.rules, rr)
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, x := range s.rules {
			if x == rr {
				s.rules = append(s.rules[:i], s.rules[i+1:]...)
				return
			}
		}
	}
}

// Kill makes every later call fail with err (default history.ErrClosed),
// as if the process had died at this instant: nothing more reaches the
// wrapped store. Revive undoes it.
func (s *Store) Kill(err error) {
	if err == nil {
		err = fmt.Errorf("faultstore: killed: %w", history.ErrClosed)
	}
	s.mu.Lock()
	s.killed = err
	s.mu.Unlock()
}

// Revive undoes Kill.
func (s *Store) Revive() {
	s.mu.Lock()
	s.killed = nil
	s.mu.Unlock()
}

// Clear removes every rule.
func (s *Store) Clear() {
	s.mu.Lock()
	s.rules = nil
	s.mu.Unlock()
}

// OnCall sets a function called before every call reaches a rule (nil:
// none); tests use it to park a call or to observe the order of calls.
func (s *Store) OnCall(fn func(*Call)) {
	s.mu.Lock()
	s.onCall = fn
	s.mu.Unlock()
}

// Calls returns how many calls of op were made.
func (s *Store) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Failures returns how many calls of op a rule failed.
func (s *Store) Failures(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fails[op]
}

// decide returns the rule that fails c, if any.
func (s *Store) decide(c *Call) *rule {
	s.mu.Lock()
	s.calls[c.Op]++
	hook := s.onCall
	s.mu.Unlock()
	if hook != nil {
		hook(c)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.killed != nil {
		s.fails[c.Op]++
		return &rule{Rule: Rule{Op: c.Op, Err: s.killed}}
	}
	for _, r := range s.rules {
		if r.Op != c.Op || (r.Match != nil && !r.Match(c)) {
			continue
		}
		r.seen++
		if r.seen <= r.Skip || (r.Times > 0 && r.fired >= r.Times) {
			continue
		}
		r.fired++
		s.fails[c.Op]++
		return r
	}
	return nil
}

// fault returns the error a rule fires with, completing a bare corruption
// error with where the call looked.
func fault(r *rule, c *Call) error {
	var ce *history.CorruptError
	if errors.As(r.Err, &ce) && ce.Run == (history.RunRef{}) && ce.Key == nil && ce.EventID == 0 {
		cp := *ce
		cp.Run, cp.EventID, cp.Space, cp.Key = c.Run, c.From, c.Space, bytes.Clone(c.Key)
		return &cp
	}
	return r.Err
}

// Commit implements history.Store.
func (s *Store) Commit(ctx context.Context, b *history.Batch) error {
	c := &Call{Op: OpCommit, Batch: b}
	r := s.decide(c)
	if r == nil {
		return s.inner.Commit(ctx, b)
	}
	if r.Mode == After {
		if err := s.inner.Commit(ctx, b); err != nil {
			return err
		}
	}
	return fault(r, c)
}

// ReadEvents implements history.Store.
func (s *Store) ReadEvents(ctx context.Context, run history.RunRef, from int64, limit int) ([]history.Event, error) {
	c := &Call{Op: OpReadEvents, Run: run, From: from}
	r := s.decide(c)
	if r == nil {
		return s.inner.ReadEvents(ctx, run, from, limit)
	}
	if r.Mode == After {
		if _, err := s.inner.ReadEvents(ctx, run, from, limit); err != nil {
			return nil, err
		}
	}
	return nil, fault(r, c)
}

// Events implements history.Store.
func (s *Store) Events(ctx context.Context, run history.RunRef, from int64) iter.Seq2[history.Event, error] {
	c := &Call{Op: OpEvents, Run: run, From: from}
	r := s.decide(c)
	if r == nil {
		return s.inner.Events(ctx, run, from)
	}
	return func(yield func(history.Event, error) bool) {
		yield(history.Event{}, fault(r, c))
	}
}

// LastEventID implements history.Store.
func (s *Store) LastEventID(ctx context.Context, run history.RunRef) (int64, error) {
	c := &Call{Op: OpLastEventID, Run: run}
	if r := s.decide(c); r != nil {
		return 0, fault(r, c)
	}
	return s.inner.LastEventID(ctx, run)
}

// Get implements history.Store.
func (s *Store) Get(ctx context.Context, space history.Space, key []byte) ([]byte, error) {
	c := &Call{Op: OpGet, Space: space, Key: key}
	if r := s.decide(c); r != nil {
		return nil, fault(r, c)
	}
	return s.inner.Get(ctx, space, key)
}

// Scan implements history.Store.
func (s *Store) Scan(ctx context.Context, space history.Space, opts history.ScanOptions) ([]history.Record, error) {
	c := &Call{Op: OpScan, Space: space, Scan: opts}
	if r := s.decide(c); r != nil {
		return nil, fault(r, c)
	}
	return s.inner.Scan(ctx, space, opts)
}

// Runs implements history.RunLister when the wrapped store does; when it
// does not, Runs returns an error wrapping errors.ErrUnsupported.
func (s *Store) Runs(ctx context.Context, after *history.RunRef, limit int) ([]history.RunRef, error) {
	c := &Call{Op: OpRuns}
	if r := s.decide(c); r != nil {
		return nil, fault(r, c)
	}
	rl, ok := s.inner.(history.RunLister)
	if !ok {
		return nil, fmt.Errorf("faultstore: the wrapped %T cannot list its runs: %w", s.inner, errors.ErrUnsupported)
	}
	return rl.Runs(ctx, after, limit)
}

// Close implements history.Store; it closes the wrapped store.
func (s *Store) Close() error { return s.inner.Close() }

// SpaceIs matches Get and Scan calls on space.
func SpaceIs(space history.Space) func(*Call) bool {
	return func(c *Call) bool { return c.Space == space }
}

// KeyIs matches Get calls on one record.
func KeyIs(space history.Space, key []byte) func(*Call) bool {
	return func(c *Call) bool { return c.Space == space && bytes.Equal(c.Key, key) }
}

// RunIs matches event reads of one run, and commits that append to it.
func RunIs(run history.RunRef) func(*Call) bool {
	return func(c *Call) bool {
		if c.Batch != nil {
			for _, a := range c.Batch.Appends {
				if a.Run == run {
					return true
				}
			}
			return false
		}
		return c.Run == run
	}
}

// WorkflowIs matches event reads of any run of a workflow id, and commits
// that append to one.
func WorkflowIs(workflowID string) func(*Call) bool {
	return func(c *Call) bool {
		if c.Batch != nil {
			for _, a := range c.Batch.Appends {
				if a.Run.WorkflowID == workflowID {
					return true
				}
			}
			return false
		}
		return c.Run.WorkflowID == workflowID
	}
}

// Reclaim passes through to the wrapped store when it is a
// history.Reclaimer (and does nothing otherwise).
func (s *Store) Reclaim(ctx context.Context) error {
	if r, ok := s.inner.(history.Reclaimer); ok {
		return r.Reclaim(ctx)
	}
	return nil
}
