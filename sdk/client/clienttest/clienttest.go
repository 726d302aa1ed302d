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
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
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
		{"Cancel", testCancel},
		{"Terminate", testTerminate},
		{"DescribePendingActivity", testDescribe},
		{"FailedWorkflowError", testFailure},
		{"History", testHistory},
		{"HistoryLongPoll", testHistoryLongPoll},
		{"List", testList},
		{"Count", testCount},
		{"TaskQueues", testTaskQueues},
		{"ResolvePausedRun", testResolve},
		{"ListEffects", testListEffects},
		{"DuplicateVisible", testDuplicateVisible},
		{"TypedErrors", testTypedErrors},
		{"TaskErrors", testTaskErrors},
		{"LongPollWorkflowTask", testLongPoll},
		{"LongPollCancel", testLongPollCancel},
		{"PayloadChunks", testChunks},
		{"AgentKit", testAgentKit},
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

func testExecute(t *testing.T, s *suite) {
	s.startWorker()
	var got Receipt
	r, err := s.c.ExecuteWorkflow(s.ctx, s.opts("exec-1"), Checkout, Order{ID: "o-1", Amount: 21}, &got)
	if err != nil {
		t.Fatal(err)
	}
	want := Receipt{OrderID: "o-1", Total: 42, Note: "stamped o-1"}
	if got != want {
		t.Fatalf("result %+v, want %+v", got, want)
	}
	// A handle from the ids (empty run id: the current run) gives the same.
	var again Receipt
	if err := s.c.GetWorkflow(s.ctx, "exec-1", "").Get(s.ctx, &again); err != nil || again != want {
		t.Fatalf("GetWorkflow.Get: %+v, %v", again, err)
	}
	var raw api.Payload
	if err := s.c.GetWorkflow(s.ctx, "exec-1", r.RunID()).Get(s.ctx, &raw); err != nil || raw.IsZero() {
		t.Fatalf("Get into *api.Payload: %+v, %v", raw, err)
	}
	// Decoding into the wrong type is an error, not a silent zero value.
	var wrong []string
	if err := r.Get(s.ctx, &wrong); err == nil {
		t.Fatalf("Get into %T succeeded: %v", wrong, wrong)
	}
	d := s.describe("exec-1", "")
	if d.Info.Status != api.StatusCompleted || d.Info.RunID != r.RunID() || d.Info.WorkflowType != "Checkout" ||
		d.Info.TaskQueue != TaskQueue || d.Info.CloseTime.IsZero() || d.Info.StartTime.IsZero() || len(d.PendingActivities) != 0 {
		t.Fatalf("describe after completion: %+v", d)
	}
}

func testStartConflict(t *testing.T, s *suite) {
	// No worker: the runs stay open.
	first := s.start(s.opts("conflict"), "Idle", nil)
	_, err := s.c.StartWorkflow(s.ctx, s.opts("conflict"), "Idle", nil)
	wantCode(t, "second start", err, api.ErrAlreadyStarted)
	if !strings.Contains(err.Error(), "conflict") {
		t.Errorf("AlreadyStarted message %q does not name the workflow", err)
	}

	o := s.opts("conflict")
	o.ConflictPolicy = api.ConflictUseExisting
	existing := s.start(o, "Idle", nil)
	if existing.RunID() != first.RunID() {
		t.Fatalf("UseExisting returned run %q, want the open run %q", existing.RunID(), first.RunID())
	}
	// Started says whether a run was created, across the transport too.
	resp, err := s.svc.StartWorkflow(s.ctx, &api.StartWorkflowRequest{WorkflowID: "conflict", WorkflowType: "Idle",
		TaskQueue: TaskQueue, ConflictPolicy: api.ConflictUseExisting})
	if err != nil || resp.Started || resp.RunID != first.RunID() {
		t.Fatalf("raw UseExisting start: %+v, %v", resp, err)
	}
	resp, err = s.svc.StartWorkflow(s.ctx, &api.StartWorkflowRequest{WorkflowID: "conflict-2", WorkflowType: "Idle", TaskQueue: TaskQueue})
	if err != nil || !resp.Started || resp.RunID == "" {
		t.Fatalf("raw start: %+v, %v", resp, err)
	}
}

func testStartRequestID(t *testing.T, s *suite) {
	o := s.opts("idem")
	o.RequestID = "req-1"
	first := s.start(o, "Idle", nil)
	// A retried start (same request id) is the same run, not an error.
	retry := s.start(o, "Idle", nil)
	if retry.RunID() != first.RunID() {
		t.Fatalf("retried start returned run %q, want %q", retry.RunID(), first.RunID())
	}
	// A different request is a conflict.
	o.RequestID = "req-2"
	_, err := s.c.StartWorkflow(s.ctx, o, "Idle", nil)
	wantCode(t, "start with another request id", err, api.ErrAlreadyStarted)
	if h, err := s.c.GetHistory(s.ctx, "idem", ""); err != nil || len(h) != 1 || h[0].Type() != history.TypeWorkflowStarted {
		t.Fatalf("history after idempotent starts: %v, %v", h, err)
	}
}

func testReusePolicies(t *testing.T, s *suite) {
	s.startWorker()
	var r Receipt
	done, err := s.c.ExecuteWorkflow(s.ctx, s.opts("reuse"), Checkout, Order{ID: "a", Amount: 1}, &r)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []api.ReusePolicy{api.RejectDuplicate, api.AllowDuplicateFailedOnly} {
		o := s.opts("reuse")
		o.ReusePolicy = p
		_, err := s.c.StartWorkflow(s.ctx, o, Checkout, Order{ID: "b"})
		wantCode(t, fmt.Sprintf("start after a completed run with reuse policy %d", p), err, api.ErrAlreadyStarted)
	}
	o := s.opts("reuse")
	o.ReusePolicy = api.AllowDuplicate
	second, err := s.c.ExecuteWorkflow(s.ctx, o, Checkout, Order{ID: "c", Amount: 2}, &r)
	if err != nil {
		t.Fatal(err)
	}
	if second.RunID() == done.RunID() || r.OrderID != "c" {
		t.Fatalf("AllowDuplicate: run %q (first %q), result %+v", second.RunID(), done.RunID(), r)
	}
	// The old run is still readable by its id.
	var old Receipt
	if err := s.c.GetWorkflow(s.ctx, "reuse", done.RunID()).Get(s.ctx, &old); err != nil || old.OrderID != "a" {
		t.Fatalf("first run's result: %+v, %v", old, err)
	}

	// A terminated run may be retried under AllowDuplicateFailedOnly, but
	// not under RejectDuplicate.
	term := s.start(s.opts("reuse-failed"), WaitForCancel, nil)
	if err := s.c.TerminateWorkflow(s.ctx, "reuse-failed", "", "test"); err != nil {
		t.Fatal(err)
	}
	o = s.opts("reuse-failed")
	o.ReusePolicy = api.RejectDuplicate
	_, err = s.c.StartWorkflow(s.ctx, o, WaitForCancel, nil)
	wantCode(t, "RejectDuplicate after a terminated run", err, api.ErrAlreadyStarted)
	o.ReusePolicy = api.AllowDuplicateFailedOnly
	retried := s.start(o, WaitForCancel, nil)
	if retried.RunID() == term.RunID() {
		t.Fatal("AllowDuplicateFailedOnly reused the terminated run's id")
	}
	if d := s.describe("reuse-failed", ""); d.Info.RunID != retried.RunID() || !d.Info.Status.Open() {
		t.Fatalf("current run after retry: %+v", d.Info)
	}
}

