package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
)

// reconnector repeats a command's waits on the server while the server
// cannot be reached — it restarts, the connection broke — so that result,
// execute, watch and show --follow keep waiting through a restart, bounded
// only by their context (Ctrl-C, --timeout). It says on stderr (not with
// --json) when it lost the server and when it has it back.
type reconnector struct {
	g        *globals
	down     bool
	failures int
}

// Reconnect backoff: the first retry after minBackoff, doubling up to
// maxBackoff.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// do runs call, again after a pause each time it fails because the server
// cannot be reached, until it succeeds, fails otherwise, or ctx ends.
func (r *reconnector) do(ctx context.Context, call func(context.Context) error) error {
	for {
		err := call(ctx)
		if err == nil || !errors.Is(err, api.ErrUnavailable) || ctx.Err() != nil {
			if err == nil && r.down {
				r.note("cairn: reconnected to %s after %d failed attempts", r.g.address, r.failures)
				r.down, r.failures = false, 0
			}
			return err
		}
		if !r.down {
			r.note("cairn: lost the server (%v); reconnecting until it answers (Ctrl-C stops; --timeout bounds the wait)", err)
			r.down = true
		}
		r.failures++
		if err := pause(ctx, min(minBackoff<<min(r.failures-1, 5), maxBackoff)); err != nil {
			return err
		}
	}
}

func (r *reconnector) note(format string, args ...any) {
	if !r.g.json {
		fmt.Fprintf(r.g.stderr, format+"\n", args...)
	}
}

// pause waits d, or until ctx ends (its error).
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
