// Package clienttest is the conformance suite of sdk/client: one set of
// tests that every way of reaching an engine (client.NewLocal over an
// embedded engine, client.Dial over HTTP) must pass identically — results,
// typed errors, long polls and all.
//
//	func TestLocal(t *testing.T) {
//		clienttest.Run(t, func(t *testing.T) clienttest.Env {
//			eng := openEngine(t) // a fresh engine, closed by t.Cleanup
//			return clienttest.Env{Client: client.NewLocal(eng, client.Options{})}
//		})
//	}
//
// The suite runs real worker.Workers over the Env's client (so, for the
// HTTP transport, workers long-poll the server like remote worker
// processes). It imports no engine and no store: it sees only the Client.
package clienttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// Env is one fresh engine reached through the client under test.
type Env struct {
	// Client is the client under test. Workers started by the suite use
	// its Service.
	Client client.Client
	// WaitingPollers, when set, reports how many workflow-task long polls
	// are parked in the engine on queue. The long-poll tests use it to act
	// only once a poll waits; without it they cannot tell a poll that
	// waited from one that found work at once, and skip that check.
	WaitingPollers func(queue string) int
}

// Timeout bounds each test of the suite: generous, for -race on a loaded
// machine. Nothing waits for it unless something is broken.
const Timeout = 60 * time.Second

// TaskQueue is the queue the suite's workers poll.
const TaskQueue = "clienttest"

// Run runs the suite. newEnv is called once per test and must return an
// Env over a fresh, empty engine whose teardown it registers with
// t.Cleanup (the suite's own workers are stopped before it runs).
func Run(t *testing.T, newEnv func(t *testing.T) Env) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s *suite)
	}{
		{"ExecuteTypedResult", testExecute},
		{"StartConflict", testStartConflict},
		{"StartRequestID", testStartRequestID},
		{"ReusePolicies", testReusePolicies},
		{"Signal", testSignal},
		{"SignalWithStart", testSignalWithStart},
		{"Query", testQuery},
		{"Update", testUpdate},
		{"Cancel", testCancel},
		{"Terminate", testTerminate},
		{"Delete", testDelete},
		{"DescribePendingActivity", testDescribe},
		{"FailedWorkflowError", testFailure},
		{"History", testHistory},
		{"HistoryLongPoll", testHistoryLongPoll},
		{"List", testList},
		{"Count", testCount},
		{"TaskQueues", testTaskQueues},
		{"ActivityLimits", testActivityLimits},
		{"ResolvePausedRun", testResolve},
		{"ListEffects", testListEffects},
		{"DuplicateVisible", testDuplicateVisible},
		{"TypedErrors", testTypedErrors},
		{"TaskErrors", testTaskErrors},
		{"LongPollWorkflowTask", testLongPoll},
		{"LongPollCancel", testLongPollCancel},
		{"PayloadChunks", testChunks},
		{"AgentKit", testAgentKit},
		{"AsyncCompletion", testAsyncCompletion},
		{"Schedules", testSchedules},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t)
			if env.Client == nil {
				t.Fatal("clienttest: Env.Client is nil")
			}
			ctx, cancel := context.WithTimeout(context.Background(), Timeout)
			t.Cleanup(cancel)
			tc.fn(t, &suite{t: t, env: env, c: env.Client, svc: env.Client.Service(), ctx: ctx})
		})
	}
}

type suite struct {
	t   *testing.T
	env Env
	c   client.Client
	svc api.Service
	ctx context.Context
}

// startWorker runs a worker on TaskQueue with the suite's workflows and
// activities (plus extra registrations) until the test ends.
func (s *suite) startWorker(extra ...func(w *worker.Worker) error) {
	t := s.t
	t.Helper()
	w, err := worker.New(s.c, worker.Options{TaskQueue: TaskQueue, Identity: "clienttest-worker", GracefulStop: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	regs := []func(w *worker.Worker) error{
		func(w *worker.Worker) error { return w.RegisterWorkflow(Checkout) },
		func(w *worker.Worker) error { return w.RegisterWorkflow(Decline) },
		func(w *worker.Worker) error { return w.RegisterWorkflow(Accumulate) },
		func(w *worker.Worker) error { return w.RegisterWorkflow(WaitForCancel) },
		func(w *worker.Worker) error { return w.RegisterWorkflow(HoldOn) },
		func(w *worker.Worker) error { return w.RegisterWorkflow(Pay) },
		func(w *worker.Worker) error { return w.RegisterWorkflow(Bulky) },
		func(w *worker.Worker) error { return w.RegisterActivity(Stamp) },
		func(w *worker.Worker) error {
			return w.RegisterActivity(Charge, activities.Options{Effect: activities.SideEffect})
		},
	}
	for _, reg := range append(regs, extra...) {
		if err := reg(w); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
	})
}

func (s *suite) opts(id string) client.StartOptions {
	return client.StartOptions{ID: id, TaskQueue: TaskQueue}
}

// start starts a run, failing the test on error.
func (s *suite) start(opts client.StartOptions, wf, in any) client.Run {
	s.t.Helper()
	r, err := s.c.StartWorkflow(s.ctx, opts, wf, in)
	if err != nil {
		s.t.Fatalf("StartWorkflow %s: %v", opts.ID, err)
	}
	if r.WorkflowID() != opts.ID || r.RunID() == "" {
		s.t.Fatalf("StartWorkflow %s: run %q/%q", opts.ID, r.WorkflowID(), r.RunID())
	}
	return r
}

func (s *suite) describe(id, runID string) *api.DescribeWorkflowResponse {
	s.t.Helper()
	d, err := s.c.DescribeWorkflow(s.ctx, id, runID)
	if err != nil {
		s.t.Fatalf("DescribeWorkflow %s: %v", id, err)
	}
	return d
}

// waitEvent long-polls a run's history until an event of type typ with an
// id of at least from exists, and returns it. It never sleeps: each
// GetHistory call waits in the engine for the run's next transition.
func (s *suite) waitEvent(id, runID string, from int64, typ history.EventType) history.Event {
	s.t.Helper()
	from = max(from, 1)
	for {
		resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: id, RunID: runID, FromEventID: from, WaitNewEvents: true})
		if err == nil {
			err = s.ctx.Err() // a long poll ends without events, and no error, when its context does
		}
		if err != nil {
			s.t.Fatalf("waiting for %s in %s: GetHistory: %v", typ, id, err)
		}
		for _, ev := range resp.Events {
			if ev.Type() == typ {
				return ev
			}
		}
		from += int64(len(resp.Events))
		if resp.Closed && from >= resp.NextEventID {
			s.t.Fatalf("run %s closed without a %s event", id, typ)
		}
	}
}

// waitTaskSaw waits until a workflow task that saw event id has completed:
// the workflow code has handled everything up to that event, and (for the
// suite's workflows, which then block on signals) the run is idle.
func (s *suite) waitTaskSaw(id, runID string, eventID int64) {
	s.t.Helper()
	from := int64(1)
	for {
		ev := s.waitEvent(id, runID, from, history.TypeWorkflowTaskCompleted)
		if ev.Attrs.(*history.WorkflowTaskCompleted).SeenEventID >= eventID {
			return
		}
		from = ev.ID + 1
	}
}

// wantCode checks that err wraps sentinel (and no context error).
func wantCode(t *testing.T, what string, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: got error %v (code %q), want one wrapping %v", what, err, api.ErrorCode(err), sentinel)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: %v also wraps a context error", what, err)
	}
	if err.Error() == "" || err.Error() == sentinel.Error() {
		t.Fatalf("%s: error %q carries no message beyond its sentinel", what, err)
	}
}
