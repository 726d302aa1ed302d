package sdk

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Activities used by the scenarios. Their bodies never run here: the fake
// engine supplies their results.

func Greet(_ context.Context, name string) (string, error) { return "Hello, " + name, nil }

type Invoice struct {
	ID     string
	Amount int64
}

type Payment struct {
	Invoice string
	Amount  int64
}

type Receipt struct {
	PaymentID string
	Amount    int64
}

type Approval struct {
	OK bool
	By string
}

func CheckBudget(_ context.Context, inv Invoice) (bool, error) { return inv.Amount < 10_000, nil }
func SendPayment(_ context.Context, p Payment) (Receipt, error) {
	return Receipt{PaymentID: "p-" + p.Invoice}, nil
}
func RefundPayment(_ context.Context, p Payment) (struct{}, error) { return struct{}{}, nil }
func Fetch(_ context.Context, url string) (string, error)          { return url, nil }
func Summarize(_ context.Context, texts []string) (string, error) {
	return strings.Join(texts, "|"), nil
}
func LongTool(_ context.Context, n int) (int, error)                      { return n, nil }
func Notify(_ context.Context, msg string) (struct{}, error)              { return struct{}{}, nil }
func ChildStep(_ context.Context, n int) (int, error)                     { return n * 2, nil }
func ProviderCall(_ context.Context, prompt string) (string, error)       { return prompt, nil }
func PaymentByKey(_ context.Context, p Payment) (Receipt, error)          { return Receipt{}, nil }
func NoInput(_ context.Context) error                                     { return nil }
func Stamped(_ context.Context, m map[string]int) (map[string]int, error) { return m, nil }

var ErrRejected = errors.New("payment rejected")

// PayInvoice is the design document's agent.
func PayInvoice(ctx Context, inv Invoice) (Receipt, error) {
	ctx = WithActivityOptions(ctx, ActivityOptions{StartToCloseTimeout: time.Minute})
	ok, err := ExecuteActivity(ctx, CheckBudget, inv).Get(ctx)
	if err != nil || !ok {
		return Receipt{}, err
	}
	approval := GetSignalChannel[Approval](ctx, "approve").Receive(ctx)
	if !approval.OK {
		return Receipt{}, ErrRejected
	}
	return ExecuteActivity(ctx, SendPayment, Payment{Invoice: inv.ID, Amount: inv.Amount}).Get(ctx)
}

func Hello(ctx Context, name string) (string, error) {
	return ExecuteActivity(ctx, Greet, name).Get(ctx)
}

func TestHello(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Hello}, Greet)
	f := newFake(t, reg, Hello, "World")

	cmds := f.task()
	wantTypes(t, cmds, api.CommandScheduleActivity)
	s := cmds[0].ScheduleActivity
	if s.ActivityType != "Greet" || s.ActivityID != "1" || s.Options.TaskQueue != "agents" || s.Effect != history.Read || s.KeyMaterial != nil {
		t.Fatalf("schedule = %+v", s)
	}
	var in string
	if err := DefaultConverter().FromPayload(s.Input, &in); err != nil || in != "World" {
		t.Fatalf("input = %q, %v", in, err)
	}

	if f.exec.WorkflowClosed() {
		t.Fatal("closed too early")
	}
	f.completeActivity("1", "Hello, World")
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	if !f.exec.WorkflowClosed() {
		t.Fatal("the decision closes the run: nothing left to cache")
	}
	var got string
	f.result(&got)
	if got != "Hello, World" {
		t.Fatalf("result = %q", got)
	}
	f.checkReplay()
	if st := f.exec.Stats(); st.ReplayedFromStart != 0 || st.ReplayedDecisions != 0 || st.Tasks != 2 {
		t.Fatalf("sticky stats = %+v", st)
	}
}

