package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
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

// A side effect declared only on the activity's worker is scheduled by the
// workflow's worker as a plain Read, with no key and no intent: the
// activity worker refuses to run it rather than run it unguarded.
func TestSideEffectScheduledWithoutItsDeclarationIsRefused(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.RegisterWorkflow(ChargeOnOtherQueue)
	env.Start()
	payments := env.NewWorker(worker.Options{TaskQueue: "payments"})
	if err := payments.RegisterActivity(Charge, activities.Options{Effect: activities.SideEffect}); err != nil {
		t.Fatal(err)
	}
	env.RunWorker(payments)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: "charge"}, ChargeOnOtherQueue, 42, nil)
	var appErr *sdk.ApplicationError
	if !errors.As(err, &appErr) || appErr.Type != "EffectClassMismatch" || !strings.Contains(appErr.Error(), "declared SideEffect") {
		t.Fatalf("workflow error %v, want the EffectClassMismatch failure", err)
	}
	if n := charged.Load(); n != 0 {
		t.Fatalf("the unguarded side effect ran %d times", n)
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
	env := testenv.New(t, testenv.Options{})
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
