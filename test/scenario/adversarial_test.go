package scenario_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// A run canceled while a call awaits approval ends canceled: the tool never
// runs and the model is not called again.
func TestCancelWhileAwaitingApproval(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-C","amount":1}`),
		fakellm.Say("Paid."),
	})
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "cancel-approval", Task{Approve: true})
	waitEvent(t, ctx, c, "cancel-approval", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	must(t, c.CancelWorkflow(ctx, "cancel-approval", "", "changed my mind"))
	err := run.Get(ctx, nil)
	d, derr := c.DescribeWorkflow(ctx, "cancel-approval", "")
	must(t, derr)
	if err == nil || d.Info.Status != api.StatusCanceled {
		t.Fatalf("canceled run ended with %v, status %v", err, d.Info.Status)
	}
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 0 || model.Calls() != 1 {
		t.Fatalf("after the cancel: %d payments, %d model calls", pay, model.Calls())
	}
}

// An approval signal with a payload that is not an Approval (a CLI user
// typing --input '"yes"') must not wedge the run: it is ignored or
// reported, and a proper approval afterwards still works.
func TestMalformedApprovalSignal(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-M","amount":1}`),
		fakellm.Say("Paid."),
	})
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "bad-signal", Task{Approve: true})
	waitEvent(t, ctx, c, "bad-signal", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	must(t, c.SignalWorkflow(ctx, "bad-signal", "", agent.ApprovalSignal, "yes"))
	must(t, c.SignalWorkflow(ctx, "bad-signal", "", agent.ApprovalSignal, map[string]any{"Approved": "yes", "By": 7}))
	must(t, c.SignalWorkflow(ctx, "bad-signal", "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ada"}))
	// waitEvent fails the test on a failed workflow task (the run wedged).
	waitEvent(t, ctx, c, "bad-signal", "", "approval decided", isMarker(history.MarkerApprovalDecided))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 1 || res.Final != "Paid." {
		t.Fatalf("%d payments, result %+v", pay, res)
	}
}

// A SideEffect tool without a Reconcile lookup whose outcome is unknown
// pauses the run (kind outcome_unknown, with the key, in describe); a
// person's "happened" with the receipt found at the provider lets the agent
// go on with it, the tool is not run again, and the transcript shows the
// call completed.
func TestUnknownOutcomeResolvedByAPerson(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-U","amount":1}`),
		fakellm.Say("Paid."),
	}).KeepRequests()
	s := newScene(t, model, func(p *Provider) { p.failFirst, p.noLookup = true, true })
	c := s.env.Client
	run := s.start(t, ctx, "unknown-INV-U", Task{})
	waitEvent(t, ctx, c, "unknown-INV-U", "", "outcome unknown", func(ev history.Event) bool {
		_, ok := ev.Attrs.(*history.ActivityOutcomeUnknown)
		return ok
	})
	d, err := c.DescribeWorkflow(ctx, "unknown-INV-U", "")
	must(t, err)
	_, _, _, _, keys := s.prov.snapshot()
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseOutcomeUnknown ||
		d.Info.Pause.IdempotencyKey != keys["SendPayment"][0] {
		t.Fatalf("describe: status %v, pause %+v, key seen %v", d.Info.Status, d.Info.Pause, keys)
	}
	if got := toolCalls(t, ctx, c, "unknown-INV-U", "")["SendPayment"]; len(got) != 1 || got[0].State != api.CallUnknown {
		t.Fatalf("paused call in the transcript: %+v", got)
	}
	must(t, c.ResolveActivity(ctx, client.ResolveRequest{WorkflowID: "unknown-INV-U", Resolution: history.ResolvedHappened,
		Result: "pay_001", By: "clerk", Reason: "found at the provider"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 1 || res.Final != "Paid." {
		t.Fatalf("%d payment calls, result %+v", pay, res)
	}
	reqs := model.Requests()
	if told := requestToolMessages(t, reqs[len(reqs)-1]); len(told) != 1 || told[0][1] != "pay_001" {
		t.Fatalf("the model was told %q", told)
	}
	if got := toolCalls(t, ctx, c, "unknown-INV-U", "")["SendPayment"]; len(got) != 1 || got[0].State != api.CallCompleted {
		t.Fatalf("resolved call in the transcript: %+v", got)
	}
}

// A budget raised too little pauses the run again at the next crossing;
// each pause is visible in describe, and the stop then ends the run.
func TestBudgetRaisedTooLittlePausesAgain(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("ReadInvoice", `{"id":"INV-1"}`),
		fakellm.CallTool("ReadInvoice", `{"id":"INV-2"}`),
		fakellm.CallTool("ReadInvoice", `{"id":"INV-3"}`),
		fakellm.Say("All read."),
	})
	s := newScene(t, model)
	run := s.start(t, ctx, "raise-twice", Task{Budget: history.Budget{MaxTurns: 1}})
	waitPausedForBudget(t, s, "raise-twice")
	_, err := s.env.Client.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "raise-twice", Budget: history.Budget{MaxTurns: 2}})
	must(t, err)
	n := 0
	waitEvent(t, ctx, s.env.Client, "raise-twice", "", "a second BudgetExceeded", func(ev history.Event) bool {
		if _, ok := ev.Attrs.(*history.BudgetExceeded); ok {
			n++
		}
		return n == 2
	})
	d, err := s.env.Client.DescribeWorkflow(ctx, "raise-twice", "")
	must(t, err)
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseBudget || model.Calls() != 2 {
		t.Fatalf("after the small raise: status %v, pause %+v, %d model calls", d.Info.Status, d.Info.Pause, model.Calls())
	}
	_, err = s.env.Client.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "raise-twice", Stop: true, Reason: "enough"})
	must(t, err)
	if err := run.Get(ctx, nil); err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("the stopped run ended with %v", err)
	}
}

