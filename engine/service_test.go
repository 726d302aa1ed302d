package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Service-level scenarios: every test drives *Engine through api.Service
// with scripted in-test workers, on an on-disk Badger store and a fake
// clock (see harness_test.go). Scenarios that judge only the machine's
// decisions are scripted in engine/machine.

var _ api.Service = (*Engine)(nil)

// --- timers ---

func TestTimerFiresExactlyAtDeadline(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "T")
	h.complete(h.pollWFT("q"), startTimer("t1", 5*time.Second))
	fireAt := testStart.Add(5 * time.Second)
	if d := h.describe("wf"); len(d.PendingTimers) != 1 || d.PendingTimers[0].TimerID != "t1" || !d.PendingTimers[0].FireAt.Equal(fireAt) {
		t.Fatalf("pending timers %+v", d.PendingTimers)
	}

	h.advance(5*time.Second - time.Millisecond)
	wantTypes(t, h.history("wf"), "WorkflowStarted WorkflowTaskCompleted TimerStarted")
	h.noWFT("q")

	h.advance(time.Millisecond)
	evs := h.history("wf")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskCompleted TimerStarted TimerFired")
	fired, ev := find[*history.TimerFired](t, evs)
	if fired.TimerID != "t1" || fired.StartedEventID != 3 || !ev.Time.Equal(fireAt) {
		t.Fatalf("TimerFired %+v at %v, want t1/3 at %v", fired, ev.Time, fireAt)
	}
	task := h.pollWFT("q")
	if task.FirstEventID != 1 || len(task.Events) != 4 {
		t.Fatalf("task after timer: first %d, %d events", task.FirstEventID, len(task.Events))
	}
	h.complete(task, completeWF(`"ok"`))
	if d := h.describe("wf"); len(d.PendingTimers) != 0 || d.Info.Status != api.StatusCompleted {
		t.Fatalf("after completion: %+v", d)
	}
}

func TestTimerOneDay(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "T")
	h.complete(h.pollWFT("q"), startTimer("day", 24*time.Hour))
	h.advance(23 * time.Hour)
	h.noWFT("q")
	h.advance(time.Hour)
	wantTypes(t, h.history("wf"), "WorkflowStarted WorkflowTaskCompleted TimerStarted TimerFired")
	h.complete(h.pollWFT("q"), completeWF(`"slept"`))
}

// --- workflow tasks ---

func TestWorkflowTaskAtMostOneInFlight(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	task := h.pollWFT("q")
	// Events arriving while the task runs do not produce a second task.
	h.signal("wf", "s1", `1`)
	h.signal("wf", "s2", `2`)
	h.noWFT("q")
	if d := h.describe("wf"); d.WorkflowTask == nil || !d.WorkflowTask.Started {
		t.Fatalf("workflow task %+v", d.WorkflowTask)
	}
	h.complete(task, startTimer("t", time.Hour))
	// They produce the next task at once when it completes.
	next := h.pollWFT("q")
	evs := next.Events
	wantTypes(t, evs, "WorkflowStarted SignalReceived SignalReceived WorkflowTaskCompleted TimerStarted")
	wtc, _ := find[*history.WorkflowTaskCompleted](t, evs)
	if wtc.SeenEventID != 1 {
		t.Fatalf("SeenEventID %d, want 1 (the signals arrived after the task was handed out)", wtc.SeenEventID)
	}
	if next.Attempt != 1 || next.NextEventID != 6 {
		t.Fatalf("next task attempt %d next %d", next.Attempt, next.NextEventID)
	}
	// The finished task's token is stale now.
	wantErr(t, h.completeErr(task, completeWF(`1`)), api.ErrStaleTask)
	h.complete(next, completeWF(`"done"`))
	wantErr(t, h.completeErr(next, completeWF(`1`)), api.ErrStaleTask)
}