func TestPayInvoiceAgent(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{PayInvoice}, CheckBudget)
	if err := reg.RegisterActivity(SendPayment, RegisterActivityOptions{Effect: history.SideEffect, HasReconcile: true}); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, reg, PayInvoice, Invoice{ID: "INV-9", Amount: 4200})
	cmds := f.task()
	wantTypes(t, cmds, api.CommandScheduleActivity)
	if cmds[0].ScheduleActivity.Options.StartToCloseTimeout != time.Minute {
		t.Fatalf("options = %+v", cmds[0].ScheduleActivity.Options)
	}
	f.completeActivity("1", true)
	wantTypes(t, f.task()) // waits for the human
	f.signal("approve", Approval{OK: true, By: "ana"})
	cmds = f.task()
	wantTypes(t, cmds, api.CommandScheduleActivity)
	s := cmds[0].ScheduleActivity
	if s.ActivityType != "SendPayment" || s.Effect != history.SideEffect || !s.HasReconcile || s.ActivityID != "2" {
		t.Fatalf("payment = %+v", s)
	}
	f.completeActivity("2", Receipt{PaymentID: "pay-1", Amount: 4200})
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var r Receipt
	f.result(&r)
	if r.PaymentID != "pay-1" {
		t.Fatalf("receipt = %+v", r)
	}
	f.checkReplay()
}

func Sequential(ctx Context, urls []string) (string, error) {
	var texts []string
	for _, u := range urls {
		s, err := ExecuteActivity(ctx, Fetch, u).Get(ctx)
		if err != nil {
			return "", err
		}
		texts = append(texts, s)
	}
	return ExecuteActivity(ctx, Summarize, texts).Get(ctx)
}

func TestSequentialActivities(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Sequential}, Fetch, Summarize)
	f := newFake(t, reg, Sequential, []string{"a", "b", "c"})
	for i, u := range []string{"a", "b", "c"} {
		cmds := f.task()
		wantTypes(t, cmds, api.CommandScheduleActivity)
		if id := cmds[0].ScheduleActivity.ActivityID; id != fmt.Sprint(i+1) {
			t.Fatalf("activity id = %s", id)
		}
		f.completeActivity(fmt.Sprint(i+1), "text-"+u)
	}
	cmds := f.task()
	wantTypes(t, cmds, api.CommandScheduleActivity)
	f.completeActivity("4", "summary")
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var got string
	f.result(&got)
	if got != "summary" {
		t.Fatalf("result = %q", got)
	}
	f.checkReplay()
}

// Parallel fans out with Go and collects in completion order with a
// Selector over a channel and the futures.
func Parallel(ctx Context, urls []string) ([]string, error) {
	results := NewChannel[string](ctx)
	for _, u := range urls {
		Go(ctx, func(ctx Context) {
			s, err := ExecuteActivity(ctx, Fetch, u).Get(ctx)
			if err != nil {
				s = "error: " + err.Error()
			}
			results.Send(ctx, s)
		})
	}
	var order []string
	sel := NewSelector(ctx)
	sel.AddReceive(results, func(more bool) { order = append(order, results.Receive(ctx)) })
	for range urls {
		sel.Select(ctx)
	}
	// Futures, too: the first ready one wins, each fires once.
	f1 := ExecuteActivity(ctx, LongTool, 1)
	f2 := ExecuteActivity(ctx, LongTool, 2)
	sel2 := NewSelector(ctx)
	for _, f := range []Future[int]{f1, f2} {
		sel2.AddFuture(f, func() {
			n, _ := f.Get(ctx)
			order = append(order, fmt.Sprint(n))
		})
	}
	sel2.Select(ctx)
	sel2.Select(ctx)
	return order, nil
}

func TestParallelActivities(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Parallel}, Fetch, LongTool)
	f := newFake(t, reg, Parallel, []string{"a", "b", "c"})
	cmds := f.task()
	wantTypes(t, cmds, api.CommandScheduleActivity, api.CommandScheduleActivity, api.CommandScheduleActivity)
	for i, c := range cmds { // creation order, deterministic
		var url string
		_ = DefaultConverter().FromPayload(c.ScheduleActivity.Input, &url)
		if c.ScheduleActivity.ActivityID != fmt.Sprint(i+1) || url != []string{"a", "b", "c"}[i] {
			t.Fatalf("command %d: activity %s for %q", i, c.ScheduleActivity.ActivityID, url)
		}
	}
	f.completeActivity("3", "C")
	f.completeActivity("1", "A")
	wantTypes(t, f.task())
	f.completeActivity("2", "B")
	cmds = f.task()
	wantTypes(t, cmds, api.CommandScheduleActivity, api.CommandScheduleActivity)
	f.completeActivity("5", 20)
	f.task()
	f.completeActivity("4", 10)
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var got []string
	f.result(&got)
	// C and A arrived in one task: coroutines run in creation order.
	if strings.Join(got, ",") != "A,C,B,20,10" {
		t.Fatalf("order = %v", got)
	}
	f.checkReplay()
}