// The worker stops (a deploy) while a call awaits approval; a new worker
// process — its own tools, nothing cached — takes the run over: it replays
// the first turn from history (no tool runs again, no model call repeats),
// and after the approval runs only the approved payment. The keys of the
// first turn's actions are the ones the tools saw.
func TestNewWorkerTakesOverAnAgentAwaitingApproval(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{Name: "ReadInvoice", Arguments: `{"id":"INV-R"}`},
			fakellm.ToolCall{Name: "EmailVendor", Arguments: `{"invoice_id":"INV-R","to":"ap@acme.test","body":"paying soon"}`},
		),
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-R","amount":5}`),
		fakellm.Say("Paid INV-R."),
	})
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "takeover", Task{Approve: true})
	waitEvent(t, ctx, c, "takeover", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	s.env.StopWorker()
	_, _, _, mailsBefore, keysBefore := s.prov.snapshot()

	p2 := newProvider()
	hs := httptest.NewServer(model)
	t.Cleanup(hs.Close)
	m2, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", Model: "fake-1"})
	must(t, err)
	w2 := s.env.NewWorker(worker.Options{Identity: "second"})
	register(t, w2, m2, p2)
	s.env.RunWorker(w2)
	must(t, c.SignalWorkflow(ctx, "takeover", "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ada"}))
	// The run's next task waits on the stopped worker's sticky queue for
	// the sticky timeout (testenv's doc): move the clock past it.
	s.env.Clock.Advance(time.Minute)
	var res agent.Result
	must(t, run.Get(ctx, &res))
	pay2, _, _, mails2, keys2 := p2.snapshot()
	pay1, _, _, mails1, _ := s.prov.snapshot()
	if res.Final != "Paid INV-R." || pay1 != 0 || mails1 != 1 || mailsBefore != 1 || pay2 != 1 || mails2 != 0 || model.Calls() != 3 {
		t.Fatalf("result %+v; first worker: %d payments %d mails; second: %d payments %d mails; %d model calls",
			res, pay1, mails1, pay2, mails2, model.Calls())
	}
	calls := toolCalls(t, ctx, c, "takeover", "")
	if got := calls["EmailVendor"]; len(got) != 1 || got[0].IdempotencyKey != keysBefore["EmailVendor"][0] {
		t.Fatalf("EmailVendor %+v, key seen %v", got, keysBefore)
	}
	if got := calls["SendPayment"]; len(got) != 1 || got[0].IdempotencyKey != keys2["SendPayment"][0] || got[0].State != api.CallCompleted {
		t.Fatalf("SendPayment %+v, key seen %v", got, keys2)
	}
}