func TestCompletionClosingRunRefusedWhenSignalArrived(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	task := h.pollWFT("q")
	h.signal("wf", "late", `"x"`)
	before := h.historyLen("wf")
	wantErr(t, h.completeErr(task, completeWF(`"done"`)), api.ErrStaleTask)
	if n := h.historyLen("wf"); n != before {
		t.Fatalf("refused completion wrote %d events", n-before)
	}
	// Re-dispatched at once with the signal and the full history.
	again := h.pollWFT("q")
	if again.FirstEventID != 1 {
		t.Fatalf("FirstEventID %d", again.FirstEventID)
	}
	wantTypes(t, again.Events, "WorkflowStarted SignalReceived")
	wantErr(t, h.completeErr(task, completeWF(`"done"`)), api.ErrStaleTask)
	h.complete(again, completeWF(`"done"`))
	if r := h.result("wf", ""); r.Status != api.StatusCompleted {
		t.Fatalf("status %s", r.Status)
	}
}

func TestWorkflowTaskTimeoutRedispatches(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Defaults.TaskTimeout = 10 * time.Second })
	h.start("wf", "W")
	task := h.pollWFT("q")
	h.advance(10*time.Second - time.Millisecond)
	h.noWFT("q")
	h.advance(time.Millisecond)
	evs := h.history("wf")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskFailed")
	if f, _ := find[*history.WorkflowTaskFailed](t, evs); f.Cause != "timeout" || f.Attempt != 1 {
		t.Fatalf("WorkflowTaskFailed %+v", f)
	}
	second := h.pollWFT("q")
	if second.Attempt != 2 || second.FirstEventID != 1 {
		t.Fatalf("second task attempt %d first %d", second.Attempt, second.FirstEventID)
	}
	wantErr(t, h.completeErr(task, completeWF(`1`)), api.ErrStaleTask)
	// A second timeout in the streak writes nothing more.
	h.advance(10 * time.Second)
	if n := count(h.history("wf"), history.TypeWorkflowTaskFailed); n != 1 {
		t.Fatalf("%d WorkflowTaskFailed events, want 1", n)
	}
	third := h.pollWFT("q")
	if third.Attempt != 3 {
		t.Fatalf("third attempt %d", third.Attempt)
	}
	h.complete(third, completeWF(`"ok"`))
	wtc, _ := find[*history.WorkflowTaskCompleted](t, h.history("wf"))
	if wtc.Attempt != 3 {
		t.Fatalf("WorkflowTaskCompleted attempt %d", wtc.Attempt)
	}
}

func TestFailWorkflowTaskFirstOfStreakOnly(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	fail := func(task *api.WorkflowTask) {
		t.Helper()
		if _, err := h.eng.FailWorkflowTask(h.ctx(), &api.FailWorkflowTaskRequest{TaskToken: task.TaskToken, Cause: "panic",
			Failure: history.Failure{Type: "Panic", Message: "boom"}}); err != nil {
			t.Fatal(err)
		}
	}
	task := h.pollWFT("q")
	fail(task)
	wantErr(t, h.completeErr(task), api.ErrStaleTask)
	for attempt := int32(2); attempt <= 3; attempt++ {
		task = h.pollWFT("q")
		if task.Attempt != attempt {
			t.Fatalf("attempt %d, want %d", task.Attempt, attempt)
		}
		fail(task)
	}
	evs := h.history("wf")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskFailed")
	if f, _ := find[*history.WorkflowTaskFailed](t, evs); f.Cause != "panic" || f.Failure.Message != "boom" || f.Attempt != 1 {
		t.Fatalf("WorkflowTaskFailed %+v", f)
	}
	d := h.describe("wf")
	if d.WorkflowTask == nil || d.WorkflowTask.Attempt != 4 || d.WorkflowTask.LastFailure == nil || d.WorkflowTask.LastFailure.Message != "boom" {
		t.Fatalf("workflow task %+v", d.WorkflowTask)
	}
	// From the fourth attempt on the retry backs off.
	h.noWFT("q")
	h.advance(time.Second)
	task = h.pollWFT("q")
	if task.Attempt != 4 {
		t.Fatalf("attempt %d", task.Attempt)
	}
	h.complete(task, startTimer("t", time.Minute))
	// A success ends the streak: the next failure is recorded again.
	h.advance(time.Minute)
	fail(h.pollWFT("q"))
	if n := count(h.history("wf"), history.TypeWorkflowTaskFailed); n != 2 {
		t.Fatalf("%d WorkflowTaskFailed, want 2", n)
	}
}