// Retrying asks again after a failed attempt; the engine's own retries are
// invisible (only ActivityStarted events, which the code never sees).
func Retrying(ctx Context, prompt string) (string, error) {
	for attempt := 1; ; attempt++ {
		s, err := ExecuteActivity(ctx, ProviderCall, prompt).Get(ctx)
		if err == nil {
			return s, nil
		}
		if attempt == 3 {
			return "", err
		}
	}
}

func TestFailureThenSuccess(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Retrying}, ProviderCall)
	f := newFake(t, reg, Retrying, "hi")
	f.task()
	// The engine retried twice before the attempt that failed for good.
	se := f.sched("1")
	f.add(&history.ActivityStarted{ScheduledEventID: se, Attempt: 1})
	f.add(&history.ActivityStarted{ScheduledEventID: se, Attempt: 2})
	f.failActivity("1", NewApplicationError("overloaded", "ProviderOverloaded"), 3)
	wantTypes(t, f.task(), api.CommandScheduleActivity)
	f.add(&history.ActivityStarted{ScheduledEventID: f.sched("2"), Attempt: 1})
	f.add(&history.ActivityOutcomeUnknown{ScheduledEventID: f.sched("2"), Attempt: 1, Reason: "lease lost"})
	f.completeActivity("2", "answer")
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var got string
	f.result(&got)
	if got != "answer" {
		t.Fatalf("result = %q", got)
	}
	f.checkReplay()
}

func Charge(ctx Context, p Payment) (string, error) {
	ctx = WithActivityOptions(ctx, ActivityOptions{RetryPolicy: &RetryPolicy{MaximumAttempts: 5}})
	_, err := ExecuteActivity(ctx, SendPayment, p).Get(ctx)
	var app *ApplicationError
	var act *ActivityError
	if !errors.As(err, &app) || !errors.As(err, &act) {
		return "", fmt.Errorf("unexpected error %T: %w", err, err)
	}
	var reason string
	if derr := app.DetailsInto(&reason); derr != nil {
		return "", derr
	}
	return fmt.Sprintf("%s|%s|%v|%s|%d|%s|%s", app.Type, app.Message, app.NonRetryable, reason, act.ScheduledEventID, act.RetryState, act.ActivityType), err
}

func TestNonRetryableFailureIsTyped(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Charge}, SendPayment)
	f := newFake(t, reg, Charge, Payment{Invoice: "INV-1", Amount: 5})
	f.task()
	f.failActivity("1", NewNonRetryableError("card declined", "CardDeclined", "insufficient funds"), 1)
	wantTypes(t, f.task(), api.CommandFailWorkflow)
	fail := f.last().(*history.WorkflowFailed).Failure
	if fail.Type != "CardDeclined" || !fail.NonRetryable {
		t.Fatalf("workflow failure = %+v", fail)
	}
	// The workflow's error text carries what errors.As found.
	if !strings.Contains(fail.Message, "card declined") {
		t.Fatalf("message = %q", fail.Message)
	}
	// Check the typed fields by running the workflow code's view directly.
	f2 := newFake(t, reg, Charge, Payment{Invoice: "INV-1", Amount: 5})
	f2.task()
	f2.failActivity("1", NewNonRetryableError("card declined", "CardDeclined", "insufficient funds"), 1)
	cmds := f2.task()
	got := FailureToError(cmds[0].FailWorkflow.Failure)
	var app *ApplicationError
	if !errors.As(got, &app) || app.Type != "CardDeclined" {
		t.Fatalf("FailureToError = %#v", got)
	}
	f.checkReplay()
}

// ChargeReport returns what the workflow saw of the activity's error.
func ChargeReport(ctx Context, p Payment) (string, error) {
	s, err := Charge(ctx, p)
	if s == "" {
		return "", err
	}
	return s, nil
}