// A run terminated while its payment is in flight leaves the action
// unknown; a new run of the same workflow id paying the same invoice must
// not pay blindly: it pauses (docs/effects.md: "in flight or unknown from
// an earlier run → the new run pauses").
func TestReusedIDWhilePaymentInFlightPauses(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-F","amount":1}`),
		fakellm.Say("Paid."),
	})
	hold := make(chan struct{})
	s := newScene(t, model, func(p *Provider) { p.hold, p.started, p.noLookup = hold, make(chan struct{}, 4), true })
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release) // before the env stops its worker (cleanups run last first)
	c := s.env.Client
	s.start(t, ctx, "inflight-INV-F", Task{})
	select {
	case <-s.prov.started:
	case <-ctx.Done():
		t.Fatal("the payment never started")
	}
	must(t, c.TerminateWorkflow(ctx, "inflight-INV-F", "", "operator"))
	s.start(t, ctx, "inflight-INV-F", Task{})
	waitEvent(t, ctx, c, "inflight-INV-F", "", "the second run's payment scheduled", func(ev history.Event) bool {
		a, ok := ev.Attrs.(*history.ActivityScheduled)
		return ok && a.ActivityType == "SendPayment"
	})
	var d *api.DescribeWorkflowResponse
	for {
		var err error
		d, err = c.DescribeWorkflow(ctx, "inflight-INV-F", "")
		must(t, err)
		if d.Info.Status == api.StatusPaused || len(s.prov.started) > 0 {
			break
		}
		// Not paused yet: wait for the run's next event.
		_, err = c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "inflight-INV-F", FromEventID: d.Info.HistoryLength + 1, WaitNewEvents: true})
		must(t, err)
	}
	if len(s.prov.started) > 0 {
		t.Fatal("the second run dispatched the payment while the first run's was in flight")
	}
	if d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseOutcomeUnknown {
		t.Fatalf("second run: status %v, pause %+v", d.Info.Status, d.Info.Pause)
	}
	release()
}

// An Idempotent tool whose outcome is unknown is retried with the same key
// (docs/effects.md), so the downstream deduplicates the second delivery.
func TestIdempotentUnknownRetriedWithTheSameKey(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("EmailVendor", `{"invoice_id":"INV-E","to":"ap@acme.test","body":"hello"}`),
		fakellm.Say("Mailed."),
	})
	s := newScene(t, model, func(p *Provider) { p.mailUnknown = true })
	run := s.start(t, ctx, "mail-INV-E", Task{})
	var res agent.Result
	must(t, run.Get(ctx, &res))
	_, _, _, mails, keys := s.prov.snapshot()
	if res.Final != "Mailed." || mails != 2 || len(keys["EmailVendor"]) != 2 || keys["EmailVendor"][0] != keys["EmailVendor"][1] {
		t.Fatalf("result %+v, %d mail calls, keys %v", res, mails, keys["EmailVendor"])
	}
}

// A call nobody approves within ApprovalTimeout counts as rejected: the
// tool does not run and the model is told why.
func TestApprovalTimeoutCountsAsRejected(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-T","amount":1}`),
		fakellm.Say("Nobody approved."),
	}).KeepRequests()
	s := newScene(t, model)
	run := s.start(t, ctx, "timeout-INV-T", Task{Approve: true, ApprovalTimeout: time.Hour})
	var res agent.Result
	must(t, run.Get(ctx, &res)) // the env's clock skips the hour
	reqs := model.Requests()
	told := requestToolMessages(t, reqs[len(reqs)-1])
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 0 || res.Final != "Nobody approved." || len(told) != 1 ||
		told[0][1] != "rejected by nobody (the approval timed out): no approval within 1h0m0s. The tool did not run." {
		t.Fatalf("%d payments, result %+v, told %q", pay, res, told)
	}
	if got := toolCalls(t, ctx, s.env.Client, "timeout-INV-T", "")["SendPayment"]; len(got) != 1 || got[0].State != api.CallRejected {
		t.Fatalf("timed-out call in the transcript: %+v", got)
	}
}