func TestStickyQueue(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Defaults.StickyTimeout = 2 * time.Second })
	h.start("wf", "W")
	task := h.pollWFT("q")
	h.completeSticky(task, "sticky-1", schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	h.completeActivity(h.pollActivity("q"), `"r"`)
	h.noWFT("q")

	// The next task goes to the sticky queue with only the new events.
	st := h.pollWFT("sticky-1")
	if st.FirstEventID != 2 || st.Events[0].ID != 2 || st.NextEventID != 6 {
		t.Fatalf("sticky task first %d next %d events %s", st.FirstEventID, st.NextEventID, types(st.Events))
	}
	wantTypes(t, st.Events, "WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityCompleted")
	h.completeSticky(st, "sticky-1", startTimer("t", time.Hour))

	// Nobody polls the sticky queue: after the sticky timeout the task
	// falls back to the normal queue with the full history.
	h.signal("wf", "s", `1`)
	if d := h.describe("wf"); d.WorkflowTask == nil || d.WorkflowTask.StickyQueue != "sticky-1" {
		t.Fatalf("workflow task %+v", d.WorkflowTask)
	}
	h.noWFT("q")
	h.advance(2*time.Second - time.Millisecond)
	h.noWFT("q")
	h.advance(time.Millisecond)
	full := h.pollWFT("q")
	if full.FirstEventID != 1 || len(full.Events) != 8 {
		t.Fatalf("fallback task first %d with %d events", full.FirstEventID, len(full.Events))
	}
	h.complete(full, completeWF(`"done"`))
}

// --- signals, cancel, terminate ---

func TestSignals(t *testing.T) {
	h := newHarness(t)
	_, err := h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: "nope", SignalName: "s"})
	wantErr(t, err, api.ErrNotFound)

	run := h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	if _, err := h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: "wf", RunID: run, SignalName: "go",
		Input: jsonPayload(`{"n":1}`), Identity: "alice"}); err != nil {
		t.Fatal(err)
	}
	task := h.pollWFT("q")
	sig, _ := find[*history.SignalReceived](t, task.Events)
	if sig.Name != "go" || string(sig.Input.Data) != `{"n":1}` || sig.Identity != "alice" {
		t.Fatalf("signal %+v", sig)
	}
	_, err = h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: "wf", RunID: "other-run", SignalName: "s"})
	wantErr(t, err, api.ErrNotFound)
	_, err = h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: ""})
	wantErr(t, err, api.ErrInvalidArgument)
	h.complete(task, completeWF(`1`))
	_, err = h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "s"})
	wantErr(t, err, api.ErrWorkflowClosed)
}

