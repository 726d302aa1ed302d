package acceptance_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// ---- timers and timer cancel ----

// Timers sleeps an hour, then races a day-long timer against an activity
// and cancels the timer when the activity wins.
func Timers(ctx sdk.Context) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	t0 := sdk.Now(ctx)
	if err := sdk.Sleep(ctx, time.Hour); err != nil {
		return "", err
	}
	slept := sdk.Now(ctx).Sub(t0)

	tctx, cancel := sdk.WithCancel(ctx)
	timer := sdk.NewTimer(tctx, 24*time.Hour)
	greet := sdk.ExecuteActivity(ctx, Greet, "timer")
	winner := ""
	sdk.NewSelector(ctx).
		AddFuture(timer, func() { winner = "timer" }).
		AddFuture(greet, func() { winner = "activity" }).
		Select(ctx)
	cancel()
	_, terr := timer.Get(ctx)
	return fmt.Sprintf("slept %s, %s won, timer canceled: %v", slept, winner, sdk.IsCanceledError(terr)), nil
}

func TestTimersAndTimerCancel(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Timers)
	env.RegisterActivity(Greet)
	env.Start()
	t0 := env.Clock.Now()

	run := start(t, ctx, env, "timers", Timers, nil)
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "slept 1h0m0s, activity won, timer canceled: true" {
		t.Fatalf("result %q", got)
	}
	if moved := env.Clock.Now().Sub(t0); moved < time.Hour || moved >= 24*time.Hour {
		t.Fatalf("fake clock moved %s: want the hour skipped and the canceled day not", moved)
	}
	evs := events(t, ctx, env.Client, "timers", run.RunID())
	var timers []string
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.TimerStarted:
			timers = append(timers, "started "+a.TimerID)
		case *history.TimerFired:
			timers = append(timers, "fired "+a.TimerID)
		case *history.TimerCanceled:
			timers = append(timers, "canceled "+a.TimerID)
		}
	}
	if fmt.Sprint(timers) != "[started 1 fired 1 started 2 canceled 2]" {
		t.Fatalf("timers %v in %v", timers, typesOf(evs))
	}
}

// ---- signals and signal-with-start ----

// Accumulate sums the "add" signals until a "done" signal.
func Accumulate(ctx sdk.Context) (int, error) {
	add := sdk.GetSignalChannel[int](ctx, "add")
	done := sdk.GetSignalChannel[string](ctx, "done")
	sum, finished := 0, false
	for !finished {
		sdk.NewSelector(ctx).
			AddReceive(add, func(bool) { sum += add.Receive(ctx) }).
			AddReceive(done, func(bool) { done.Receive(ctx); finished = true }).
			Select(ctx)
	}
	return sum, nil
}

func TestSignals(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Accumulate)
	env.Start()

	run := start(t, ctx, env, "sum", Accumulate, nil)
	for i := 1; i <= 5; i++ {
		if err := env.Client.SignalWorkflow(ctx, "sum", "", "add", i); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.SignalWorkflow(ctx, "sum", run.RunID(), "done", "that's all"); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := run.Get(ctx, &sum); err != nil || sum != 15 {
		t.Fatalf("sum %d, %v", sum, err)
	}
	if err := env.Client.SignalWorkflow(ctx, "sum", "", "add", 1); !errors.Is(err, api.ErrWorkflowClosed) {
		t.Fatalf("signal to a closed run: %v, want ErrWorkflowClosed", err)
	}
}