func testSignal(t *testing.T, s *suite) {
	s.startWorker()
	r := s.start(s.opts("sig"), Accumulate, 10)
	if err := s.c.SignalWorkflow(s.ctx, "sig", r.RunID(), "add", 5); err != nil {
		t.Fatal(err)
	}
	if err := s.c.SignalWorkflow(s.ctx, "sig", "", "add", 7); err != nil { // the current run
		t.Fatal(err)
	}
	if err := s.c.SignalWorkflow(s.ctx, "sig", "", "done", "now"); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := r.Get(s.ctx, &total); err != nil || total != 22 {
		t.Fatalf("result %d, %v; want 22", total, err)
	}
	h, err := s.c.GetHistory(s.ctx, "sig", r.RunID())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range h {
		if a, ok := ev.Attrs.(*history.SignalReceived); ok {
			names = append(names, a.Name)
		}
	}
	if strings.Join(names, ",") != "add,add,done" {
		t.Fatalf("signals in history: %v", names)
	}
	err = s.c.SignalWorkflow(s.ctx, "sig", "", "add", 1)
	wantCode(t, "signal a closed run", err, api.ErrWorkflowClosed)
}

func testSignalWithStart(t *testing.T, s *suite) {
	s.startWorker()
	r1, err := s.c.SignalWithStartWorkflow(s.ctx, s.opts("sws"), "add", 5, Accumulate, 1)
	if err != nil {
		t.Fatal(err)
	}
	// With the run open it only signals.
	r2, err := s.c.SignalWithStartWorkflow(s.ctx, s.opts("sws"), "add", 4, Accumulate, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if r1.RunID() == "" || r2.RunID() != r1.RunID() {
		t.Fatalf("signal-with-start runs %q and %q, want the same", r1.RunID(), r2.RunID())
	}
	if err := s.c.SignalWorkflow(s.ctx, "sws", "", "done", ""); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := r1.Get(s.ctx, &total); err != nil || total != 10 {
		t.Fatalf("result %d, %v; want 10", total, err)
	}
	// After the run closed, signal-with-start starts a new one.
	r3, err := s.c.SignalWithStartWorkflow(s.ctx, s.opts("sws"), "done", "", Accumulate, 7)
	if err != nil {
		t.Fatal(err)
	}
	if r3.RunID() == r1.RunID() {
		t.Fatal("signal-with-start on a closed run did not start a new run")
	}
	if err := r3.Get(s.ctx, &total); err != nil || total != 7 {
		t.Fatalf("new run's result %d, %v; want 7", total, err)
	}
	_, err = s.c.SignalWithStartWorkflow(s.ctx, s.opts(""), "add", 1, Accumulate, 0)
	wantCode(t, "signal-with-start without an id", err, api.ErrInvalidArgument)
}

func testQuery(t *testing.T, s *suite) {
	s.startWorker()
	r := s.start(s.opts("query"), Accumulate, 3)
	var total int
	if err := s.c.QueryWorkflow(s.ctx, "query", "", "total", nil, &total); err != nil || total != 3 {
		t.Fatalf("query before any signal: %d, %v; want 3", total, err)
	}
	if err := s.c.SignalWorkflow(s.ctx, "query", "", "add", 4); err != nil {
		t.Fatal(err)
	}
	sig := s.waitEvent("query", r.RunID(), 1, history.TypeSignalReceived)
	s.waitTaskSaw("query", r.RunID(), sig.ID)
	if err := s.c.QueryWorkflow(s.ctx, "query", r.RunID(), "total", nil, &total); err != nil || total != 7 {
		t.Fatalf("query after the signal was handled: %d, %v; want 7", total, err)
	}
	before, err := s.c.GetHistory(s.ctx, "query", "")
	if err != nil {
		t.Fatal(err)
	}
	err = s.c.QueryWorkflow(s.ctx, "query", "", "no-such-query", nil, &total)
	wantCode(t, "unknown query type", err, api.ErrQueryFailed)
	err = s.c.QueryWorkflow(s.ctx, "no-such-workflow", "", "total", nil, &total)
	wantCode(t, "query a missing workflow", err, api.ErrNotFound)
	after, err := s.c.GetHistory(s.ctx, "query", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("queries wrote history: %d events, then %d", len(before), len(after))
	}
	if err := s.c.SignalWorkflow(s.ctx, "query", "", "done", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.Get(s.ctx, &total); err != nil || total != 7 {
		t.Fatalf("result %d, %v", total, err)
	}
}

func testCancel(t *testing.T, s *suite) {
	s.startWorker()
	r := s.start(s.opts("cancel"), WaitForCancel, nil)
	if err := s.c.CancelWorkflow(s.ctx, "cancel", "", "customer changed their mind"); err != nil {
		t.Fatal(err)
	}
	err := r.Get(s.ctx, nil)
	var ce *sdk.CanceledError
	if !errors.As(err, &ce) || !errors.Is(err, sdk.ErrCanceled) {
		t.Fatalf("Get of a canceled run: %T %v, want *sdk.CanceledError", err, err)
	}
	if d := s.describe("cancel", ""); d.Info.Status != api.StatusCanceled || !d.CancelRequested {
		t.Fatalf("describe: status %s, cancel requested %v", d.Info.Status, d.CancelRequested)
	}
	ev := s.waitEvent("cancel", "", 1, history.TypeWorkflowCancelRequested)
	if a := ev.Attrs.(*history.WorkflowCancelRequested); a.Reason != "customer changed their mind" {
		t.Fatalf("cancel request recorded as %+v", a)
	}
	err = s.c.CancelWorkflow(s.ctx, "cancel", "", "again")
	wantCode(t, "cancel a closed run", err, api.ErrWorkflowClosed)
}

func testTerminate(t *testing.T, s *suite) {
	s.startWorker()
	r := s.start(s.opts("term"), WaitForCancel, nil)
	if err := s.c.TerminateWorkflow(s.ctx, "term", r.RunID(), "operator stop"); err != nil {
		t.Fatal(err)
	}
	err := r.Get(s.ctx, nil)
	if !errors.Is(err, client.ErrTerminated) {
		t.Fatalf("Get of a terminated run: %v, want client.ErrTerminated", err)
	}
	if d := s.describe("term", ""); d.Info.Status != api.StatusTerminated || d.Info.CloseTime.IsZero() {
		t.Fatalf("describe: %+v", d.Info)
	}
	h, err := s.c.GetHistory(s.ctx, "term", "")
	if err != nil {
		t.Fatal(err)
	}
	last, ok := h[len(h)-1].Attrs.(*history.WorkflowTerminated)
	if !ok || last.Reason != "operator stop" {
		t.Fatalf("last event %v (%+v), want WorkflowTerminated with the reason", h[len(h)-1], h[len(h)-1].Attrs)
	}
	err = s.c.TerminateWorkflow(s.ctx, "term", "", "again")
	wantCode(t, "terminate a closed run", err, api.ErrWorkflowClosed)
}

func testDescribe(t *testing.T, s *suite) {
	h := NewHolder()
	s.startWorker(func(w *worker.Worker) error { return w.RegisterActivity(h.Hold, activities.Options{Name: "Hold"}) })
	r := s.start(s.opts("desc"), HoldOn, "parcel")
	select {
	case <-h.Started:
	case <-s.ctx.Done():
		t.Fatal("the Hold activity never started")
	}
	d := s.describe("desc", "")
	if d.Info.Status != api.StatusRunning || d.Info.WorkflowID != "desc" || d.Info.RunID != r.RunID() ||
		d.Info.WorkflowType != "HoldOn" || d.Info.TaskQueue != TaskQueue || d.Info.HistoryLength < 3 || d.Info.Pause != nil {
		t.Fatalf("describe info: %+v", d.Info)
	}
	if len(d.PendingActivities) != 1 {
		t.Fatalf("pending activities: %+v", d.PendingActivities)
	}
	pa := d.PendingActivities[0]
	if pa.ActivityID != "hold" || pa.ActivityType != "Hold" || pa.State != api.ActivityStateStarted || pa.Attempt != 1 ||
		pa.ScheduledEventID <= 0 || pa.LeaseExpires.IsZero() {
		t.Fatalf("pending activity: %+v", pa)
	}
	close(h.Release)
	var out string
	if err := r.Get(s.ctx, &out); err != nil || out != "held parcel" {
		t.Fatalf("result %q, %v", out, err)
	}
	if d := s.describe("desc", r.RunID()); d.Info.Status != api.StatusCompleted || len(d.PendingActivities) != 0 || d.WorkflowTask != nil {
		t.Fatalf("describe after completion: %+v", d)
	}
}

func testFailure(t *testing.T, s *suite) {
	s.startWorker()
	r, err := s.c.ExecuteWorkflow(s.ctx, s.opts("decline"), Decline, "insufficient funds", nil)
	var ae *sdk.ApplicationError
	if !errors.As(err, &ae) {
		t.Fatalf("ExecuteWorkflow of a failing workflow: %T %v, want *sdk.ApplicationError", err, err)
	}
	if ae.Type != "CardDeclined" || ae.Message != "card declined: insufficient funds" {
		t.Fatalf("application error: type %q message %q", ae.Type, ae.Message)
	}
	var det DeclineDetails
	if err := ae.DetailsInto(&det); err != nil || det.Code != 51 {
		t.Fatalf("details: %+v, %v", det, err)
	}
	if errors.Is(err, client.ErrTerminated) || api.ErrorCode(err) != api.CodeInternal {
		t.Fatalf("a workflow failure is neither a termination nor a service error: %v", err)
	}
	// The same error from a fresh handle.
	err = s.c.GetWorkflow(s.ctx, "decline", r.RunID()).Get(s.ctx, nil)
	if !errors.As(err, &ae) || ae.Type != "CardDeclined" {
		t.Fatalf("Get again: %v", err)
	}
	if d := s.describe("decline", ""); d.Info.Status != api.StatusFailed {
		t.Fatalf("status %s, want failed", d.Info.Status)
	}
}

func testHistory(t *testing.T, s *suite) {
	s.startWorker()
	var out Receipt
	r, err := s.c.ExecuteWorkflow(s.ctx, s.opts("hist"), Checkout, Order{ID: "h-1", Amount: 5}, &out)
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.c.GetHistory(s.ctx, "hist", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) < 7 {
		t.Fatalf("history has %d events: %v", len(events), events)
	}
	var types []string
	for i, ev := range events {
		if ev.ID != int64(i+1) || ev.Time.IsZero() || ev.Attrs == nil {
			t.Fatalf("event %d: %+v", i, ev)
		}
		types = append(types, ev.Type().String())
	}
	ws, ok := events[0].Attrs.(*history.WorkflowStarted)
	if !ok || ws.WorkflowType != "Checkout" || ws.TaskQueue != TaskQueue {
		t.Fatalf("first event %v %+v", events[0], events[0].Attrs)
	}
	var in Order
	if err := s.c.Converter().FromPayload(ws.Input, &in); err != nil || in != (Order{ID: "h-1", Amount: 5}) {
		t.Fatalf("started input %+v, %v", in, err)
	}
	var sched *history.ActivityScheduled
	var done *history.ActivityCompleted
	for _, ev := range events {
		switch a := ev.Attrs.(type) {
		case *history.ActivityScheduled:
			sched = a
		case *history.ActivityCompleted:
			done = a
		}
	}
	if sched == nil || sched.ActivityType != "Stamp" || done == nil || done.ScheduledEventID <= 0 {
		t.Fatalf("activity events: %v", types)
	}
	var note string
	if err := s.c.Converter().FromPayload(done.Result, &note); err != nil || note != "stamped h-1" {
		t.Fatalf("activity result %q, %v", note, err)
	}
	wc, ok := events[len(events)-1].Attrs.(*history.WorkflowCompleted)
	if !ok {
		t.Fatalf("last event %v, want WorkflowCompleted (history %v)", events[len(events)-1], types)
	}
	var res Receipt
	if err := s.c.Converter().FromPayload(wc.Result, &res); err != nil || res != out {
		t.Fatalf("completed result %+v, %v", res, err)
	}

	// GetHistory pages: MaxEvents at a time, resuming at FromEventID.
	var paged []history.Event
	from := int64(1)
	for pages := 0; ; pages++ {
		if pages > len(events) {
			t.Fatal("paging does not end")
		}
		resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hist", FromEventID: from, MaxEvents: 2})
		if err != nil {
			t.Fatal(err)
		}
		if resp.RunID != r.RunID() || !resp.Closed || resp.NextEventID != int64(len(events))+1 || len(resp.Events) > 2 {
			t.Fatalf("page from %d: run %q closed %v next %d, %d events", from, resp.RunID, resp.Closed, resp.NextEventID, len(resp.Events))
		}
		if len(resp.Events) == 0 {
			break
		}
		paged = append(paged, resp.Events...)
		from += int64(len(resp.Events))
	}
	if len(paged) != len(events) {
		t.Fatalf("paged %d events, want %d", len(paged), len(events))
	}
	for i := range events {
		a, err1 := history.EncodeEvent(events[i])
		b, err2 := history.EncodeEvent(paged[i])
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Fatalf("event %d differs between GetHistory and paging: %v / %v (%v %v)", i+1, events[i], paged[i], err1, err2)
		}
	}
	_, err = s.c.GetHistory(s.ctx, "hist", "no-such-run")
	wantCode(t, "history of a missing run", err, api.ErrNotFound)
}

func testHistoryLongPoll(t *testing.T, s *suite) {
	// No worker: the run's history only grows when the test signals it.
	r := s.start(s.opts("hpoll"), "Idle", nil)
	resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hpoll"})
	if err != nil {
		t.Fatal(err)
	}
	next := resp.NextEventID
	type result struct {
		resp *api.GetHistoryResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hpoll", RunID: r.RunID(), FromEventID: next, WaitNewEvents: true})
		got <- result{resp, err}
	}()
	if err := s.c.SignalWorkflow(s.ctx, "hpoll", "", "wake", "up"); err != nil {
		t.Fatal(err)
	}
	for {
		res := <-got
		if res.err != nil {
			t.Fatal(res.err)
		}
		if len(res.resp.Events) > 0 {
			if ev := res.resp.Events[0]; ev.ID != next || ev.Type() != history.TypeSignalReceived {
				t.Fatalf("long poll returned %v, want event %d SignalReceived", ev, next)
			}
			return
		}
		// The server's poll limit ended the wait: poll again.
		go func() {
			resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hpoll", RunID: r.RunID(), FromEventID: next, WaitNewEvents: true})
			got <- result{resp, err}
		}()
	}
}

func testList(t *testing.T, s *suite) {
	// No worker: runs stay open unless terminated.
	for i := range 5 {
		s.start(s.opts(fmt.Sprintf("list-%d", i)), "Idle", nil)
	}
	s.start(s.opts("list-other"), "Other", nil)
	for _, id := range []string{"list-1", "list-3"} {
		if err := s.c.TerminateWorkflow(s.ctx, id, "", "list test"); err != nil {
			t.Fatal(err)
		}
	}
	list := func(req api.ListWorkflowsRequest) []string {
		t.Helper()
		var got []string
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("pagination does not end")
			}
			resp, err := s.c.ListWorkflows(s.ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if req.PageSize > 0 && len(resp.Workflows) > req.PageSize {
				t.Fatalf("page of %d, page size %d", len(resp.Workflows), req.PageSize)
			}
			for _, w := range resp.Workflows {
				if req.Status != api.StatusUnspecified && w.Status != req.Status {
					t.Fatalf("listed %s with status %s, filter %s", w.WorkflowID, w.Status, req.Status)
				}
				if w.RunID == "" || w.StartTime.IsZero() || w.TaskQueue != TaskQueue {
					t.Fatalf("listed %+v", w)
				}
				got = append(got, w.WorkflowID)
			}
			if resp.NextPageToken == nil {
				return got
			}
			req.NextPageToken = resp.NextPageToken
		}
	}
	set := func(ids []string) string {
		m := map[string]int{}
		for _, id := range ids {
			m[id]++
		}
		var out []string
		for id, n := range m {
			out = append(out, fmt.Sprintf("%s×%d", id, n))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	want := func(what string, got []string, ids ...string) {
		t.Helper()
		if set(got) != set(ids) || len(got) != len(ids) {
			t.Fatalf("%s: listed %v, want %v", what, got, ids)
		}
	}
	want("all", list(api.ListWorkflowsRequest{}), "list-0", "list-1", "list-2", "list-3", "list-4", "list-other")
	want("all, pages of 2", list(api.ListWorkflowsRequest{PageSize: 2}), "list-0", "list-1", "list-2", "list-3", "list-4", "list-other")
	want("running", list(api.ListWorkflowsRequest{Status: api.StatusRunning}), "list-0", "list-2", "list-4", "list-other")
	want("running, pages of 1", list(api.ListWorkflowsRequest{Status: api.StatusRunning, PageSize: 1}), "list-0", "list-2", "list-4", "list-other")
	want("terminated", list(api.ListWorkflowsRequest{Status: api.StatusTerminated}), "list-1", "list-3")
	want("completed", list(api.ListWorkflowsRequest{Status: api.StatusCompleted}))
	want("type Other", list(api.ListWorkflowsRequest{WorkflowType: "Other"}), "list-other")
	want("type Idle, running, pages of 2", list(api.ListWorkflowsRequest{WorkflowType: "Idle", Status: api.StatusRunning, PageSize: 2}),
		"list-0", "list-2", "list-4")
	want("id prefix list-o", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "list-o"}), "list-other")
	want("id prefix list-, terminated, pages of 1", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "list-", Status: api.StatusTerminated, PageSize: 1}),
		"list-1", "list-3")
	want("an id as its own prefix", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "list-4"}), "list-4")
	want("id prefix of nothing", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "nothing-"}))

	// Newest first.
	resp, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(resp.Workflows); i++ {
		if resp.Workflows[i].StartTime.After(resp.Workflows[i-1].StartTime) {
			t.Fatalf("not newest first: %s (%s) after %s (%s)", resp.Workflows[i].WorkflowID, resp.Workflows[i].StartTime,
				resp.Workflows[i-1].WorkflowID, resp.Workflows[i-1].StartTime)
		}
	}

	// One workflow id's runs (WorkflowID: exact, newest first), here two.
	s.start(s.opts("list-1"), "Idle", nil)
	want("workflow id list-1", list(api.ListWorkflowsRequest{WorkflowID: "list-1"}), "list-1", "list-1")
	want("workflow id list-1, pages of 1", list(api.ListWorkflowsRequest{WorkflowID: "list-1", PageSize: 1}), "list-1", "list-1")
	want("workflow id list-1, running", list(api.ListWorkflowsRequest{WorkflowID: "list-1", Status: api.StatusRunning}), "list-1")
	want("workflow id list-1, type Other", list(api.ListWorkflowsRequest{WorkflowID: "list-1", WorkflowType: "Other"}))
	want("workflow id list- (exact, not a prefix)", list(api.ListWorkflowsRequest{WorkflowID: "list-"}))
	resp, err = s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{WorkflowID: "list-1"})
	if err != nil {
		t.Fatal(err)
	}
	if w := resp.Workflows; len(w) != 2 || w[0].Status != api.StatusRunning || w[1].Status != api.StatusTerminated || w[0].RunID == w[1].RunID {
		t.Fatalf("the runs of list-1, newest first: %+v", w)
	}
}

