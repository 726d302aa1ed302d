package acceptance_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// ---- sequential and parallel activities ----

func Upper(_ context.Context, s string) (string, error) { return strings.ToUpper(s), nil }

// Pipeline runs one activity after another, each on the previous result.
func Pipeline(ctx sdk.Context, words []string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	out := ""
	for _, w := range words {
		s, err := sdk.ExecuteActivity(ctx, Upper, w).Get(ctx)
		if err != nil {
			return "", err
		}
		out += s
	}
	return out, nil
}

func TestSequentialActivities(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Pipeline)
	env.RegisterActivity(Upper)
	env.Start()

	run := start(t, ctx, env, "seq", Pipeline, []string{"a", "b", "c"})
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "ABC" {
		t.Fatalf("result %q, %v", got, err)
	}
	// One activity per decision: each is scheduled after the previous completed.
	evs := events(t, ctx, env.Client, "seq", run.RunID())
	var kinds []string
	for _, ev := range evs {
		if ev.Type() == history.TypeActivityScheduled || ev.Type() == history.TypeActivityCompleted {
			kinds = append(kinds, ev.Type().String())
		}
	}
	if fmt.Sprint(kinds) != "[ActivityScheduled ActivityCompleted ActivityScheduled ActivityCompleted ActivityScheduled ActivityCompleted]" {
		t.Fatalf("activities did not run one after another: %v", typesOf(evs))
	}
}

// barrier makes parallel activities prove they run at the same time: each
// call waits until n calls are in flight.
type barrier struct {
	n       int32
	arrived atomic.Int32
	all     chan struct{}
	once    sync.Once
}

func newBarrier(n int32) *barrier { return &barrier{n: n, all: make(chan struct{})} }

// Shout is registered by name: it needs the test's barrier.
func (b *barrier) Shout(ctx context.Context, s string) (string, error) {
	if b.arrived.Add(1) == b.n {
		b.once.Do(func() { close(b.all) })
	}
	select {
	case <-b.all:
		return strings.ToUpper(s) + "!", nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// FanOut starts one coroutine per word (sdk.Go), each running an activity,
// and meanwhile races two more activities with a Selector. Everything is
// scheduled in the first decision and runs in parallel.
func FanOut(ctx sdk.Context, words []string) ([]string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	results := make([]string, len(words))
	done := sdk.NewChannel[error](ctx)
	for i, w := range words {
		sdk.Go(ctx, func(ctx sdk.Context) {
			s, err := sdk.ExecuteActivityByName[string](ctx, "Shout", w).Get(ctx)
			results[i] = s
			done.Send(ctx, err)
		})
	}
	var raced []string
	sel := sdk.NewSelector(ctx)
	for _, w := range []string{"x", "y"} {
		f := sdk.ExecuteActivityByName[string](ctx, "Shout", w)
		sel.AddFuture(f, func() {
			s, err := f.Get(ctx)
			if err != nil {
				s = err.Error()
			}
			raced = append(raced, s)
		})
	}
	for range 2 {
		sel.Select(ctx)
	}
	for range words {
		if err := done.Receive(ctx); err != nil {
			return nil, err
		}
	}
	if err := assertf(len(raced) == 2 && raced[0] != raced[1], "raced %v", raced); err != nil {
		return nil, err
	}
	return results, nil
}

func TestParallelActivities(t *testing.T) {
	ctx := testCtx(t)
	words := []string{"a", "b", "c", "d"}
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(FanOut)
	env.RegisterActivity(newBarrier(int32(len(words)+2)).Shout, activities.Options{Name: "Shout"})
	env.Start()

	run := start(t, ctx, env, "fan-out", FanOut, words)
	var got []string
	err := run.Get(ctx, &got)
	noAssertion(t, err)
	if err != nil || fmt.Sprint(got) != "[A! B! C! D!]" {
		t.Fatalf("result %q, %v", got, err)
	}
	// All six activities were scheduled by the first decision.
	evs := events(t, ctx, env.Client, "fan-out", run.RunID())
	for i := 2; i < 8; i++ {
		if evs[i].Type() != history.TypeActivityScheduled {
			t.Fatalf("event %d is %s, want ActivityScheduled: %v", evs[i].ID, evs[i].Type(), typesOf(evs))
		}
	}
}

// ---- retries ----

// flaky fails its first two calls, then succeeds.
type flaky struct{ calls atomic.Int32 }

func (f *flaky) Charge(ctx context.Context, amount int) (string, error) {
	if f.calls.Add(1) <= 2 {
		return "", errors.New("gateway: 503 service unavailable")
	}
	return fmt.Sprintf("charged %d on attempt %d", amount, activities.GetInfo(ctx).Attempt), nil
}

func ChargeWithRetries(ctx sdk.Context, amount int) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdk.RetryPolicy{InitialInterval: 10 * time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
	})
	return sdk.ExecuteActivityByName[string](ctx, "Charge", amount).Get(ctx)
}