func TestSignalWithStart(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Accumulate)
	env.Start()

	opts := client.StartOptions{ID: "sum-sws", TaskQueue: env.TaskQueue()}
	first, err := env.Client.SignalWithStartWorkflow(ctx, opts, "add", 7, Accumulate, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := env.Client.SignalWithStartWorkflow(ctx, opts, "add", 3, Accumulate, nil)
	if err != nil {
		t.Fatal(err)
	}
	if first.RunID() != second.RunID() {
		t.Fatalf("the second signal-with-start started run %s instead of signaling %s", second.RunID(), first.RunID())
	}
	if err := env.Client.SignalWorkflow(ctx, "sum-sws", "", "done", ""); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := first.Get(ctx, &sum); err != nil || sum != 10 {
		t.Fatalf("sum %d, %v", sum, err)
	}
	// The first signal is in history before the first decision.
	evs := events(t, ctx, env.Client, "sum-sws", first.RunID())
	if evs[0].Type() != history.TypeWorkflowStarted || evs[1].Type() != history.TypeSignalReceived {
		t.Fatalf("history %v", typesOf(evs))
	}
}

// ---- an approval wait with a timeout ----

type Approval struct {
	By string
	OK bool
}

// AwaitApproval waits for an "approve" signal for at most timeout, with
// AwaitWithTimeout.
func AwaitApproval(ctx sdk.Context, timeout time.Duration) (string, error) {
	approvals := sdk.GetSignalChannel[Approval](ctx, "approve")
	ok, err := sdk.AwaitWithTimeout(ctx, timeout, func() bool { return approvals.Len() > 0 })
	if err != nil {
		return "", err
	}
	if !ok {
		return "timed out", nil
	}
	a := approvals.Receive(ctx)
	return fmt.Sprintf("approved=%v by %s", a.OK, a.By), nil
}

// SelectApproval waits for the same signal with a Selector and a timer.
func SelectApproval(ctx sdk.Context, timeout time.Duration) (string, error) {
	approvals := sdk.GetSignalChannel[Approval](ctx, "approve")
	tctx, cancel := sdk.WithCancel(ctx)
	defer cancel()
	out := ""
	sdk.NewSelector(ctx).
		AddReceive(approvals, func(bool) {
			a := approvals.Receive(ctx)
			out = fmt.Sprintf("approved=%v by %s", a.OK, a.By)
		}).
		AddFuture(sdk.NewTimer(tctx, timeout), func() { out = "timed out" }).
		Select(ctx)
	return out, nil
}

func TestApprovalWithTimeout(t *testing.T) {
	for _, wf := range []any{AwaitApproval, SelectApproval} {
		name := sdk.TypeName(wf)
		t.Run(name+"/approved", func(t *testing.T) {
			ctx := testCtx(t)
			// The clock stands still: the approval always beats the timer.
			env := newEnv(t, testenv.Options{NoTimeSkipping: true})
			env.RegisterWorkflow(wf)
			env.Start()
			run := start(t, ctx, env, "approve", wf, 72*time.Hour)
			waitEvent(t, ctx, env.Client, "approve", run.RunID(), 0, isType(history.TypeTimerStarted))
			if err := env.Client.SignalWorkflow(ctx, "approve", "", "approve", Approval{By: "ada", OK: true}); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := run.Get(ctx, &got); err != nil || got != "approved=true by ada" {
				t.Fatalf("result %q, %v", got, err)
			}
			evs := events(t, ctx, env.Client, "approve", run.RunID())
			if count(evs, history.TypeTimerCanceled) != 1 || count(evs, history.TypeTimerFired) != 0 {
				t.Fatalf("the timer must be canceled: %v", typesOf(evs))
			}
		})
		t.Run(name+"/timeout", func(t *testing.T) {
			ctx := testCtx(t)
			env := newEnv(t, testenv.Options{})
			env.RegisterWorkflow(wf)
			env.Start()
			t0 := env.Clock.Now()
			run := start(t, ctx, env, "approve", wf, 72*time.Hour)
			var got string
			if err := run.Get(ctx, &got); err != nil || got != "timed out" {
				t.Fatalf("result %q, %v", got, err)
			}
			if moved := env.Clock.Now().Sub(t0); moved < 72*time.Hour {
				t.Fatalf("fake clock moved %s, want the 72h skipped", moved)
			}
			evs := events(t, ctx, env.Client, "approve", run.RunID())
			if count(evs, history.TypeTimerFired) != 1 || count(evs, history.TypeSignalReceived) != 0 {
				t.Fatalf("history %v", typesOf(evs))
			}
		})
	}
}

