package worker_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
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