func TestActivityErrorFields(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{ChargeReport}, SendPayment)
	f := newFake(t, reg, ChargeReport, Payment{Invoice: "INV-1", Amount: 5})
	f.task()
	f.failActivity("1", NewNonRetryableError("card declined", "CardDeclined", "insufficient funds"), 1)
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var got string
	f.result(&got)
	want := fmt.Sprintf("CardDeclined|card declined|true|insufficient funds|%d|non_retryable_failure|SendPayment", f.sched("1"))
	if got != want {
		t.Fatalf("workflow saw %q, want %q", got, want)
	}
	f.checkReplay()
}

func Timers(ctx Context, _ string) (string, error) {
	if err := Sleep(ctx, time.Hour); err != nil {
		return "", err
	}
	woke := Now(ctx)
	// A timer raced by a signal: the signal wins, the timer is canceled.
	tctx, cancel := WithCancel(ctx)
	timer := NewTimer(tctx, 24*time.Hour)
	sig := GetSignalChannel[string](ctx, "poke")
	var got string
	NewSelector(ctx).
		AddFuture(timer, func() { got = "timer" }).
		AddReceive(sig, func(bool) { got = sig.Receive(ctx) }).
		Select(ctx)
	cancel()
	_, terr := timer.Get(ctx)
	// A timer started and canceled within one decision sends nothing.
	c2, cancel2 := WithCancel(ctx)
	t2 := NewTimer(c2, time.Minute)
	cancel2()
	_, t2err := t2.Get(ctx)
	return fmt.Sprintf("%s|%s|%v|%v", woke.Format(time.RFC3339), got, IsCanceledError(terr), IsCanceledError(t2err)), nil
}

func TestTimersAndCancel(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Timers})
	f := newFake(t, reg, Timers, "")
	cmds := f.task()
	wantTypes(t, cmds, api.CommandStartTimer)
	if c := cmds[0].StartTimer; c.TimerID != "1" || c.Duration != time.Hour {
		t.Fatalf("timer = %+v", c)
	}
	f.fireTimer("1")
	fired := f.events[len(f.events)-1].Time
	cmds = f.task()
	wantTypes(t, cmds, api.CommandStartTimer)
	if cmds[0].StartTimer.TimerID != "2" {
		t.Fatalf("second timer id %s", cmds[0].StartTimer.TimerID)
	}
	f.signal("poke", "signal")
	cmds = f.task()
	wantTypes(t, cmds, api.CommandCancelTimer, api.CommandCompleteWorkflow)
	if cmds[0].CancelTimer.TimerID != "2" {
		t.Fatalf("canceled timer %s", cmds[0].CancelTimer.TimerID)
	}
	var got string
	f.result(&got)
	if want := fired.Format(time.RFC3339) + "|signal|true|true"; got != want {
		t.Fatalf("result = %q, want %q", got, want)
	}
	f.checkReplay()
}

func Approvals(ctx Context, _ string) ([]string, error) {
	ch := GetSignalChannel[Approval](ctx, "approve")
	var got []string
	for len(got) < 3 {
		a := ch.Receive(ctx)
		got = append(got, a.By)
		if v, ok := ch.ReceiveAsync(); ok {
			got = append(got, v.By+"(async)")
		}
	}
	return got, nil
}

func TestSignals(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Approvals})
	f := newFake(t, reg, Approvals, "")
	f.signal("approve", Approval{By: "early"}) // before the code listens: buffered
	wantTypes(t, f.task())
	f.signal("other", 1)
	wantTypes(t, f.task())
	f.signal("approve", Approval{By: "b"})
	f.signal("approve", Approval{By: "c"})
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var got []string
	f.result(&got)
	if strings.Join(got, ",") != "early,b,c(async)" {
		t.Fatalf("got %v", got)
	}
	f.checkReplay()
}

// FirstSignal reports which signal it saw first; Selector order prefers
// "b" when both are there.
func FirstSignal(ctx Context, _ string) (string, error) {
	a := GetSignalChannel[string](ctx, "a")
	b := GetSignalChannel[string](ctx, "b")
	var got string
	NewSelector(ctx).
		AddReceive(b, func(bool) { got = b.Receive(ctx) }).
		AddReceive(a, func(bool) { got = a.Receive(ctx) }).
		Select(ctx)
	return got + "@" + fmt.Sprint(GetInfo(ctx).HistoryLength), nil
}