// ---- queries ----

// Conversation answers each "say" signal with an activity, until "bye";
// queries read its state between turns.
func Conversation(ctx sdk.Context) ([]string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	var turns []string
	if err := sdk.SetQueryHandler(ctx, "turns", func() ([]string, error) { return turns, nil }); err != nil {
		return nil, err
	}
	if err := sdk.SetQueryHandler(ctx, "turn", func(i int) (string, error) {
		if i < 0 || i >= len(turns) {
			return "", fmt.Errorf("no turn %d yet", i)
		}
		return turns[i], nil
	}); err != nil {
		return nil, err
	}
	say := sdk.GetSignalChannel[string](ctx, "say")
	for {
		msg := say.Receive(ctx)
		if msg == "bye" {
			return turns, nil
		}
		reply, err := sdk.ExecuteActivity(ctx, Greet, msg).Get(ctx)
		if err != nil {
			return nil, err
		}
		turns = append(turns, reply)
	}
}

func TestQueries(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Conversation)
	env.RegisterActivity(Greet)
	env.Start()

	run := start(t, ctx, env, "chat", Conversation, nil)
	var turns []string
	if err := env.Client.QueryWorkflow(ctx, "chat", "", "turns", nil, &turns); err != nil || len(turns) != 0 {
		t.Fatalf("turns %v, %v", turns, err)
	}
	last := int64(0)
	for i, who := range []string{"ada", "grace"} {
		if err := env.Client.SignalWorkflow(ctx, "chat", "", "say", who); err != nil {
			t.Fatal(err)
		}
		// Wait until the turn's activity result is recorded; the query then
		// sees it whether the worker answers from its cache or a replay.
		last = waitEvent(t, ctx, env.Client, "chat", run.RunID(), last, isType(history.TypeActivityCompleted)).ID
		if err := env.Client.QueryWorkflow(ctx, "chat", run.RunID(), "turns", nil, &turns); err != nil || len(turns) != i+1 {
			t.Fatalf("after turn %d: turns %v, %v", i+1, turns, err)
		}
	}
	var turn string
	if err := env.Client.QueryWorkflow(ctx, "chat", "", "turn", 1, &turn); err != nil || turn != "Hello, grace!" {
		t.Fatalf("turn 1: %q, %v", turn, err)
	}
	if err := env.Client.QueryWorkflow(ctx, "chat", "", "turn", 7, &turn); !errors.Is(err, api.ErrQueryFailed) {
		t.Fatalf("a failing handler: %v, want ErrQueryFailed", err)
	}
	if err := env.Client.QueryWorkflow(ctx, "chat", "", "nope", nil, &turn); !errors.Is(err, api.ErrQueryFailed) {
		t.Fatalf("an unknown query: %v, want ErrQueryFailed", err)
	}
	if err := env.Client.SignalWorkflow(ctx, "chat", "", "say", "bye"); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := run.Get(ctx, &got); err != nil || fmt.Sprint(got) != "[Hello, ada! Hello, grace!]" {
		t.Fatalf("result %v, %v", got, err)
	}
	// A closed run still answers, from a replay of its history.
	if err := env.Client.QueryWorkflow(ctx, "chat", "", "turns", nil, &turns); err != nil || len(turns) != 2 {
		t.Fatalf("after the run closed: turns %v, %v", turns, err)
	}
	// Queries write nothing to history.
	evs := events(t, ctx, env.Client, "chat", run.RunID())
	if count(evs, history.TypeSignalReceived) != 3 || count(evs, history.TypeActivityScheduled) != 2 {
		t.Fatalf("history %v", typesOf(evs))
	}
}