// Stopping the budget of a run that holds no model call — a person who
// wants a busy agent to stop spending — must not be a silent no-op that
// lets the agent go on: it is refused with an error that says what to do,
// and the run is left as it was.
func TestBudgetStopWithNothingHeldIsRefused(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-S","amount":1}`),
		fakellm.Say("Paid."),
	})
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "stop-unheld", Task{Approve: true, Budget: history.Budget{MaxTurns: 10}})
	waitEvent(t, ctx, c, "stop-unheld", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	_, err := c.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "stop-unheld", Stop: true, Reason: "enough"})
	if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), "cancel") {
		t.Fatalf("stop with nothing held: %v, want ErrInvalidArgument saying to cancel the run", err)
	}
	must(t, c.SignalWorkflow(ctx, "stop-unheld", "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ada"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Paid." {
		t.Fatalf("result %+v", res)
	}
}

// An approval that applies to no call — a call id nobody asked about, a
// call already decided, a payload that is not an Approval — is recorded as
// ignored, with why, in history and in the transcript; it never decides or
// flips a call. The proper approvals still work.
func TestApprovalForNoPendingCallIsRecordedAsIgnored(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(fakellm.ToolCall{ID: "0", Name: "SendPayment", Arguments: `{"invoice_id":"INV-I1","amount":1}`}),
		// The server numbers calls per message: turn 2's call has id "0" too.
		fakellm.CallTools(fakellm.ToolCall{ID: "0", Name: "SendPayment", Arguments: `{"invoice_id":"INV-I2","amount":2}`}),
		fakellm.Say("Both paid."),
	})
	s := newScene(t, model, func(p *Provider) { p.hold, p.started = make(chan struct{}), make(chan struct{}) })
	c := s.env.Client
	const id = "ignored-approvals"
	run := s.start(t, ctx, id, Task{Approve: true})
	// ignored waits for the n-th ignored approval and returns it as the
	// transcript shows it.
	ignored := func(n int, what string) api.IgnoredApproval {
		t.Helper()
		seen := 0
		waitEvent(t, ctx, c, id, "", what, func(ev history.Event) bool {
			if isMarker(history.MarkerApprovalIgnored)(ev) {
				seen++
			}
			return seen == n
		})
		tr, err := c.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id})
		must(t, err)
		if len(tr.Ignored) != n || tr.Ignored[n-1].EventID == 0 {
			t.Fatalf("%s: the transcript's ignored approvals: %+v", what, tr.Ignored)
		}
		return tr.Ignored[n-1]
	}
	waitEvent(t, ctx, c, id, "", "approval requested", isMarker(history.MarkerApprovalRequested))
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{CallID: "call_9", Approved: true, By: "eve"}))
	if ign := ignored(1, "the unknown call's approval ignored"); ign.CallID != "call_9" || ign.By != "eve" || !ign.Approved ||
		!strings.Contains(ign.Why, `no tool call "call_9" is awaiting approval`) || !strings.Contains(ign.Why, "awaiting: 0") {
		t.Fatalf("ignored approval %+v", ign)
	}
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, "yes"))
	if ign := ignored(2, "the malformed approval ignored"); !strings.Contains(ign.Why, "not an agent.Approval") {
		t.Fatalf("malformed approval ignored as %+v", ign)
	}
	if tc := toolCalls(t, ctx, c, id, "")["SendPayment"]; len(tc) != 1 || tc[0].State != api.CallAwaitingApproval {
		t.Fatalf("after the ignored approvals: %+v", tc)
	}
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{CallID: "0", Approved: true, By: "ada"}))
	<-s.prov.started // the first payment runs (held): call "0" of turn 1 is decided
	// Sent twice (a script retrying): the second one lands after the first
	// call was decided; it must neither flip it nor decide turn 2's call
	// that reuses the id.
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{CallID: "0", Approved: false, By: "mallory", Reason: "late"}))
	if ign := ignored(3, "the duplicate approval ignored"); ign.By != "mallory" || !strings.Contains(ign.Why, `call "0" was already approved by ada`) {
		t.Fatalf("duplicate approval ignored as %+v", ign)
	}
	close(s.prov.hold)
	n := 0
	waitEvent(t, ctx, c, id, "", "turn 2's approval requested", func(ev history.Event) bool {
		if isMarker(history.MarkerApprovalRequested)(ev) {
			n++
		}
		return n == 2
	})
	if tc := toolCalls(t, ctx, c, id, "")["SendPayment"]; len(tc) != 2 || tc[0].State != api.CallCompleted || tc[0].ApprovedBy != "ada" ||
		tc[1].State != api.CallAwaitingApproval {
		t.Fatalf("after the duplicate approval: %+v", tc)
	}
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{CallID: "0", Approved: true, By: "ada"}))
	<-s.prov.started
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 2 || res.Final != "Both paid." {
		t.Fatalf("%d payments, result %+v", pay, res)
	}
	// The ignored approvals replay: same markers, same decisions.
	evs, err := c.GetHistory(ctx, id, run.RunID())
	must(t, err)
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Payables))
	must(t, r.ReplayHistory(history.RunRef{WorkflowID: id, RunID: run.RunID()}, evs, worker.ReplayOptions{Chunks: client.NewChunkCache(c.Service(), 0)}))
}

