package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// A commit that fails may still have reached the disk: an I/O error while
// syncing, a reply lost on the way ("committed but reported as failed").
// The engine then cannot tell whether its runs moved on. Installing nothing
// (as before) left memory behind the store when the commit had in fact
// been applied: every later transaction of the run appended at an event id
// the store had already used, and failed, forever. So after a commit
// fails in a way that may hide its outcome, each run it touched is read
// back from the store — the truth either way — and adopted as a restart
// would (adopt). A run that cannot be read back now is marked, and read
// back before its next transaction.

// ambiguousCommit reports whether a failed commit may have been applied.
// The store's refusals that write nothing (a conflict, a malformed or
// oversized batch, a closed store) are not ambiguous.
func ambiguousCommit(err error) bool {
	return !errors.Is(err, history.ErrConflict) && !errors.Is(err, history.ErrInvalid) && !errors.Is(err, history.ErrTooLarge) &&
		!errors.Is(err, history.ErrClosed)
}

// resyncAll reads back every run of a transaction whose commit failed
// ambiguously. The caller holds their locks.
func (x *txn) resyncAll(ctx context.Context) {
	e := x.e
	for _, tr := range x.runs {
		if tr.entry != nil {
			_ = e.resync(ctx, tr.entry)
			continue
		}
		e.adoptCreated(ctx, tr.st.Ref())
	}
}

// resync reads an open run back from the store and adopts it. On failure
// the run stays marked (runEntry.resync) and the error is returned.
func (e *Engine) resync(ctx context.Context, entry *runEntry) error {
	ctx = context.WithoutCancel(ctx)
	st, err := e.recoverState(ctx, entry.ref)
	if err != nil {
		var d *runDamage
		if errors.As(err, &d) {
			entry.resync = false
			e.quarantineLocked(entry.ref, true, d.err.Error())
			return d.err
		}
		entry.resync = true
		e.log.Warn().Err(err).Str("workflow", entry.ref.WorkflowID).Str("run", entry.ref.RunID).
			Msg("a commit's outcome is unknown and the run cannot be read back yet; it is read back before its next transition")
		return fmt.Errorf("%w: workflow %q run %q: reading its state back after a failed commit: %w", api.ErrUnavailable,
			entry.ref.WorkflowID, entry.ref.RunID, err)
	}
	entry.resync = false
	if !st.Status.Open() {
		e.mu.Lock()
		if e.open[entry.ref.WorkflowID] == entry {
			delete(e.open, entry.ref.WorkflowID)
		}
		e.mu.Unlock()
		entry.state = st
		e.recent.Add(st.WorkflowID, st)
		e.limits.sync(entry.ref, nil)
	} else {
		e.adopt(entry, st)
	}
	close(entry.changed)
	entry.changed = make(chan struct{})
	e.watch.notify()
	return nil
}

// adoptCreated installs a run that a failed commit was creating, if the
// commit was in fact applied.
func (e *Engine) adoptCreated(ctx context.Context, ref history.RunRef) {
	b, err := e.store.Get(context.WithoutCancel(ctx), history.SpaceRunState, stateKey(ref))
	if err != nil {
		if !errors.Is(err, history.ErrNotFound) {
			e.log.Warn().Err(err).Str("workflow", ref.WorkflowID).Str("run", ref.RunID).
				Msg("a failed commit may have created this run, and it cannot be read back; it is served after a restart")
		}
		return
	}
	st, err := decodeState(b)
	if err != nil || !st.Status.Open() {
		return
	}
	entry := &runEntry{ref: ref, parent: st.Parent, changed: make(chan struct{})}
	e.mu.Lock()
	if e.open[ref.WorkflowID] != nil {
		e.mu.Unlock()
		return
	}
	e.open[ref.WorkflowID] = entry
	e.mu.Unlock()
	e.adopt(entry, st)
}

// resyncHeld reads back the marked runs among ids before a transaction
// uses them. The caller holds their locks.
func (e *Engine) resyncHeld(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if entry := e.openRun(id); entry != nil && entry.resync {
			if err := e.resync(ctx, entry); err != nil {
				return err
			}
		}
	}
	return nil
}
