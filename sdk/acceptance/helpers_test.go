package acceptance_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// deadline bounds every scenario in real time: generous, so that a loaded
// machine running -race never trips it; a hang fails instead of blocking.
const deadline = 2 * time.Minute

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

// registrar is what workers (and the replayer, for workflows) offer.
type registrar interface {
	RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error
	RegisterActivity(fn any, opts ...activities.Options) error
}

// must fails the test on a registration error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// start starts a workflow on the env's queue.
func start(t *testing.T, ctx context.Context, env *testenv.Env, id string, wf any, in any) client.Run {
	t.Helper()
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: env.TaskQueue()}, wf, in)
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return run
}

// events returns a run's whole history.
func events(t *testing.T, ctx context.Context, c client.Client, id, runID string) []history.Event {
	t.Helper()
	evs, err := c.GetHistory(ctx, id, runID)
	if err != nil {
		t.Fatalf("history of %s: %v", id, err)
	}
	return evs
}

// waitEvent long-polls a run's history until an event after `after`
// satisfies match, and returns it. It never sleeps: it waits on the
// engine's history long poll.
func waitEvent(t *testing.T, ctx context.Context, c client.Client, id, runID string, after int64, match func(history.Event) bool) history.Event {
	t.Helper()
	from := after + 1
	for {
		resp, err := c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, RunID: runID, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			t.Fatalf("waiting on the history of %s: %v", id, err)
		}
		for _, ev := range resp.Events {
			if match(ev) {
				return ev
			}
		}
		from += int64(len(resp.Events))
		if resp.Closed && from >= resp.NextEventID {
			t.Fatalf("%s closed without the awaited event", id)
		}
		if ctx.Err() != nil {
			t.Fatalf("waiting on the history of %s: %v", id, ctx.Err())
		}
	}
}

// isType matches events of type typ.
func isType(typ history.EventType) func(history.Event) bool {
	return func(ev history.Event) bool { return ev.Type() == typ }
}

// typesOf lists the event types of evs, for messages and comparisons.
func typesOf(evs []history.Event) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type().String()
	}
	return out
}

// count counts the events of type typ.
func count(evs []history.Event, typ history.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

// assertf is a check made inside workflow code: a failed one fails the
// workflow with a non-retryable AssertionFailed error the test sees.
func assertf(ok bool, format string, args ...any) error {
	if ok {
		return nil
	}
	return sdk.NewNonRetryableError(fmt.Sprintf(format, args...), "AssertionFailed")
}

// noAssertion fails the test when err is a workflow assertion.
func noAssertion(t *testing.T, err error) {
	t.Helper()
	var app *sdk.ApplicationError
	if errors.As(err, &app) && app.Type == "AssertionFailed" {
		t.Fatalf("workflow assertion: %s", app.Message)
	}
}