func TestSignalWithStart(t *testing.T) {
	h := newHarness(t)
	req := &api.SignalWithStartRequest{Start: api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"},
		SignalName: "hello", SignalInput: jsonPayload(`1`)}
	resp, err := h.eng.SignalWithStartWorkflow(h.ctx(), req)
	if err != nil || !resp.Started {
		t.Fatalf("signal-with-start: %+v %v", resp, err)
	}
	wantTypes(t, h.history("wf"), "WorkflowStarted SignalReceived")
	task := h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted SignalReceived")

	// With the run open it signals it.
	req.SignalInput = jsonPayload(`2`)
	again, err := h.eng.SignalWithStartWorkflow(h.ctx(), req)
	if err != nil || again.Started || again.RunID != resp.RunID {
		t.Fatalf("second signal-with-start: %+v %v", again, err)
	}
	h.complete(task)
	task = h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted SignalReceived SignalReceived WorkflowTaskCompleted")
	h.complete(task, completeWF(`1`))

	// After the run closed a new run starts (AllowDuplicate).
	third, err := h.eng.SignalWithStartWorkflow(h.ctx(), req)
	if err != nil || !third.Started || third.RunID == resp.RunID {
		t.Fatalf("third signal-with-start: %+v %v", third, err)
	}
	wantTypes(t, h.history("wf"), "WorkflowStarted SignalReceived")
	// Under RejectDuplicate it is refused, and nothing is written.
	h.terminate("wf")
	req.Start.ReusePolicy = api.RejectDuplicate
	_, err = h.eng.SignalWithStartWorkflow(h.ctx(), req)
	wantErr(t, err, api.ErrAlreadyStarted)
}

func (h *harness) terminate(id string) {
	h.t.Helper()
	if _, err := h.eng.TerminateWorkflow(h.ctx(), &api.TerminateWorkflowRequest{WorkflowID: id, Reason: "test"}); err != nil {
		h.t.Fatalf("terminate %s: %v", id, err)
	}
}

func TestCancelRequestRecordedOnce(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	for range 2 {
		if _, err := h.eng.RequestCancelWorkflow(h.ctx(), &api.CancelWorkflowRequest{WorkflowID: "wf", Reason: "user", Identity: "bob"}); err != nil {
			t.Fatal(err)
		}
	}
	if d := h.describe("wf"); !d.CancelRequested {
		t.Fatal("describe: cancel not requested")
	}
	task := h.pollWFT("q")
	if n := count(task.Events, history.TypeWorkflowCancelRequested); n != 1 {
		t.Fatalf("%d WorkflowCancelRequested, want 1", n)
	}
	cr, _ := find[*history.WorkflowCancelRequested](t, task.Events)
	if cr.Reason != "user" || cr.Identity != "bob" {
		t.Fatalf("cancel requested %+v", cr)
	}
	h.complete(task, cancelTimerCmd("t"), cancelWF())
	r := h.result("wf", "")
	if r.Status != api.StatusCanceled || r.Failure == nil {
		t.Fatalf("result %+v", r)
	}
	_, err := h.eng.RequestCancelWorkflow(h.ctx(), &api.CancelWorkflowRequest{WorkflowID: "wf"})
	wantErr(t, err, api.ErrWorkflowClosed)
}

func TestTerminate(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	task := h.pollWFT("q")
	if _, err := h.eng.TerminateWorkflow(h.ctx(), &api.TerminateWorkflowRequest{WorkflowID: "wf", Reason: "stuck",
		Details: jsonPayload(`"d"`), Identity: "ops"}); err != nil {
		t.Fatal(err)
	}
	evs := h.history("wf")
	wantTypes(t, evs, "WorkflowStarted WorkflowTerminated")
	if term, _ := find[*history.WorkflowTerminated](t, evs); term.Reason != "stuck" || term.Identity != "ops" {
		t.Fatalf("terminated %+v", term)
	}
	r := h.result("wf", "")
	if !r.Closed || r.Status != api.StatusTerminated || r.Failure == nil || r.Failure.Message != "stuck" {
		t.Fatalf("result %+v", r)
	}
	// The workflow task that was running is stale now.
	wantErr(t, h.completeErr(task, completeWF(`1`)), api.ErrStaleTask)
	_, err := h.eng.TerminateWorkflow(h.ctx(), &api.TerminateWorkflowRequest{WorkflowID: "wf"})
	wantErr(t, err, api.ErrWorkflowClosed)
	_, err = h.eng.TerminateWorkflow(h.ctx(), &api.TerminateWorkflowRequest{WorkflowID: "missing"})
	wantErr(t, err, api.ErrNotFound)
}