func testCount(t *testing.T, s *suite) {
	// No worker: runs stay open unless terminated.
	for i := range 4 {
		s.start(s.opts(fmt.Sprintf("count-%d", i)), "Idle", nil)
	}
	s.start(s.opts("other-1"), "Other", nil)
	for _, id := range []string{"count-1", "other-1"} {
		if err := s.c.TerminateWorkflow(s.ctx, id, "", "count test"); err != nil {
			t.Fatal(err)
		}
	}
	count := func(req api.CountWorkflowsRequest) string {
		t.Helper()
		resp, err := s.c.CountWorkflows(s.ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprint(resp.Total)
		for _, c := range resp.ByStatus {
			out += fmt.Sprintf(" %s=%d", c.Status, c.Count)
		}
		return out
	}
	for _, tc := range []struct {
		what string
		req  api.CountWorkflowsRequest
		want string
	}{
		{"all", api.CountWorkflowsRequest{}, "5 running=3 terminated=2"},
		{"type Idle", api.CountWorkflowsRequest{WorkflowType: "Idle"}, "4 running=3 terminated=1"},
		{"prefix other-", api.CountWorkflowsRequest{WorkflowIDPrefix: "other-"}, "1 terminated=1"},
		{"started after now", api.CountWorkflowsRequest{StartedAfter: time.Now().Add(time.Hour)}, "0"},
	} {
		if got := count(tc.req); got != tc.want {
			t.Errorf("count %s: %s, want %s", tc.what, got, tc.want)
		}
	}
}

func testTaskQueues(t *testing.T, s *suite) {
	// A run on a queue nobody polls waits in its backlog.
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "stuck", TaskQueue: "clienttest-nobody"}, "Checkout", Order{ID: "A"}); err != nil {
		t.Fatal(err)
	}
	// A terminated run's task is no longer backlog, though its entry stays
	// queued until polled.
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "stuck-gone", TaskQueue: "clienttest-nobody"}, "Checkout", Order{ID: "B"}); err != nil {
		t.Fatal(err)
	}
	if err := s.c.TerminateWorkflow(s.ctx, "stuck-gone", "", "gone"); err != nil {
		t.Fatal(err)
	}
	q, err := s.c.DescribeTaskQueue(s.ctx, "clienttest-nobody")
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "clienttest-nobody" || q.WorkflowBacklog != 1 || q.ActivityBacklog != 0 || len(q.WorkflowPollers)+len(q.ActivityPollers) != 0 {
		t.Fatalf("queue nobody polls: %+v", q)
	}
	// Once the worker ran a workflow with an activity, it is a poller of
	// both kinds, seen lately.
	s.startWorker()
	var r Receipt
	if _, err := s.c.ExecuteWorkflow(s.ctx, s.opts("seen"), Checkout, Order{ID: "B", Amount: 1}, &r); err != nil {
		t.Fatal(err)
	}
	q, err = s.c.DescribeTaskQueue(s.ctx, TaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	seen := func(ps []api.PollerInfo) bool {
		for _, p := range ps {
			if p.Identity == "clienttest-worker" && !p.LastSeen.IsZero() && time.Since(p.LastSeen) < api.PollerRetention {
				return true
			}
		}
		return false
	}
	if !seen(q.WorkflowPollers) || !seen(q.ActivityPollers) || q.WorkflowBacklog != 0 {
		t.Fatalf("polled queue: %+v", q)
	}
	qs, err := s.c.ListTaskQueues(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range qs {
		names = append(names, q.Name)
		if q.Name == "clienttest-nobody" && q.WorkflowBacklog != 1 {
			t.Fatalf("listed queue nobody polls: %+v", q)
		}
	}
	if strings.Join(names, " ") != TaskQueue+" clienttest-nobody" {
		t.Fatalf("listed queues %v, want %s and clienttest-nobody (no sticky queue)", names, TaskQueue)
	}
	only, err := s.svc.ListTaskQueues(s.ctx, &api.ListTaskQueuesRequest{NamePrefix: "clienttest-"})
	if err != nil || len(only.Queues) != 1 || only.Queues[0].Name != "clienttest-nobody" {
		t.Fatalf("ListTaskQueues with a prefix: %+v %v", only, err)
	}
	if _, err := s.c.DescribeTaskQueue(s.ctx, ""); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("DescribeTaskQueue of no name: %v, want ErrInvalidArgument", err)
	}
}

