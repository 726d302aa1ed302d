package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

var charged atomic.Int32

// Charge is a side effect, declared so only where it runs.
func Charge(_ context.Context, amount int) (int, error) {
	charged.Add(1)
	return amount, nil
}

// ChargeOnOtherQueue schedules Charge on the "payments" queue, whose worker
// is the only one that declares it.
func ChargeOnOtherQueue(ctx sdk.Context, amount int) (int, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{TaskQueue: "payments", StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Charge, amount).Get(ctx)
}

// Invoice is the input of Bill.
type Invoice struct {
	ID     string
	Amount int
	At     time.Time // changes on every run: a key on the whole input would not recognise a re-run
}

var billed atomic.Int32

// Bill is a side effect keyed on the invoice: its business key is a Go
// function only the payments worker has.
func Bill(_ context.Context, inv Invoice) (string, error) {
	billed.Add(1)
	return "billed " + inv.ID, nil
}

// BillOnOtherQueue bills an invoice on the "payments" queue.
func BillOnOtherQueue(ctx sdk.Context, id string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{TaskQueue: "payments", StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Bill, Invoice{ID: id, Amount: 7, At: sdk.Now(ctx)}).Get(ctx)
}

// paymentsEnv is a testenv whose own worker runs the workflows and knows
// no activity, and a second worker, on "payments", that declares them.
func paymentsEnv(t *testing.T, workflow any) *testenv.Env {
	t.Helper()
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(workflow)
	env.Start()
	payments := env.NewWorker(worker.Options{TaskQueue: "payments", Identity: "payments"})
	must(t, payments.RegisterActivity(Charge, activities.Options{Effect: activities.SideEffect}))
	must(t, payments.RegisterActivity(Bill, activities.Options{Effect: activities.SideEffect,
		BusinessKey: func(inv Invoice) string { return inv.ID }}))
	env.RunWorker(payments)
	return env
}

// Point 7: a side effect declared only on the worker that runs it is
// guarded all the same — the engine applies the declaration (the stronger
// class, recorded with ActivityKeyed) before the first attempt's intent,
// with the key the workflow's worker would have computed had it declared
// it. The workflow's worker needs no activity options.
func TestSideEffectDeclaredOnlyWhereItRuns(t *testing.T) {
	ctx := testCtx(t)
	env := paymentsEnv(t, ChargeOnOtherQueue)
	charged.Store(0)
	var got int
	if err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: "charge"}, ChargeOnOtherQueue, 42, &got); err != nil || got != 42 {
		t.Fatalf("result %d, %v", got, err)
	}
	if n := charged.Load(); n != 1 {
		t.Fatalf("charged %d times", n)
	}
	evs, err := env.Client.GetHistory(ctx, "charge", "")
	must(t, err)
	var sched *history.ActivityScheduled
	var keyed *history.ActivityKeyed
	var started *history.ActivityStarted
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityScheduled:
			sched = a
		case *history.ActivityKeyed:
			keyed = a
		case *history.ActivityStarted:
			if keyed == nil {
				t.Fatalf("the attempt was dispatched before its key was decided:\n%v", evs)
			}
			started = a
		}
	}
	want := engine.IdempotencyKey("charge", "Charge", sched.Input.Data, 1)
	if sched == nil || keyed == nil || started == nil || keyed.Effect != history.SideEffect || keyed.IdempotencyKey != want ||
		keyed.DeclaredBy != "payments" {
		t.Fatalf("want the side effect keyed as declared on the payments worker (key %s):\n%v", want, evs)
	}
}