// --- id reuse ---

func TestIDReusePolicies(t *testing.T) {
	h := newHarness(t)
	finish := func(id string, cmd api.Command) {
		t.Helper()
		h.complete(h.pollWFT("q"), cmd)
	}
	startErr := func(id string, p api.ReusePolicy) (*api.StartWorkflowResponse, error) {
		return h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q", ReusePolicy: p})
	}

	// AllowDuplicate: a new run whatever the last one did.
	first := h.start("dup", "W")
	finish("dup", completeWF(`1`))
	resp, err := startErr("dup", api.AllowDuplicate)
	if err != nil || !resp.Started || resp.RunID == first {
		t.Fatalf("AllowDuplicate: %+v %v", resp, err)
	}
	h.terminate("dup")

	// AllowDuplicateFailedOnly: refused after success, allowed after failure.
	h.start("fo", "W")
	finish("fo", completeWF(`1`))
	_, err = startErr("fo", api.AllowDuplicateFailedOnly)
	wantErr(t, err, api.ErrAlreadyStarted)
	h.start("fo2", "W")
	finish("fo2", failWF("E", "bad"))
	if resp, err := startErr("fo2", api.AllowDuplicateFailedOnly); err != nil || !resp.Started {
		t.Fatalf("AllowDuplicateFailedOnly after failure: %+v %v", resp, err)
	}
	h.terminate("fo2")
	if resp, err := startErr("fo2", api.AllowDuplicateFailedOnly); err != nil || !resp.Started {
		t.Fatalf("AllowDuplicateFailedOnly after terminate: %+v %v", resp, err)
	}

	// RejectDuplicate: never a second run.
	h.start("rej", "W")
	h.terminate("rej")
	before := h.historyLen("rej")
	_, err = startErr("rej", api.RejectDuplicate)
	wantErr(t, err, api.ErrAlreadyStarted)
	if h.historyLen("rej") != before {
		t.Fatal("refused start wrote events")
	}

	// An open run: ErrAlreadyStarted, or the open run with ConflictUseExisting.
	open := h.start("open", "W")
	_, err = startErr("open", api.AllowDuplicate)
	wantErr(t, err, api.ErrAlreadyStarted)
	resp, err = h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: "open", WorkflowType: "W", TaskQueue: "q",
		ConflictPolicy: api.ConflictUseExisting})
	if err != nil || resp.Started || resp.RunID != open {
		t.Fatalf("ConflictUseExisting: %+v %v", resp, err)
	}
	if n := h.historyLen("open"); n != 1 {
		t.Fatalf("history %d events", n)
	}
}

func TestStartRequestIDIdempotent(t *testing.T) {
	h := newHarness(t)
	req := api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q", RequestID: "req-1"}
	first := h.startWith(req)
	if !first.Started {
		t.Fatal("not started")
	}
	again := h.startWith(req)
	if again.RunID != first.RunID {
		t.Fatalf("retried start returned run %q, want %q", again.RunID, first.RunID)
	}
	req.RequestID = "req-2"
	_, err := h.eng.StartWorkflow(h.ctx(), &req)
	wantErr(t, err, api.ErrAlreadyStarted)
	if n := h.historyLen("wf"); n != 1 {
		t.Fatalf("history %d events", n)
	}
}

// --- children ---