// Events that arrive while a task is in flight are recorded before its
// WorkflowTaskCompleted but were not seen by it; replay must deliver them
// after the decision, as the live code met them.
func TestEventsArrivingDuringTask(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{FirstSignal})
	f := newFake(t, reg, FirstSignal, "")
	wantTypes(t, f.taskWith(func() { f.signal("a", "A") }))
	f.signal("b", "B")
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var got string
	f.result(&got)
	if got != "B@4" { // saw a (2) and b (4) together; WorkflowTaskCompleted is 3
		t.Fatalf("got %q", got)
	}
	f.checkReplay()
}

func AwaitFlag(ctx Context, _ string) (string, error) {
	done := false
	Go(ctx, func(ctx Context) {
		GetSignalChannel[bool](ctx, "done").Receive(ctx)
		done = true
	})
	ok, err := AwaitWithTimeout(ctx, 10*time.Minute, func() bool { return done })
	return fmt.Sprint(ok, err), nil
}

func TestAwaitWithTimeout(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{AwaitFlag})
	t.Run("condition", func(t *testing.T) {
		f := newFake(t, reg, AwaitFlag, "")
		wantTypes(t, f.task(), api.CommandStartTimer)
		f.signal("done", true)
		wantTypes(t, f.task(), api.CommandCancelTimer, api.CommandCompleteWorkflow)
		var got string
		f.result(&got)
		if got != "true <nil>" {
			t.Fatalf("got %q", got)
		}
		f.checkReplay()
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFake(t, reg, AwaitFlag, "")
		f.task()
		f.fireTimer("1")
		wantTypes(t, f.task(), api.CommandCompleteWorkflow)
		var got string
		f.result(&got)
		if got != "false <nil>" {
			t.Fatalf("got %q", got)
		}
		f.checkReplay()
	})
}

type Progress struct {
	Step  int
	Notes []string
}

func Queried(ctx Context, _ string) (int, error) {
	p := Progress{}
	if err := SetQueryHandler(ctx, "progress", func() (Progress, error) { return p, nil }); err != nil {
		return 0, err
	}
	if err := SetQueryHandler(ctx, "note", func(i int) (string, error) {
		if i >= len(p.Notes) {
			return "", NewApplicationError("no such note", "OutOfRange")
		}
		return p.Notes[i], nil
	}); err != nil {
		return 0, err
	}
	if err := SetQueryHandler(ctx, "sneaky", func() (string, error) {
		ExecuteActivity(ctx, Notify, "from a query") // not allowed
		return "", nil
	}); err != nil {
		return 0, err
	}
	for i := 1; i <= 2; i++ {
		s, _ := ExecuteActivity(ctx, Fetch, fmt.Sprint(i)).Get(ctx)
		p.Step, p.Notes = i, append(p.Notes, s)
	}
	GetSignalChannel[bool](ctx, "finish").Receive(ctx)
	return p.Step, nil
}

func TestQueries(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Queried}, Fetch, Notify)
	f := newFake(t, reg, Queried, "")
	f.task()
	query := func(name string, arg any) (history.Payload, error) {
		t.Helper()
		p, err := DefaultConverter().ToPayload(arg)
		if err != nil {
			t.Fatal(err)
		}
		return f.exec.Query(name, p)
	}
	var p Progress
	res, err := query("progress", nil)
	if err != nil || DefaultConverter().FromPayload(res, &p) != nil || p.Step != 0 {
		t.Fatalf("progress = %+v, %v", p, err)
	}
	f.completeActivity("1", "one")
	f.task()
	f.completeActivity("2", "two")
	f.task()
	res, err = query("progress", nil)
	if err != nil || DefaultConverter().FromPayload(res, &p) != nil || p.Step != 2 || len(p.Notes) != 2 {
		t.Fatalf("progress = %+v, %v", p, err)
	}
	var note string
	if res, err = query("note", 1); err != nil || DefaultConverter().FromPayload(res, &note) != nil || note != "two" {
		t.Fatalf("note = %q, %v", note, err)
	}
	var app *ApplicationError
	if _, err = query("note", 7); !errors.As(err, &app) || app.Type != "OutOfRange" {
		t.Fatalf("out of range query: %v", err)
	}
	if _, err = query("nope", nil); !errors.Is(err, ErrUnknownQuery) {
		t.Fatalf("unknown query: %v", err)
	}
	var pan *PanicError
	if _, err = query("sneaky", nil); !errors.As(err, &pan) || !strings.Contains(pan.Value, "query handler") {
		t.Fatalf("state-changing query: %v", err)
	}
	var stack string
	if res, err = query(QueryTypeStackTrace, nil); err != nil || DefaultConverter().FromPayload(res, &stack) != nil ||
		!strings.Contains(stack, "sdk.Queried") || !strings.Contains(stack, "coroutine root") {
		t.Fatalf("stack trace query: %v\n%s", err, stack)
	}
	// Queries left no trace: the run continues as if they never happened.
	f.signal("finish", true)
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	f.checkReplay()
}

