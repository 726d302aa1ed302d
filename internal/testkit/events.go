package testkit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// ErrRunClosed is the error of a wait for an event of a run that closed
// without one.
var ErrRunClosed = errors.New("the run closed first")

// NextEvent follows the history of a run (runID "" for the workflow's
// current run) with long polls, from its first event, until match holds
// for an event, and returns that event. Its error wraps ErrRunClosed
// when the run closed without one, or the context's error (the wait is
// bounded by ctx, by WaitTimeout when it has no deadline), or the
// service's. It does not fail the test, and may be called from any
// goroutine.
func NextEvent(ctx context.Context, svc api.Service, workflowID, runID string, match func(history.Event) bool) (history.Event, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	from := int64(1)
	for {
		resp, err := svc.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: workflowID, RunID: runID, FromEventID: from, WaitNewEvents: true})
		if err == nil {
			err = ctx.Err() // a transport may answer an ended long poll with no events and no error
		}
		if err != nil {
			return history.Event{}, fmt.Errorf("history of %s: %w", workflowID, err)
		}
		for _, ev := range resp.Events {
			if match(ev) {
				return ev, nil
			}
		}
		from += int64(len(resp.Events))
		if resp.Closed && from >= resp.NextEventID {
			return history.Event{}, fmt.Errorf("history of %s: %w", workflowID, ErrRunClosed)
		}
	}
}

// WaitEvent is NextEvent that fails the test, saying it waited for what,
// when no event matches.
func WaitEvent(ctx context.Context, t testing.TB, svc api.Service, workflowID, runID, what string, match func(history.Event) bool) history.Event {
	t.Helper()
	ev, err := NextEvent(ctx, svc, workflowID, runID, match)
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return ev
}

// EventOfType matches the events of type typ.
func EventOfType(typ history.EventType) func(history.Event) bool {
	return func(ev history.Event) bool { return ev.Type() == typ }
}