func TestChildWorkflowCompletes(t *testing.T) {
	h := newHarness(t)
	parentRun := h.start("parent", "P")
	h.complete(h.pollWFT("q"), childCmd("child", "C", history.ParentCloseAbandon))
	evs := h.history("parent")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskCompleted ChildWorkflowStarted")
	cs, _ := find[*history.ChildWorkflowStarted](t, evs)
	if cs.WorkflowID != "child" || cs.RunID == "" || cs.TaskQueue != "q" {
		t.Fatalf("child started %+v", cs)
	}
	d := h.describe("parent")
	if len(d.PendingChildren) != 1 || d.PendingChildren[0].RunID != cs.RunID || d.PendingChildren[0].InitiatedEventID != 3 {
		t.Fatalf("pending children %+v", d.PendingChildren)
	}
	ct := h.pollWFT("q")
	if ct.WorkflowID != "child" || ct.RunID != cs.RunID {
		t.Fatalf("child task for %s/%s", ct.WorkflowID, ct.RunID)
	}
	ws, _ := find[*history.WorkflowStarted](t, ct.Events)
	if ws.ParentWorkflowID != "parent" || ws.ParentRunID != parentRun || ws.ParentInitiatedEventID != 3 {
		t.Fatalf("child WorkflowStarted %+v", ws)
	}
	if cd := h.describe("child"); cd.Info.ParentWorkflowID != "parent" || cd.Info.ParentRunID != parentRun {
		t.Fatalf("child info %+v", cd.Info)
	}
	h.complete(ct, completeWF(`"child-result"`))

	pt := h.pollWFT("q")
	if pt.WorkflowID != "parent" {
		t.Fatalf("task for %s", pt.WorkflowID)
	}
	cc, _ := find[*history.ChildWorkflowCompleted](t, pt.Events)
	if cc.InitiatedEventID != 3 || cc.RunID != cs.RunID || string(cc.Result.Data) != `"child-result"` {
		t.Fatalf("child completed %+v", cc)
	}
	if d := h.describe("parent"); len(d.PendingChildren) != 0 {
		t.Fatalf("pending children %+v", d.PendingChildren)
	}
	h.complete(pt, completeWF(`1`))
}

func TestChildWorkflowFails(t *testing.T) {
	h := newHarness(t)
	h.start("parent", "P")
	h.complete(h.pollWFT("q"), childCmd("child", "C", history.ParentCloseAbandon))
	h.complete(h.pollWFT("q"), failWF("ChildError", "child broke"))
	pt := h.pollWFT("q")
	cf, _ := find[*history.ChildWorkflowFailed](t, pt.Events)
	if cf.InitiatedEventID != 3 || cf.Failure.Type != "ChildError" || cf.Failure.Message != "child broke" {
		t.Fatalf("child failed %+v", cf)
	}
	h.complete(pt, completeWF(`1`))

	// A terminated child is a failure too.
	h.start("parent2", "P")
	h.complete(h.pollWFT("q"), childCmd("child2", "C", history.ParentCloseAbandon))
	h.terminate("child2")
	pt = h.pollWFT("q")
	for pt.WorkflowID != "parent2" { // the child's own first task is still queued
		pt = h.pollWFT("q")
	}
	cf, _ = find[*history.ChildWorkflowFailed](t, pt.Events)
	if cf.Failure.Type != "Terminated" {
		t.Fatalf("terminated child failure %+v", cf.Failure)
	}
}

func TestChildStartRefusedWhenIDOpen(t *testing.T) {
	h := newHarness(t)
	h.start("busy", "C")
	h.start("parent", "P")
	var pt *api.WorkflowTask
	for pt == nil || pt.WorkflowID != "parent" {
		pt = h.pollWFT("q")
	}
	h.complete(pt, childCmd("busy", "C", history.ParentCloseAbandon))
	pt = h.pollWFT("q")
	for pt.WorkflowID != "parent" {
		pt = h.pollWFT("q")
	}
	wantTypes(t, pt.Events, "WorkflowStarted WorkflowTaskCompleted ChildWorkflowStarted ChildWorkflowFailed")
	cf, _ := find[*history.ChildWorkflowFailed](t, pt.Events)
	if cf.Failure.Type != "ChildWorkflowStartRefused" || cf.InitiatedEventID != 3 {
		t.Fatalf("child failed %+v", cf)
	}
	if d := h.describe("parent"); len(d.PendingChildren) != 0 {
		t.Fatalf("pending children %+v", d.PendingChildren)
	}
	if n := h.historyLen("busy"); n != 1 {
		t.Fatalf("busy has %d events", n)
	}
}