func testResolve(t *testing.T, s *suite) {
	s.startWorker()
	r := s.start(s.opts("pay"), Pay, Order{ID: "INV-9", Amount: 1250})
	unknown := s.waitEvent("pay", r.RunID(), 1, history.TypeActivityOutcomeUnknown)
	ou := unknown.Attrs.(*history.ActivityOutcomeUnknown)
	if !strings.Contains(ou.Reason, "gateway timed out") || ou.IdempotencyKey == "" {
		t.Fatalf("outcome unknown event: %+v", ou)
	}

	d := s.describe("pay", "")
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil {
		t.Fatalf("describe of a paused run: status %s pause %+v", d.Info.Status, d.Info.Pause)
	}
	p := d.Info.Pause
	if p.ActivityType != "Charge" || p.ScheduledEventID != ou.ScheduledEventID || p.IdempotencyKey != ou.IdempotencyKey ||
		p.Attempt != 1 || !strings.Contains(p.Reason, "gateway timed out") || p.Since.IsZero() {
		t.Fatalf("pause info: %+v", p)
	}
	if len(d.PendingActivities) != 1 || d.PendingActivities[0].State != api.ActivityStateUnknown ||
		d.PendingActivities[0].Effect != history.SideEffect {
		t.Fatalf("pending activities of a paused run: %+v", d.PendingActivities)
	}
	lp, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{Status: api.StatusPaused})
	if err != nil || len(lp.Workflows) != 1 || lp.Workflows[0].WorkflowID != "pay" || lp.Workflows[0].Pause == nil ||
		lp.Workflows[0].Pause.ScheduledEventID != p.ScheduledEventID {
		t.Fatalf("list of paused runs: %+v, %v", lp, err)
	}
	// Get does not return while the run is paused; a short wait shows it.
	short, cancel := context.WithTimeout(s.ctx, 50*time.Millisecond)
	err = r.Get(short, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get of a paused run: %v, want the caller's deadline", err)
	}

	paid := Receipt{OrderID: "INV-9", Total: 1250, Note: "confirmed by phone"}
	err = s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "pay", ScheduledEventID: p.ScheduledEventID,
		Resolution: history.ResolvedHappened, Result: paid, By: "ops@example.com", Reason: "bank statement"})
	if err != nil {
		t.Fatal(err)
	}
	var got Receipt
	if err := r.Get(s.ctx, &got); err != nil || got != paid {
		t.Fatalf("result after resolve: %+v, %v; want %+v", got, err, paid)
	}
	ev := s.waitEvent("pay", r.RunID(), 1, history.TypeActivityResolved)
	res := ev.Attrs.(*history.ActivityResolved)
	if res.Resolution != history.ResolvedHappened || res.By != "ops@example.com" || res.Reason != "bank statement" ||
		res.ScheduledEventID != p.ScheduledEventID {
		t.Fatalf("resolved event: %+v", res)
	}
	if d := s.describe("pay", ""); d.Info.Status != api.StatusCompleted || d.Info.Pause != nil {
		t.Fatalf("describe after resolve: %+v", d.Info)
	}
	if lp, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{Status: api.StatusPaused}); err != nil || len(lp.Workflows) != 0 {
		t.Fatalf("paused runs after resolve: %+v, %v", lp, err)
	}
	// Resolving again: the run is closed.
	err = s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "pay", Resolution: history.ResolvedHappened, Result: paid})
	wantCode(t, "resolve a closed run", err, api.ErrWorkflowClosed)
}

