package sdk

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Tally adds what its "add" updates bring (99 after a minute's sleep)
// and returns the sum once a "close" update came and every handler
// finished.
func Tally(ctx Context, _ string) (int, error) {
	total, closing := 0, false
	if err := SetUpdateHandler(ctx, "add", func(ctx Context, n int) (int, error) {
		if n == 99 {
			if err := Sleep(ctx, time.Minute); err != nil {
				return 0, err
			}
		}
		total += n
		return total, nil
	}, UpdateHandlerOptions{Validator: func(ctx Context, n int) error {
		if n < 0 {
			return errors.New("only positive amounts")
		}
		return nil
	}}); err != nil {
		return 0, err
	}
	if err := SetUpdateHandler(ctx, "close", func(ctx Context) error { closing = true; return nil }, UpdateHandlerOptions{}); err != nil {
		return 0, err
	}
	if err := Await(ctx, func() bool { return closing }); err != nil {
		return 0, err
	}
	if err := Await(ctx, func() bool { return AllHandlersFinished(ctx) }); err != nil {
		return 0, err
	}
	return total, nil
}

func updateResult(t *testing.T, c api.Command) int {
	t.Helper()
	var n int
	if c.Type != api.CommandCompleteUpdate || c.CompleteUpdate.Failure != nil || DefaultConverter().FromPayload(c.CompleteUpdate.Result, &n) != nil {
		t.Fatalf("not an update's result: %s", describeCommand(&c))
	}
	return n
}

// Handlers run as coroutines in history order (an update accepted with
// the start included), may block, and the workflow waits for them with
// AllHandlersFinished; validators read state only; replay is exact.
func TestUpdateHandlers(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Tally})
	f := newFake(t, reg, Tally, "")
	f.update("u0", "add", 2) // update-with-start: in the first task
	cmds := f.task()
	wantTypes(t, cmds, api.CommandCompleteUpdate)
	if n := updateResult(t, cmds[0]); n != 2 || cmds[0].CompleteUpdate.UpdateID != "u0" {
		t.Fatalf("u0 answered %d", n)
	}
	validate := func(name string, v any) error {
		t.Helper()
		rejected, err := f.exec.ValidateUpdate(name, f.payload(v))
		if err != nil {
			t.Fatal(err)
		}
		return rejected
	}
	if err := validate("add", -1); err == nil || err.Error() != "only positive amounts" {
		t.Fatalf("a negative amount: %v", err)
	}
	if err := validate("nope", nil); !errors.Is(err, ErrUnknownUpdate) || !strings.Contains(err.Error(), "add, close") {
		t.Fatalf("an unknown update: %v", err)
	}
	if err := validate("add", 1); err != nil {
		t.Fatalf("a valid update: %v", err)
	}
	f.update("u1", "add", 99)
	cmds = f.task()
	wantTypes(t, cmds, api.CommandStartTimer) // the handler sleeps
	timer := cmds[0].StartTimer.TimerID
	f.update("u2", "close", nil)
	cmds = f.task()
	wantTypes(t, cmds, api.CommandCompleteUpdate) // the run waits for u1's handler
	if cmds[0].CompleteUpdate.UpdateID != "u2" {
		t.Fatalf("completed %s, want u2", cmds[0].CompleteUpdate.UpdateID)
	}
	f.fireTimer(timer)
	cmds = f.task()
	wantTypes(t, cmds, api.CommandCompleteUpdate, api.CommandCompleteWorkflow)
	if n := updateResult(t, cmds[0]); n != 101 {
		t.Fatalf("u1 answered %d", n)
	}
	var total int
	f.result(&total)
	if total != 101 {
		t.Fatalf("result %d", total)
	}
	f.checkReplay()
	// A closing run rejects updates: no handler would run.
	_, exec, err := f.replayAll(nil)
	if err != nil {
		t.Fatal(err)
	}
	if rejected, err := exec.ValidateUpdate("add", f.payload(1)); err != nil || !errors.Is(rejected, errWorkflowClosing) {
		t.Fatalf("an update of a closed run: %v, %v", rejected, err)
	}
	// The completion event is the handler's command: a history that
	// completes another update does not replay.
	for i := range f.events {
		if u, ok := f.events[i].Attrs.(*history.WorkflowUpdateCompleted); ok && u.UpdateID == "u2" {
			u.UpdateID = "u9"
		}
	}
	if _, _, err := f.replayAll(nil); !errors.Is(err, ErrNondeterminism) {
		t.Fatalf("replay of a tampered completion: %v", err)
	}
}