func TestParentClosePolicies(t *testing.T) {
	h := newHarness(t)
	h.start("parent", "P")
	h.complete(h.pollWFT("q"),
		childCmd("c-term", "C", history.ParentCloseTerminate),
		childCmd("c-cancel", "C", history.ParentCloseRequestCancel),
		childCmd("c-abandon", "C", history.ParentCloseAbandon))
	// Let every child take its first task so that they are mid-run.
	for range 3 {
		h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	}
	h.signal("parent", "finish", `1`)
	pt := h.pollWFT("q")
	if pt.WorkflowID != "parent" {
		t.Fatalf("task for %s", pt.WorkflowID)
	}
	h.complete(pt, completeWF(`"parent-done"`))
	h.settleAll() // the policy is applied in the background after the parent's commit

	if r := h.result("c-term", ""); r.Status != api.StatusTerminated {
		t.Fatalf("terminate policy: child is %s", r.Status)
	}
	if d := h.describe("c-cancel"); d.Info.Status != api.StatusRunning || !d.CancelRequested {
		t.Fatalf("request-cancel policy: child %s, cancel requested %v", d.Info.Status, d.CancelRequested)
	}
	ct := h.pollWFT("q")
	if ct.WorkflowID != "c-cancel" {
		t.Fatalf("task for %s", ct.WorkflowID)
	}
	if n := count(ct.Events, history.TypeWorkflowCancelRequested); n != 1 {
		t.Fatalf("%d cancel requests in the child", n)
	}
	h.complete(ct, cancelWF())
	if d := h.describe("c-abandon"); d.Info.Status != api.StatusRunning || d.CancelRequested {
		t.Fatalf("abandon policy: child %s, cancel requested %v", d.Info.Status, d.CancelRequested)
	}
	wantTypes(t, h.history("c-abandon"), "WorkflowStarted WorkflowTaskCompleted TimerStarted")
	// The parent's history is unaffected by its children closing after it.
	wantTypes(t, h.history("parent"), `WorkflowStarted WorkflowTaskCompleted ChildWorkflowStarted ChildWorkflowStarted
		ChildWorkflowStarted SignalReceived WorkflowTaskCompleted WorkflowCompleted`)
}

func TestChildTimeoutAndContinueAsNewReachParent(t *testing.T) {
	h := newHarness(t)
	h.start("parent", "P")
	timed := childCmd("c-timeout", "C", history.ParentCloseAbandon)
	timed.StartChildWorkflow.RunTimeout = time.Minute
	h.complete(h.pollWFT("q"), timed, childCmd("c-chain", "C", history.ParentCloseAbandon))
	next := func(id string) *api.WorkflowTask {
		t.Helper()
		for {
			task := h.pollWFT("q")
			if task.WorkflowID == id {
				return task
			}
			h.complete(task, startTimer("t", time.Hour))
		}
	}
	// The chained child continues as new; only the end of the chain is
	// reported to the parent.
	h.complete(next("c-chain"), continueAsNewCmd(`2`))
	h.complete(next("c-chain"), completeWF(`"end of chain"`))
	pt := next("parent")
	cc, _ := find[*history.ChildWorkflowCompleted](t, pt.Events)
	if cc.WorkflowID != "c-chain" || string(cc.Result.Data) != `"end of chain"` || cc.InitiatedEventID != 4 {
		t.Fatalf("child completed %+v", cc)
	}
	h.complete(pt, startTimer("p", time.Hour))
	// The other child times out.
	h.advance(time.Minute)
	pt = next("parent")
	cf, _ := find[*history.ChildWorkflowFailed](t, pt.Events)
	if cf.WorkflowID != "c-timeout" || cf.Failure.Type != "TimedOut" {
		t.Fatalf("child failed %+v", cf)
	}
}