// Point 7: a business key only the activity's worker can compute (a Go
// function of the input) still keys the action: a re-run of the workflow
// id, whose input differs (a timestamp), is recognised and not billed again.
func TestBusinessKeyDeclaredOnlyWhereItRuns(t *testing.T) {
	ctx := testCtx(t)
	env := paymentsEnv(t, BillOnOtherQueue)
	billed.Store(0)
	var first, second string
	must(t, env.ExecuteWorkflow(ctx, client.StartOptions{ID: "bill"}, BillOnOtherQueue, "INV-1", &first))
	env.Clock.Advance(time.Hour) // the re-run's input carries another time
	must(t, env.ExecuteWorkflow(ctx, client.StartOptions{ID: "bill"}, BillOnOtherQueue, "INV-1", &second))
	if first != "billed INV-1" || second != first || billed.Load() != 1 {
		t.Fatalf("results %q, %q; billed %d times, want once", first, second, billed.Load())
	}
	evs, err := env.Client.GetHistory(ctx, "bill", "")
	must(t, err)
	if count(evs, history.TypeActivityDeduplicated) != 1 || count(evs, history.TypeActivityStarted) != 0 {
		t.Fatalf("the re-run was not deduplicated:\n%v", evs)
	}
	var keyed *history.ActivityKeyed
	for _, ev := range evs {
		if k, ok := ev.Attrs.(*history.ActivityKeyed); ok {
			keyed = k
		}
	}
	if want := engine.IdempotencyKey("bill", "Bill", []byte("INV-1"), 1); keyed == nil || keyed.IdempotencyKey != want {
		t.Fatalf("keyed %+v, want the business key's %s", keyed, want)
	}
}

// A side effect the workflow's worker declares stronger than the
// activity's worker does keeps the stronger class: a mismatch never
// weakens the guard.
func TestTheStrongerDeclarationWins(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(ChargeOnOtherQueue)
	env.RegisterActivity(Charge, activities.Options{Effect: activities.SideEffect}) // on the workflow's worker
	env.Start()
	payments := env.NewWorker(worker.Options{TaskQueue: "payments"})
	must(t, payments.RegisterActivity(Charge)) // Read, where it runs
	env.RunWorker(payments)
	must(t, env.ExecuteWorkflow(ctx, client.StartOptions{ID: "stronger"}, ChargeOnOtherQueue, 5, nil))
	evs, err := env.Client.GetHistory(ctx, "stronger", "")
	must(t, err)
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && (s.Effect != history.SideEffect || s.IdempotencyKey == "") {
			t.Fatalf("scheduled %+v, want SideEffect with a key", s)
		}
	}
}

var modelCalls atomic.Int32

// Complete stands for a model call: metered, declared so only where it runs.
func Complete(_ context.Context, prompt string) (string, error) {
	modelCalls.Add(1)
	return "answer to " + prompt, nil
}

// CompleteOnOtherQueue schedules Complete on the "models" queue, whose
// worker is the only one that declares it metered.
func CompleteOnOtherQueue(ctx sdk.Context, prompt string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{TaskQueue: "models", StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Complete, prompt).Get(ctx)
}

// A metered activity declared only on the activity's worker is scheduled by
// the workflow's worker as unmetered, so the engine neither counts it as a
// turn nor checks the budget before it: the activity worker refuses to run
// it, and the refusal is recorded, rather than let the run spend past its
// budget.
func TestMeteredActivityScheduledWithoutItsDeclarationIsRefused(t *testing.T) {
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(CompleteOnOtherQueue)
	env.Start()
	models := env.NewWorker(worker.Options{TaskQueue: "models"})
	if err := models.RegisterActivity(Complete, activities.Options{Metered: true}); err != nil {
		t.Fatal(err)
	}
	env.RunWorker(models)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: "complete"}, CompleteOnOtherQueue, "hello", nil)
	var appErr *sdk.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type != "MeteredMismatch" || !strings.Contains(appErr.Error(), "declared metered") {
		t.Fatalf("workflow error %v, want the MeteredMismatch failure", err)
	}
	if n := modelCalls.Load(); n != 0 {
		t.Fatalf("the unmetered model call ran %d times", n)
	}
	evs, herr := env.Client.GetHistory(ctx, "complete", "")
	if herr != nil {
		t.Fatal(herr)
	}
	found := false
	for _, ev := range evs {
		if f, ok := ev.Attrs.(*history.ActivityFailed); ok && f.Failure.Type == "MeteredMismatch" && f.Failure.NonRetryable {
			found = true
		}
	}
	if !found {
		t.Fatal("the refusal is not recorded in history as a non-retryable ActivityFailed")
	}
}