// listEffects reads every page of the effects ledger for req.
func (s *suite) listEffects(req api.ListEffectsRequest) []api.EffectInfo {
	s.t.Helper()
	var got []api.EffectInfo
	for pages := 0; ; pages++ {
		if pages > 20 {
			s.t.Fatal("ListEffects paging does not end")
		}
		resp, err := s.c.ListEffects(s.ctx, &req)
		if err != nil {
			s.t.Fatal(err)
		}
		got = append(got, resp.Effects...)
		if resp.NextPageToken == nil {
			return got
		}
		req.NextPageToken = resp.NextPageToken
	}
}

func testListEffects(t *testing.T, s *suite) {
	s.startWorker()
	keys := map[string]string{}
	for _, id := range []string{"effects-a", "effects-b"} {
		r := s.start(s.opts(id), Pay, Order{ID: id, Amount: 7})
		ou := s.waitEvent(id, r.RunID(), 1, history.TypeActivityOutcomeUnknown).Attrs.(*history.ActivityOutcomeUnknown)
		keys[id] = ou.IdempotencyKey
	}
	one := s.listEffects(api.ListEffectsRequest{WorkflowID: "effects-a"})
	if len(one) != 1 {
		t.Fatalf("effects of effects-a: %+v", one)
	}
	e := one[0]
	d := s.describe("effects-a", "")
	if e.WorkflowID != "effects-a" || e.IdempotencyKey != keys["effects-a"] || e.ActivityType != "Charge" ||
		e.Effect != history.SideEffect || e.State != api.EffectUnknown || e.Attempts != 1 || e.Duplicates != 0 ||
		e.RunID != d.Info.RunID || !slices.Equal(e.RunIDs, []string{d.Info.RunID}) || e.Created.IsZero() || e.Updated.Before(e.Created) {
		t.Fatalf("ledger entry of a paused payment: %+v", e)
	}
	ids := func(es []api.EffectInfo) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.WorkflowID)
		}
		return out
	}
	if got := ids(s.listEffects(api.ListEffectsRequest{PageSize: 1})); !slices.Equal(got, []string{"effects-a", "effects-b"}) {
		t.Fatalf("all effects, pages of 1: %v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{WorkflowID: "effects-b", KeyPrefix: keys["effects-b"][:6]}); len(got) != 1 {
		t.Fatalf("effects-b by key prefix: %+v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{KeyPrefix: keys["effects-a"][:8]}); len(got) != 1 || got[0].WorkflowID != "effects-a" {
		t.Fatalf("all workflows by key prefix: %+v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{WorkflowID: "effects-a", KeyPrefix: "zz"}); len(got) != 0 {
		t.Fatalf("a prefix no key has: %+v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{DuplicatesOnly: true}); len(got) != 0 {
		t.Fatalf("duplicates where there are none: %+v", got)
	}
	paid := Receipt{OrderID: "effects-a", Total: 7, Note: "found at the bank"}
	if err := s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "effects-a", Resolution: history.ResolvedHappened,
		Result: paid, By: "ops", Reason: "bank statement"}); err != nil {
		t.Fatal(err)
	}
	if err := s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "effects-b", Resolution: history.ResolvedFailed,
		By: "ops", Reason: "declined"}); err != nil {
		t.Fatal(err)
	}
	all := s.listEffects(api.ListEffectsRequest{})
	if len(all) != 2 || all[0].State != api.EffectCompleted || all[1].State != api.EffectNotHappened {
		t.Fatalf("effects after resolving: %+v", all)
	}
	var got Receipt
	if err := s.c.Converter().FromPayload(all[0].Result, &got); err != nil || got != paid {
		t.Fatalf("ledger result %+v, %v; want %+v", got, err, paid)
	}
	_, err := s.c.ListEffects(s.ctx, &api.ListEffectsRequest{WorkflowID: strings.Repeat("x", 4<<10)})
	wantCode(t, "list effects of an oversized id", err, api.ErrLimitExceeded)
}