// A task for a workflow type no worker on the queue registered fails
// visibly and typed: WorkflowTaskFailed with the cause
// unknown_workflow_type, naming the type and the registered ones, and the
// run's describe says so — it does not loop on untyped errors.
func TestTaskForUnregisteredWorkflowTypeFailsTyped(t *testing.T) {
	ctx := testCtx(t)
	s := newScene(t, fakellm.New(fakellm.Script{fakellm.Say("unused")}))
	c := s.env.Client
	_, err := c.StartWorkflow(ctx, client.StartOptions{ID: "unregistered", TaskQueue: s.env.TaskQueue()}, "ShipOrder", nil)
	must(t, err)
	var failed *history.WorkflowTaskFailed
	for from := int64(1); failed == nil; {
		resp, err := c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "unregistered", FromEventID: from, WaitNewEvents: true})
		must(t, err)
		for _, ev := range resp.Events {
			if f, ok := ev.Attrs.(*history.WorkflowTaskFailed); ok {
				failed = f
			}
		}
		from += int64(len(resp.Events))
	}
	if failed.Cause != api.CauseUnknownWorkflowType || failed.Failure.Type != sdk.FailureTypeUnknownWorkflowType ||
		!strings.Contains(failed.Failure.Message, `"ShipOrder"`) || !strings.Contains(failed.Failure.Message, "Payables") {
		t.Fatalf("the failed task: cause %q, failure %+v", failed.Cause, failed.Failure)
	}
	d, err := c.DescribeWorkflow(ctx, "unregistered", "")
	must(t, err)
	if d.Info.Status != api.StatusRunning || d.WorkflowTask == nil || d.WorkflowTask.LastFailure == nil ||
		d.WorkflowTask.LastFailure.Type != sdk.FailureTypeUnknownWorkflowType {
		t.Fatalf("describe: status %v, task %+v", d.Info.Status, d.WorkflowTask)
	}
}

// An approval sent while the model's answer is still being written (the
// live stream shows the call's id before the answer is recorded) is held
// and applies to that call once the answer asks for it; one naming a call
// the answer does not ask for, or naming none while nothing awaits, is
// ignored with why.
func TestApprovalSentBeforeTheAnswerIsRecorded(t *testing.T) {
	ctx := testCtx(t)
	asked, release := make(chan struct{}), make(chan struct{})
	var askedOnce, releaseOnce sync.Once
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		if r.Turn > 0 {
			return fakellm.Say("Paid.")
		}
		askedOnce.Do(func() { close(asked) })
		<-release // the answer is being written
		return fakellm.CallTools(fakellm.ToolCall{ID: "call_s", Name: "SendPayment", Arguments: `{"invoice_id":"INV-S","amount":3}`})
	})
	s := newScene(t, model)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the model's server closes
	c := s.env.Client
	const id = "early-approval"
	run := s.start(t, ctx, id, Task{Approve: true})
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the model was never called")
	}
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{CallID: "call_s", Approved: true, By: "ada"}))
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{CallID: "call_other", Approved: true, By: "ada"}))
	must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "bob"}))
	// The agent took the three, in order: the last is ignored at once.
	waitEvent(t, ctx, c, id, "", "the approval naming no call ignored", isMarker(history.MarkerApprovalIgnored))
	releaseOnce.Do(func() { close(release) })
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 1 || res.Final != "Paid." {
		t.Fatalf("%d payments, result %+v", pay, res)
	}
	tr, err := c.GetTranscript(ctx, id, "")
	must(t, err)
	if len(tr.Ignored) != 2 || tr.Ignored[0].By != "bob" || tr.Ignored[0].Why != "no tool call is awaiting approval" ||
		tr.Ignored[1].CallID != "call_other" || tr.Ignored[1].Why != `no tool call "call_other" is awaiting approval` {
		t.Fatalf("ignored approvals %+v", tr.Ignored)
	}
	if tc := toolCalls(t, ctx, c, id, "")["SendPayment"]; len(tc) != 1 || tc[0].State != api.CallCompleted || tc[0].ApprovedBy != "ada" {
		t.Fatalf("the payment call %+v", tc)
	}
}