func TestActivityFailsTwiceThenSucceeds(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	f := &flaky{}
	env.RegisterWorkflow(ChargeWithRetries)
	env.RegisterActivity(f.Charge, activities.Options{Name: "Charge"})
	env.Start()
	t0 := env.Clock.Now()

	run := start(t, ctx, env, "retry", ChargeWithRetries, 100)
	var got string
	if err := run.Get(ctx, &got); err != nil {
		t.Fatal(err)
	}
	if got != "charged 100 on attempt 3" || f.calls.Load() != 3 {
		t.Fatalf("result %q after %d calls", got, f.calls.Load())
	}
	// The backoffs (10 s, then 20 s) are durable timers; the fake clock
	// skipped them.
	if skipped := env.Clock.Now().Sub(t0); skipped < 30*time.Second {
		t.Fatalf("fake clock moved %s, want ≥ 30s of backoff", skipped)
	}
	// Retries live in the engine: the workflow saw one schedule and one result.
	evs := events(t, ctx, env.Client, "retry", run.RunID())
	if count(evs, history.TypeActivityScheduled) != 1 || count(evs, history.TypeActivityCompleted) != 1 || count(evs, history.TypeActivityFailed) != 0 {
		t.Fatalf("history %v", typesOf(evs))
	}
}

// ---- a non-retryable failure as a typed error ----

type DeclineInfo struct{ Code string }

func Decline(_ context.Context, card string) (string, error) {
	return "", sdk.NewNonRetryableError("card "+card+" declined", "CardDeclined", DeclineInfo{Code: "51"})
}

// PayByCard checks, inside the workflow, that the activity's failure
// arrives as an *sdk.ActivityError wrapping the *sdk.ApplicationError the
// activity raised, then fails the workflow with it.
func PayByCard(ctx sdk.Context, card string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{
		StartToCloseTimeout: time.Minute,
		RetryPolicy:         &sdk.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 10},
	})
	_, err := sdk.ExecuteActivity(ctx, Decline, card).Get(ctx)
	var actErr *sdk.ActivityError
	var appErr *sdk.ApplicationError
	var info DeclineInfo
	if e := assertf(errors.As(err, &actErr), "want *sdk.ActivityError, got %T: %v", err, err); e != nil {
		return "", e
	}
	if e := assertf(errors.As(err, &appErr), "want *sdk.ApplicationError in the chain, got %v", err); e != nil {
		return "", e
	}
	if e := assertf(actErr.ActivityType == "Decline" && actErr.RetryState == sdk.RetryStateNonRetryableFailure &&
		appErr.Type == "CardDeclined" && appErr.NonRetryable && appErr.Message == "card "+card+" declined" &&
		appErr.DetailsInto(&info) == nil && info.Code == "51",
		"activity error %+v, application error %+v, details %+v", actErr, appErr, info); e != nil {
		return "", e
	}
	return "", fmt.Errorf("payment failed: %w", err)
}

func TestNonRetryableFailureIsTyped(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(PayByCard)
	env.RegisterActivity(Decline)
	env.Start()

	run := start(t, ctx, env, "declined", PayByCard, "4242")
	err := run.Get(ctx, nil)
	noAssertion(t, err)
	// At the client: the workflow's failure, typed again.
	var appErr *sdk.ApplicationError
	if !errors.As(err, &appErr) {
		t.Fatalf("client got %T %v, want *sdk.ApplicationError", err, err)
	}
	var info DeclineInfo
	if appErr.Type != "CardDeclined" || !appErr.NonRetryable || appErr.DetailsInto(&info) != nil || info.Code != "51" ||
		!strings.Contains(appErr.Message, "payment failed") || !strings.Contains(appErr.Message, "card 4242 declined") {
		t.Fatalf("client error %+v (details %+v)", appErr, info)
	}
	// Not retried: one attempt, whatever the policy allowed.
	evs := events(t, ctx, env.Client, "declined", run.RunID())
	if count(evs, history.TypeActivityStarted) != 1 || count(evs, history.TypeActivityFailed) != 1 || count(evs, history.TypeWorkflowFailed) != 1 {
		t.Fatalf("history %v", typesOf(evs))
	}
}