func ChildWorkflow(ctx Context, n int) (int, error) {
	return ExecuteActivity(ctx, ChildStep, n).Get(ctx)
}

func Parent(ctx Context, n int) (string, error) {
	cctx := WithChildWorkflowOptions(ctx, ChildWorkflowOptions{WorkflowID: "child-a", TaskQueue: "children"})
	cf := ExecuteChildWorkflow(cctx, ChildWorkflow, n)
	we, err := cf.GetChildWorkflowExecution().Get(ctx)
	if err != nil {
		return "", err
	}
	v, err := cf.Get(ctx)
	if err != nil {
		return "", err
	}
	// A second child, default id, that fails.
	_, err = ExecuteChildWorkflowByName[int](ctx, "ChildWorkflow", -1).Get(ctx)
	var cwe *ChildWorkflowError
	var app *ApplicationError
	if !errors.As(err, &cwe) || !errors.As(err, &app) {
		return "", fmt.Errorf("want a ChildWorkflowError, got %v", err)
	}
	return fmt.Sprintf("%s/%s=%d; %s failed: %s", we.ID, we.RunID, v, cwe.WorkflowID, app.Type), nil
}

func TestChildWorkflow(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Parent, ChildWorkflow}, ChildStep)
	f := newFake(t, reg, Parent, 21)
	cmds := f.task()
	wantTypes(t, cmds, api.CommandStartChildWorkflow)
	c := cmds[0].StartChildWorkflow
	if c.WorkflowID != "child-a" || c.WorkflowType != "ChildWorkflow" || c.TaskQueue != "children" {
		t.Fatalf("child = %+v", c)
	}
	wantTypes(t, f.task()) // started; waits for the result
	f.completeChild("child-a", 42)
	cmds = f.task()
	wantTypes(t, cmds, api.CommandStartChildWorkflow)
	if id := cmds[0].StartChildWorkflow.WorkflowID; id != "wf-1/run-1/2" {
		t.Fatalf("default child id %q", id)
	}
	f.failChild("wf-1/run-1/2", NewApplicationError("bad input", "BadInput"))
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	var got string
	f.result(&got)
	if got != "child-a/run-of-child-a=42; wf-1/run-1/2 failed: BadInput" {
		t.Fatalf("got %q", got)
	}
	f.checkReplay()
}

func Counter(ctx Context, n int) (int, error) {
	if n < 3 {
		err := NewContinueAsNewError(ctx, Counter, n+1)
		var can *ContinueAsNewError
		if errors.As(err, &can) {
			can.TaskQueue = "next"
		}
		return 0, err
	}
	return n, nil
}

func TestContinueAsNew(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Counter})
	f := newFake(t, reg, Counter, 1)
	cmds := f.task()
	wantTypes(t, cmds, api.CommandContinueAsNew)
	c := cmds[0].ContinueAsNew
	var n int
	if err := DefaultConverter().FromPayload(c.Input, &n); err != nil || n != 2 || c.WorkflowType != "Counter" || c.TaskQueue != "next" {
		t.Fatalf("continue as new = %+v (n=%d, %v)", c, n, err)
	}
	f.checkReplay()
}

// Cancellable runs a long activity and a timer; on cancellation it waits
// for the activity to acknowledge, cleans up on a disconnected context and
// reports canceled.
func Cancellable(ctx Context, _ string) (string, error) {
	timer := NewTimer(ctx, time.Hour)
	_, err := ExecuteActivity(ctx, LongTool, 7).Get(ctx)
	if !IsCanceledError(err) {
		return "", fmt.Errorf("want canceled, got %v", err)
	}
	_, terr := timer.Get(ctx)
	cleanup, _ := NewDisconnectedContext(ctx)
	if _, err := ExecuteActivity(cleanup, Notify, "canceled").Get(cleanup); err != nil {
		return "", err
	}
	if !IsCanceledError(terr) || ctx.Err() == nil {
		return "", fmt.Errorf("timer error %v, ctx error %v", terr, ctx.Err())
	}
	var got bool
	NewSelector(ctx).AddReceive(ctx.Done(), func(more bool) { got = !more }).Select(ctx)
	if !got {
		return "", errors.New("done channel not closed")
	}
	return "", ctx.Err()
}