func TestSignalExternalWorkflow(t *testing.T) {
	h := newHarness(t)
	h.start("target", "T")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	h.start("sender", "S")
	h.complete(h.pollWFT("q"), signalCmd("target", "ping"), signalCmd("nobody", "ping"))
	evs := h.history("sender")
	wantTypes(t, evs, "WorkflowStarted WorkflowTaskCompleted SignalExternalSent SignalExternalSent")
	if !evs[2].Attrs.(*history.SignalExternalSent).Delivered || evs[3].Attrs.(*history.SignalExternalSent).Delivered {
		t.Fatalf("delivery flags: %+v %+v", evs[2].Attrs, evs[3].Attrs)
	}
	task := h.pollWFT("q")
	if task.WorkflowID != "target" {
		t.Fatalf("task for %s", task.WorkflowID)
	}
	if sig, _ := find[*history.SignalReceived](t, task.Events); sig.Name != "ping" {
		t.Fatalf("signal %+v", sig)
	}
}

func TestStickyWorkerTimesOut(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Defaults.TaskTimeout = 5 * time.Second })
	h.start("wf", "W")
	h.completeSticky(h.pollWFT("q"), "sticky-1", startTimer("t", time.Minute))
	h.advance(time.Minute)
	st := h.pollWFT("sticky-1")
	if st.FirstEventID == 1 {
		t.Fatal("sticky task carries the full history")
	}
	// The sticky worker dies holding the task: after the task timeout the
	// retry goes to the normal queue with the full history.
	h.advance(5 * time.Second)
	task := h.pollWFT("q")
	if task.FirstEventID != 1 || task.Attempt != 2 {
		t.Fatalf("retry first %d attempt %d", task.FirstEventID, task.Attempt)
	}
	h.complete(task, completeWF(`1`))
}

// A run that continues as new closes: its children get the parent-close
// policy then (as in Temporal); the next run of the chain does not adopt
// them, so nothing else would ever apply it.
func TestParentClosePolicyOnContinueAsNew(t *testing.T) {
	h := newHarness(t)
	h.start("parent", "P")
	h.complete(h.pollWFT("q"), childCmd("kid", "C", history.ParentCloseTerminate), childCmd("stray", "C", history.ParentCloseAbandon))
	for range 2 {
		h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	}
	h.signal("parent", "again", `1`)
	pt := h.pollWFT("q")
	if pt.WorkflowID != "parent" {
		t.Fatalf("task for %s", pt.WorkflowID)
	}
	h.complete(pt, continueAsNewCmd(`2`))
	h.settleAll()
	if r := h.result("kid", ""); r.Status != api.StatusTerminated {
		t.Fatalf("child after the parent continued as new: %s", r.Status)
	}
	if d := h.describe("stray"); d.Info.Status != api.StatusRunning {
		t.Fatalf("abandoned child: %s", d.Info.Status)
	}
}

func TestDuplicateTimerIDRefused(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	task := h.pollWFT("q")
	// Refused: the task fails (bad_commands) and comes back.
	wantErr(t, h.completeErr(task, startTimer("t", time.Minute), startTimer("t", time.Hour)), api.ErrInvalidArgument)
	task = h.pollWFT("q")
	h.complete(task, startTimer("t", time.Minute))
	h.signal("wf", "s", `1`)
	task = h.pollWFT("q")
	wantErr(t, h.completeErr(task, startTimer("t", time.Hour)), api.ErrInvalidArgument)
	task = h.pollWFT("q")
	// Canceling it first frees the id.
	h.complete(task, cancelTimerCmd("t"), startTimer("t", time.Hour))
	h.advance(time.Minute)
	h.noWFT("q")
	h.advance(time.Hour - time.Minute)
	if evs := h.history("wf"); evs[len(evs)-1].Type() != history.TypeTimerFired {
		t.Fatalf("history:\n%s", types(evs))
	}
}
