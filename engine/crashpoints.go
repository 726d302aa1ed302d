package engine

import (
	"context"
	"runtime"
	"strings"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/crashpoint"
)

// Crash points (package internal/crashpoint): every durable commit the
// engine makes passes "<name>.before" just before the store commit and
// "<name>.after" just after it returns successfully (before anything is
// installed in memory or answered). <name> is the API method whose
// transaction it is (StartWorkflow, CompleteWorkflowTask, PollActivityTask
// for an attempt's recorded intent, CompleteActivity, …), or, for work the
// engine does by itself, the function doing it (fire for deadlines,
// failParent, persistQuarantine, Open for the boot record, Doubt for the
// doubt after a recovery of the store, doubt.go). Off, a commit pays one
// atomic load.

// storeCommit commits b to the store, passing the crash points of the
// commit. Every commit of the engine goes through it (Engine.commit).
func (e *Engine) storeCommit(ctx context.Context, b *history.Batch) error {
	return e.storeCommitAs(ctx, "", b)
}

// storeCommitAs is storeCommit under the crash points of name (""
// names them after the caller, as storeCommit does).
func (e *Engine) storeCommitAs(ctx context.Context, name string, b *history.Batch) error {
	if !crashpoint.Enabled() {
		return e.store.Commit(ctx, b)
	}
	point := name
	if point == "" {
		point = commitPoint()
	}
	crashpoint.Hit(point + crashpoint.Before)
	err := e.store.Commit(ctx, b)
	if err == nil {
		crashpoint.Hit(point + crashpoint.After)
	}
	return err
}

const enginePkg = "github.com/cairnflow/cairn/engine."

// commitHelpers are the functions between a commit and the code that
// decided it.
var commitHelpers = map[string]bool{"storeCommit": true, "storeCommitAs": true, "commit": true, "commitAs": true, "commitFenced": true,
	"tryBumpBoot": true, "transact": true, "transactLocked": true,
	"background": true, "onOpenRun": true, "onActivity": true,
	"startLocal": true, "startAction": true, "act": true, "drainBuffer": true, "tick": true}

// commitPoint names the commit being made: the outermost exported method
// of the engine on the stack, else the innermost engine function that is
// not a helper.
func commitPoint() string {
	pcs := make([]uintptr, 32)
	n := runtime.Callers(3, pcs)
	frames := runtime.CallersFrames(pcs[:n])
	inner, outer := "", ""
	for {
		f, more := frames.Next()
		name, ok := strings.CutPrefix(f.Function, enginePkg)
		if ok && !strings.HasPrefix(name, "internal") {
			name = name[strings.LastIndex(name, ".")+1:] // (*Engine).Method → Method
			if strings.HasPrefix(name, "func") {         // a closure: name it by its function
				name = ""
			}
			if name != "" && !commitHelpers[name] {
				if inner == "" {
					inner = name
				}
				if name[0] >= 'A' && name[0] <= 'Z' {
					outer = name
				}
			}
		}
		if !more {
			break
		}
	}
	if outer != "" {
		return outer
	}
	return inner
}