func TestCancellationReachesActivities(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Cancellable}, LongTool, Notify)
	f := newFake(t, reg, Cancellable, "")
	wantTypes(t, f.task(), api.CommandStartTimer, api.CommandScheduleActivity)
	f.add(&history.ActivityStarted{ScheduledEventID: f.sched("1"), Attempt: 1})
	f.requestCancel()
	cmds := f.task()
	wantTypes(t, cmds, api.CommandCancelTimer, api.CommandRequestCancelActivity)
	if cmds[1].RequestCancelActivity.ScheduledEventID != f.sched("1") {
		t.Fatalf("cancel names event %d, activity was scheduled at %d", cmds[1].RequestCancelActivity.ScheduledEventID, f.sched("1"))
	}
	f.activityCanceled("1")
	cmds = f.task()
	wantTypes(t, cmds, api.CommandScheduleActivity)
	if cmds[0].ScheduleActivity.ActivityType != "Notify" {
		t.Fatalf("cleanup = %+v", cmds[0].ScheduleActivity)
	}
	f.completeActivity("2", struct{}{})
	wantTypes(t, f.task(), api.CommandCancelWorkflow)
	f.checkReplay()
}

func TestCancelBeforeScheduleSendsNothing(t *testing.T) {
	reg := NewRegistry()
	wf := func(ctx Context) (string, error) {
		c, cancel := WithCancel(ctx)
		fut := ExecuteActivity(c, Fetch, "x")
		cancel()
		_, err := fut.Get(ctx)
		var act *ActivityError
		if !errors.As(err, &act) || !IsCanceledError(err) || act.RetryState != RetryStateCancelRequested {
			return "", fmt.Errorf("got %v", err)
		}
		return "ok", nil
	}
	if err := reg.RegisterWorkflow(wf, RegisterOptions{Name: "CancelEarly"}); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, reg, "CancelEarly", nil)
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	f.checkReplay()
}

func Versioned(ctx Context, _ string) (string, error) {
	v := GetVersion(ctx, "add-notify", DefaultVersion, 1)
	if v == 1 {
		if _, err := ExecuteActivity(ctx, Notify, "start").Get(ctx); err != nil {
			return "", err
		}
	}
	s, err := ExecuteActivity(ctx, Fetch, "x").Get(ctx)
	// Later calls return the decided version without a new marker.
	return fmt.Sprintf("%s v%d/%d", s, v, GetVersion(ctx, "add-notify", DefaultVersion, 1)), err
}

func Unversioned(ctx Context, _ string) (string, error) {
	s, err := ExecuteActivity(ctx, Fetch, "x").Get(ctx)
	return s + " v-1/-1", err
}