// testDuplicateVisible makes an effect happen twice by hand — attempt 1
// loses its lease, a person says it did not happen, attempt 2 pays, then
// attempt 1 reports that it paid too — and checks that the duplicate shows
// everywhere a person looks.
func testDuplicateVisible(t *testing.T, s *suite) {
	const queue = "raw-duplicate"
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "dup", TaskQueue: queue}, "Raw", nil); err != nil {
		t.Fatal(err)
	}
	wft := s.pollWFT(queue)
	schedule := api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "1", ActivityType: "RawCharge", Effect: history.SideEffect, Input: api.Payload{Encoding: "json", Data: []byte(`1`)},
		Options: api.ActivityOptions{StartToCloseTimeout: 200 * time.Millisecond}}}
	if _, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken,
		Commands: []api.Command{schedule}}); err != nil {
		t.Fatal(err)
	}
	first := s.pollActivity(queue)
	ou := s.waitEvent("dup", wft.RunID, 1, history.TypeActivityOutcomeUnknown).Attrs.(*history.ActivityOutcomeUnknown)
	if err := s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "dup", Resolution: history.ResolvedNotHappened,
		By: "ops", Reason: "nothing at the provider yet"}); err != nil {
		t.Fatal(err)
	}
	second := s.pollActivity(queue)
	if second.Attempt != 2 || second.IdempotencyKey != ou.IdempotencyKey {
		t.Fatalf("retry: attempt %d key %s, want 2 and %s", second.Attempt, second.IdempotencyKey, ou.IdempotencyKey)
	}
	if _, err := s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: second.TaskToken,
		Result: api.Payload{Encoding: "json", Data: []byte(`"pay_2"`)}, Identity: "second"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: first.TaskToken,
		Result: api.Payload{Encoding: "json", Data: []byte(`"pay_1"`)}, Identity: "woke-up"})
	wantCode(t, "the stale attempt's success", err, api.ErrStaleAttempt)

	dups := s.listEffects(api.ListEffectsRequest{DuplicatesOnly: true})
	if len(dups) != 1 || dups[0].WorkflowID != "dup" || dups[0].Duplicates != 1 || len(dups[0].Reports) != 1 {
		t.Fatalf("duplicates: %+v", dups)
	}
	r := dups[0].Reports[0]
	if r.Verdict != api.VerdictDuplicate || r.Attempt != 1 || r.Identity != "woke-up" || r.RunID != wft.RunID ||
		r.IdempotencyKey != ou.IdempotencyKey || string(r.Result.Data) != `"pay_1"` || r.AfterClose {
		t.Fatalf("duplicate report: %+v", r)
	}
	d := s.describe("dup", "")
	if d.Info.Duplicates != 1 || len(d.EffectReports) != 1 || d.EffectReports[0].Verdict != api.VerdictDuplicate {
		t.Fatalf("describe of a run with a duplicate: info %+v, reports %+v", d.Info, d.EffectReports)
	}
	s.waitEvent("dup", wft.RunID, 1, history.TypeActivityDuplicateDetected)
	lw, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{})
	if err != nil || len(lw.Workflows) != 1 || lw.Workflows[0].Duplicates != 1 {
		t.Fatalf("list of a run with a duplicate: %+v, %v", lw, err)
	}
}