// TwoDesks runs two agents at once in one workflow, each paying its own
// invoice after a person's approval on its own signal.
func TwoDesks(ctx sdk.Context, _ Task) ([]string, error) {
	var p *Provider
	out := make([]string, 2)
	var errs [2]error
	done := 0
	for i, desk := range []string{"a", "b"} {
		sdk.Go(ctx, func(ctx sdk.Context) {
			a := agent.New(ctx, agent.Options{Model: "fake-1", System: "desk " + desk,
				Tools:          []agent.Tool{agent.NewTool(p.SendPayment, "Pay an invoice.", agent.RequireApproval())},
				ApprovalSignal: "approve-" + desk})
			res, err := a.Run(ctx, "Pay the invoice of desk "+desk+".")
			out[i], errs[i] = res.Final, err
			done++
		})
	}
	_ = sdk.Await(ctx, func() bool { return done == 2 })
	return out, errors.Join(errs[:]...)
}

// Two agents of one workflow waiting for approvals at the same time, each
// on its own signal (Options.ApprovalSignal), get their own decisions —
// even for calls with the same id.
func TestTwoAgentsOfOneWorkflowApprovedSeparately(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		if r.Turn > 0 {
			return fakellm.Say("done")
		}
		inv := "INV-B"
		if msgs, err := r.Messages(); err == nil && len(msgs) > 0 && msgs[0]["content"] == "desk a" {
			inv = "INV-A"
		}
		return fakellm.CallTools(fakellm.ToolCall{ID: "pay", Name: "SendPayment", Arguments: `{"invoice_id":"` + inv + `","amount":5}`})
	}).KeepRequests()
	s := newScene(t, model, withWorker(func(w registrar) { must(t, w.RegisterWorkflow(TwoDesks)) }))
	c := s.env.Client
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "two-desks", TaskQueue: s.env.TaskQueue()}, TwoDesks, Task{})
	must(t, err)
	n := 0
	waitEvent(t, ctx, c, "two-desks", "", "both desks' approval requests", func(ev history.Event) bool {
		if isMarker(history.MarkerApprovalRequested)(ev) {
			n++
		}
		return n == 2
	})
	must(t, c.SignalWorkflow(ctx, "two-desks", "", "approve-b", agent.Approval{CallID: "pay", Approved: false, By: "bob", Reason: "not ours"}))
	must(t, c.SignalWorkflow(ctx, "two-desks", "", "approve-a", agent.Approval{CallID: "pay", Approved: true, By: "ada"}))
	var out []string
	must(t, run.Get(ctx, &out))
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 1 {
		t.Fatalf("%d payments, want desk a's only", pay)
	}
	told := map[string][][2]string{} // desk's system prompt → the tool results its model was told
	for _, r := range model.Requests() {
		if msgs, err := r.Messages(); err == nil && r.Turn == 1 {
			told[msgs[0]["content"].(string)] = requestToolMessages(t, r)
		}
	}
	if a, b := told["desk a"], told["desk b"]; len(a) != 1 || a[0][1] != "pay_001" || len(b) != 1 || b[0][1] != "rejected by bob: not ours. The tool did not run." {
		t.Fatalf("the desks' models were told %q", told)
	}
}