func TestGetVersion(t *testing.T) {
	oldReg, newReg := NewRegistry(), NewRegistry()
	if err := oldReg.RegisterWorkflow(Unversioned, RegisterOptions{Name: "Versioned"}); err != nil {
		t.Fatal(err)
	}
	mustRegister(t, newReg, []any{Versioned})

	// A run started by old code, half done when new code is deployed.
	old := newFake(t, oldReg, "Versioned", "")
	old.task()
	old.exec.Close()
	old.exec = nil
	old.reg = newReg // the new code takes over: full replay, then live
	old.completeActivity("1", "fetched")
	wantTypes(t, old.task(), api.CommandCompleteWorkflow)
	var got string
	old.result(&got)
	if got != "fetched v-1/-1" {
		t.Fatalf("old run under new code: %q", got)
	}
	if _, _, err := old.replayAll(nil); err != nil { // the old history replays under the new code
		t.Fatal(err)
	}

	// A new run takes the new branch and records the version.
	f := newFake(t, newReg, Versioned, "")
	cmds := f.task()
	wantTypes(t, cmds, api.CommandRecordMarker, api.CommandScheduleActivity)
	if m := cmds[0].RecordMarker; m.Name != MarkerVersion || m.ID != "add-notify" {
		t.Fatalf("marker = %+v", m)
	}
	f.completeActivity("1", struct{}{})
	f.task()
	f.completeActivity("2", "fetched")
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	f.result(&got)
	if got != "fetched v1/1" {
		t.Fatalf("new run: %q", got)
	}
	f.checkReplay()

	// Code that no longer supports the old version fails the task loudly.
	strict := NewRegistry()
	strictWF := func(ctx Context) error {
		GetVersion(ctx, "add-notify", 1, 1)
		return nil
	}
	if err := strict.RegisterWorkflow(strictWF, RegisterOptions{Name: "Versioned"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := old.replayAll(strict)
	var pan *PanicError
	if !errors.As(err, &pan) || !strings.Contains(pan.Value, "outside the supported range") {
		t.Fatalf("unsupported version: %v", err)
	}
}

type token struct{ N int }

var sideEffectCalls int

func SideEffects(ctx Context, _ string) (string, error) {
	tok := SideEffect(ctx, func(Context) token { sideEffectCalls++; return token{N: 42} })
	cfg := MutableSideEffect(ctx, "cfg", func(Context) string { return "v1" }, nil)
	cfg2 := MutableSideEffect(ctx, "cfg", func(Context) string { return "v1" }, func(a, b string) bool { return a == b })
	if _, err := ExecuteActivity(ctx, Fetch, fmt.Sprint(tok.N)).Get(ctx); err != nil {
		return "", err
	}
	cfg3 := MutableSideEffect(ctx, "cfg", func(Context) string { return "v2" }, nil)
	return fmt.Sprintf("%d %s %s %s replaying=%v", tok.N, cfg, cfg2, cfg3, IsReplaying(ctx)), nil
}

func TestSideEffects(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{SideEffects}, Fetch)
	sideEffectCalls = 0
	f := newFake(t, reg, SideEffects, "")
	wantTypes(t, f.task(), api.CommandRecordMarker, api.CommandRecordMarker, api.CommandScheduleActivity)
	f.completeActivity("1", "x")
	wantTypes(t, f.task(), api.CommandRecordMarker, api.CommandCompleteWorkflow)
	var got string
	f.result(&got)
	if got != "42 v1 v1 v2 replaying=false" {
		t.Fatalf("got %q", got)
	}
	if _, _, err := f.replayAll(nil); err != nil || sideEffectCalls != 1 {
		t.Fatalf("replay: %v; side effect ran %d times", err, sideEffectCalls)
	}
	f.checkReplay()
}

// Summary of Now, Info, logging in one workflow.
func InfoFlow(ctx Context, _ string) (string, error) {
	GetLogger(ctx).Info().Msg("starting")
	i := GetInfo(ctx)
	_, _ = ExecuteActivity(ctx, Fetch, "x").Get(ctx)
	GetLogger(ctx).Info().Msg("fetched")
	j := GetInfo(ctx)
	return fmt.Sprintf("%s %s %s %s %d %d %d %s", i.WorkflowID, i.RunID, i.WorkflowType, i.TaskQueue, i.Attempt, i.HistoryLength,
		j.HistoryLength, Now(ctx).Sub(i.StartTime)), nil
}

func TestInfoAndNow(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{InfoFlow}, Fetch)
	f := newFake(t, reg, InfoFlow, "")
	var logs strings.Builder
	logger := newTestLogger(&logs)
	f.opts.Logger = &logger
	f.task()
	f.completeActivity("1", "x")
	f.task()
	var got string
	f.result(&got)
	if got != "wf-1 run-1 InfoFlow agents 1 1 5 4s" {
		t.Fatalf("got %q", got)
	}
	if n := strings.Count(logs.String(), `"message":"starting"`); n != 1 || !strings.Contains(logs.String(), `"workflow_id":"wf-1"`) {
		t.Fatalf("starting logged %d times:\n%s", n, logs.String())
	}
	logs.Reset()
	if _, _, err := f.replayAll(nil); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("replay logged:\n%s", logs.String())
	}
	f.opts.Logger = nil
	f.checkReplay()
}

func newTestLogger(w io.Writer) zerolog.Logger { return zerolog.New(w) }