func (s *suite) pollActivity(queue string) *api.ActivityTask {
	s.t.Helper()
	for {
		resp, err := s.svc.PollActivityTask(s.ctx, &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "by-hand"})
		if err != nil {
			s.t.Fatal(err)
		}
		if resp.Task != nil {
			return resp.Task
		}
	}
}

// testTypedErrors checks that each typed error of the contract reaches the
// caller as the same sentinel, whatever the transport.
func testTypedErrors(t *testing.T, s *suite) {
	_, err := s.c.DescribeWorkflow(s.ctx, "missing", "")
	wantCode(t, "describe a missing workflow", err, api.ErrNotFound)
	err = s.c.GetWorkflow(s.ctx, "missing", "").Get(s.ctx, nil)
	wantCode(t, "Get a missing workflow", err, api.ErrNotFound)
	err = s.c.SignalWorkflow(s.ctx, "missing", "", "s", nil)
	wantCode(t, "signal a missing workflow", err, api.ErrNotFound)
	err = s.c.CancelWorkflow(s.ctx, "missing", "", "")
	wantCode(t, "cancel a missing workflow", err, api.ErrNotFound)
	_, err = s.c.GetHistory(s.ctx, "missing", "")
	wantCode(t, "history of a missing workflow", err, api.ErrNotFound)

	_, err = s.c.StartWorkflow(s.ctx, s.opts(""), "Idle", nil)
	wantCode(t, "start without an id", err, api.ErrInvalidArgument)
	_, err = s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "no-queue"}, "Idle", nil)
	wantCode(t, "start without a task queue", err, api.ErrInvalidArgument)
	_, err = s.c.StartWorkflow(s.ctx, s.opts(strings.Repeat("x", 4<<10)), "Idle", nil)
	wantCode(t, "start with an oversized id", err, api.ErrLimitExceeded)

	r := s.start(s.opts("errs"), "Idle", nil)
	_, err = s.c.StartWorkflow(s.ctx, s.opts("errs"), "Idle", nil)
	wantCode(t, "start an open workflow", err, api.ErrAlreadyStarted)
	err = s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "errs", Resolution: history.ResolvedHappened})
	wantCode(t, "resolve a run that is not paused", err, api.ErrNotPaused)
	_, err = s.c.DescribeWorkflow(s.ctx, "errs", "no-such-run")
	wantCode(t, "describe a missing run", err, api.ErrNotFound)

	if err := s.c.TerminateWorkflow(s.ctx, "errs", r.RunID(), "done"); err != nil {
		t.Fatal(err)
	}
	err = s.c.SignalWorkflow(s.ctx, "errs", r.RunID(), "s", nil)
	wantCode(t, "signal a closed run", err, api.ErrWorkflowClosed)
	err = s.c.TerminateWorkflow(s.ctx, "errs", "", "again")
	wantCode(t, "terminate a closed run", err, api.ErrWorkflowClosed)
	err = r.Get(s.ctx, nil)
	if !errors.Is(err, client.ErrTerminated) {
		t.Fatalf("Get of a terminated run: %v", err)
	}
}

