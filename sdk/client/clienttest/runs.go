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
	"errors"
	"fmt"
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

func testUpdate(t *testing.T, s *suite) {
	s.startWorker()
	r := s.start(s.opts("upd"), Accumulate, 3)
	update := func(id string, n int) (int, error) {
		h, err := s.c.UpdateWorkflow(s.ctx, client.UpdateOptions{WorkflowID: "upd", UpdateID: id, Name: "add", Args: n})
		if err != nil {
			return 0, err
		}
		var total int
		err = h.Get(s.ctx, &total)
		return total, err
	}
	if total, err := update("u1", 4); err != nil || total != 7 {
		t.Fatalf("update: %d, %v; want 7", total, err)
	}
	if total, err := update("u1", 4); err != nil || total != 7 {
		t.Fatalf("the same update id again: %d, %v; want 7, applied once", total, err)
	}
	before, err := s.c.GetHistory(s.ctx, "upd", "")
	if err != nil {
		t.Fatal(err)
	}
	_, err = update("", -1)
	wantCode(t, "a rejected update", err, api.ErrUpdateRejected)
	_, err = update("", 0)
	wantCode(t, "a rejected update", err, api.ErrUpdateRejected)
	after, err := s.c.GetHistory(s.ctx, "upd", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("rejected updates wrote history: %d events, then %d", len(before), len(after))
	}
	_, err = s.c.UpdateWorkflow(s.ctx, client.UpdateOptions{WorkflowID: "no-such-workflow", Name: "add", Args: 1})
	wantCode(t, "update a missing workflow", err, api.ErrNotFound)
	// Update-with-start on the open run updates it.
	h, err := s.c.UpdateWithStartWorkflow(s.ctx, s.opts("upd"), Accumulate, 1000, client.UpdateOptions{Name: "add", Args: 1})
	if err != nil || h.RunID() != r.RunID() {
		t.Fatalf("update-with-start on the open run: %v", err)
	}
	var total int
	if err := h.Get(s.ctx, &total); err != nil || total != 8 {
		t.Fatalf("update-with-start: %d, %v; want 8", total, err)
	}
	if err := s.c.SignalWorkflow(s.ctx, "upd", "", "done", ""); err != nil {
		t.Fatal(err)
	}
	if err := r.Get(s.ctx, &total); err != nil || total != 8 {
		t.Fatalf("result %d, %v", total, err)
	}
	_, err = update("u9", 1)
	wantCode(t, "update a closed run", err, api.ErrWorkflowClosed)
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

// testDelete: an open run is refused (failed_precondition) unless forced,
// which terminates it first; a closed run is deleted and no longer found;
// StartOptions.Retention reaches the engine (the run's WorkflowStarted).
func testDelete(t *testing.T, s *suite) {
	s.startWorker()
	o := s.opts("del")
	o.Retention = 90 * time.Minute
	r := s.start(o, WaitForCancel, nil)
	started, ok := s.waitEvent("del", r.RunID(), 1, history.TypeWorkflowStarted).Attrs.(*history.WorkflowStarted)
	if !ok || started.Retention != 90*time.Minute {
		t.Fatalf("WorkflowStarted %+v: retention not recorded", started)
	}
	_, err := s.c.DeleteWorkflow(s.ctx, "del", "", false)
	wantCode(t, "delete an open run", err, api.ErrFailedPrecondition)
	runID, err := s.c.DeleteWorkflow(s.ctx, "del", "", true)
	if err != nil || runID != r.RunID() {
		t.Fatalf("forced delete: %q, %v", runID, err)
	}
	_, err = s.c.DescribeWorkflow(s.ctx, "del", runID)
	wantCode(t, "describe a deleted run", err, api.ErrNotFound)
	_, err = s.c.DeleteWorkflow(s.ctx, "del", runID, false)
	wantCode(t, "delete a deleted run", err, api.ErrNotFound)
}