// testTaskErrors drives the worker side of the contract by hand (no
// Worker) to reach the task errors: stale tasks and attempts, bad tokens.
func testTaskErrors(t *testing.T, s *suite) {
	const queue = "raw-tasks"
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "raw", TaskQueue: queue}, "Raw", nil); err != nil {
		t.Fatal(err)
	}
	wft := s.pollWFT(queue)
	if wft.WorkflowID != "raw" || wft.WorkflowType != "Raw" || wft.FirstEventID != 1 || len(wft.Events) == 0 ||
		wft.Events[0].Type() != history.TypeWorkflowStarted || len(wft.TaskToken) == 0 {
		t.Fatalf("workflow task: %+v", wft)
	}
	schedule := api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "1", ActivityType: "RawActivity", Options: api.ActivityOptions{StartToCloseTimeout: time.Minute}}}
	if _, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken,
		Commands: []api.Command{schedule}, Identity: "by-hand"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken})
	wantCode(t, "complete a workflow task twice", err, api.ErrStaleTask)
	_, err = s.svc.FailWorkflowTask(s.ctx, &api.FailWorkflowTaskRequest{TaskToken: wft.TaskToken, Cause: "panic"})
	wantCode(t, "fail a completed workflow task", err, api.ErrStaleTask)
	_, err = s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: []byte("not a token")})
	wantCode(t, "complete with a garbage token", err, api.ErrInvalidArgument)

	var at *api.ActivityTask
	for at == nil {
		resp, err := s.svc.PollActivityTask(s.ctx, &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "by-hand"})
		if err != nil {
			t.Fatal(err)
		}
		at = resp.Task
	}
	if at.ActivityType != "RawActivity" || at.ActivityID != "1" || at.Attempt != 1 || at.Deadline.IsZero() || at.WorkflowID != "raw" {
		t.Fatalf("activity task: %+v", at)
	}
	hb, err := s.svc.RecordActivityHeartbeat(s.ctx, &api.HeartbeatRequest{TaskToken: at.TaskToken})
	if err != nil || hb.CancelRequested || hb.Deadline.IsZero() {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	if _, err := s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: at.TaskToken, Identity: "by-hand"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: at.TaskToken})
	wantCode(t, "complete an activity attempt twice", err, api.ErrStaleAttempt)
	_, err = s.svc.RecordActivityHeartbeat(s.ctx, &api.HeartbeatRequest{TaskToken: at.TaskToken})
	wantCode(t, "heartbeat a finished attempt", err, api.ErrStaleAttempt)
	_, err = s.svc.FailActivity(s.ctx, &api.FailActivityRequest{TaskToken: []byte{0xc1}})
	wantCode(t, "fail with a garbage token", err, api.ErrInvalidArgument)

	// Completing the run closes it; a later complete is stale.
	wft = s.pollWFT(queue)
	done := api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{}}
	if _, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken, Commands: []api.Command{done}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken, Commands: []api.Command{done}})
	wantCode(t, "complete a closed run's task", err, api.ErrStaleTask)
	if err := s.c.GetWorkflow(s.ctx, "raw", "").Get(s.ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.svc.PollWorkflowTask(s.ctx, &api.PollWorkflowTaskRequest{})
	wantCode(t, "poll without a task queue", err, api.ErrInvalidArgument)
}

func (s *suite) pollWFT(queue string) *api.WorkflowTask {
	s.t.Helper()
	for {
		resp, err := s.svc.PollWorkflowTask(s.ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "by-hand"})
		if err != nil {
			s.t.Fatal(err)
		}
		if resp.Task != nil {
			return resp.Task
		}
	}
}

// waitPollers waits until n workflow-task polls are parked on queue, when
// the Env can tell; it reports whether it could.
func (s *suite) waitPollers(queue string, n int) bool {
	if s.env.WaitingPollers == nil {
		return false
	}
	for s.env.WaitingPollers(queue) < n {
		if s.ctx.Err() != nil {
			s.t.Fatalf("no poll parked on %q", queue)
		}
		runtime.Gosched()
	}
	return true
}

func testLongPoll(t *testing.T, s *suite) {
	const queue = "long-poll"
	type result struct {
		task *api.WorkflowTask
		err  error
	}
	got := make(chan result, 1)
	poll := func() {
		resp, err := s.svc.PollWorkflowTask(s.ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "poller"})
		if err != nil {
			got <- result{nil, err}
			return
		}
		got <- result{resp.Task, nil}
	}
	go poll()
	if !s.waitPollers(queue, 1) {
		t.Log("the Env cannot tell when a poll is parked: checking only that the poll gets the task")
	}
	r := s.start(client.StartOptions{ID: "woken", TaskQueue: queue}, "Raw", nil)
	for {
		res := <-got
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.task != nil {
			if res.task.WorkflowID != "woken" || res.task.RunID != r.RunID() {
				t.Fatalf("poll returned task %+v", res.task)
			}
			return
		}
		go poll() // the server's poll limit ended the wait first
	}
}

func testLongPollCancel(t *testing.T, s *suite) {
	const queue = "long-poll-cancel"
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	type result struct {
		resp *api.PollWorkflowTaskResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := s.svc.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue})
		got <- result{resp, err}
	}()
	s.waitPollers(queue, 1)
	canceled := time.Now()
	cancel()
	// Promptly: far sooner than the server's poll limit (a minute by
	// default), generously for a loaded machine.
	const prompt = 10 * time.Second
	select {
	case res := <-got:
		if res.err != nil && !errors.Is(res.err, context.Canceled) {
			t.Fatalf("canceled poll: %v, want nil or context.Canceled", res.err)
		}
		if res.err == nil && res.resp.Task != nil {
			t.Fatalf("canceled poll returned a task: %+v", res.resp.Task)
		}
		if d := time.Since(canceled); d > prompt {
			t.Fatalf("canceled poll returned after %s", d)
		}
	case <-time.After(prompt):
		t.Fatalf("poll still running %s after its context was canceled", prompt)
	}
	if s.env.WaitingPollers != nil {
		// The canceled poll left the engine's queue.
		for s.env.WaitingPollers(queue) != 0 {
			if s.ctx.Err() != nil {
				t.Fatal("the canceled poll is still parked in the engine")
			}
			runtime.Gosched()
		}
	}
}

// testChunks: a result above the inline threshold is stored as a chunk;
// the client reads the run's result whole, and GetChunks returns the chunk
// the history references (ErrNotFound for one it does not hold).
func testChunks(t *testing.T, s *suite) {
	s.startWorker()
	const n = 200 << 10
	var got string
	if _, err := s.c.ExecuteWorkflow(s.ctx, s.opts("bulky"), Bulky, n, &got); err != nil || len(got) != n {
		t.Fatalf("result of %d bytes, %v", len(got), err)
	}
	evs, err := s.c.GetHistory(s.ctx, "bulky", "")
	if err != nil {
		t.Fatal(err)
	}
	var ref []byte
	for _, ev := range evs {
		if c, ok := ev.Attrs.(*history.WorkflowCompleted); ok {
			ref = c.Result.Ref
		}
	}
	if len(ref) != history.HashSize {
		t.Fatalf("the result was recorded inline, not by reference")
	}
	resp, err := s.svc.GetChunks(s.ctx, &api.GetChunksRequest{Hashes: [][]byte{ref}, Ancestors: true})
	if err != nil || len(resp.Chunks) != 1 || !bytes.Equal(resp.Chunks[0].Hash(), ref) {
		t.Fatalf("GetChunks: %v, %v", resp, err)
	}
	_, err = s.svc.GetChunks(s.ctx, &api.GetChunksRequest{Hashes: [][]byte{history.ChunkHash(nil, []byte("absent"))}})
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("GetChunks of an absent chunk: %v, want ErrNotFound", err)
	}
}
