package clienttest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/sdk"
)

// The workflows and activities the suite runs. They are exported so that a
// failing test names them, and so that other test suites may reuse them.

// Order is the input of Checkout and Pay.
type Order struct {
	ID     string
	Amount int
}

// Receipt is the result of Checkout and Pay.
type Receipt struct {
	OrderID string
	Total   int
	Note    string
}

// DeclineDetails ride on the *sdk.ApplicationError that Decline returns.
type DeclineDetails struct {
	Code int
}

var activityOptions = sdk.ActivityOptions{StartToCloseTimeout: time.Minute}

// Checkout runs one activity (Stamp) and returns a typed result.
func Checkout(ctx sdk.Context, o Order) (Receipt, error) {
	ctx = sdk.WithActivityOptions(ctx, activityOptions)
	note, err := sdk.ExecuteActivity(ctx, Stamp, o.ID).Get(ctx)
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{OrderID: o.ID, Total: 2 * o.Amount, Note: note}, nil
}

// Stamp is Checkout's activity.
func Stamp(_ context.Context, id string) (string, error) { return "stamped " + id, nil }

// Decline fails with an *sdk.ApplicationError of type "CardDeclined".
func Decline(_ sdk.Context, reason string) (string, error) {
	return "", sdk.NewApplicationError("card declined: "+reason, "CardDeclined", DeclineDetails{Code: 51})
}

// Accumulate adds the ints signalled on "add" to start until a "done"
// signal arrives, and answers the "total" query with the running sum. Its
// "add" update adds a positive int (a validator rejects the others) and
// answers the new sum.
func Accumulate(ctx sdk.Context, start int) (int, error) {
	total := start
	if err := sdk.SetQueryHandler(ctx, "total", func() (int, error) { return total, nil }); err != nil {
		return 0, err
	}
	err := sdk.SetUpdateHandler(ctx, "add", func(ctx sdk.Context, n int) (int, error) {
		total += n
		return total, nil
	}, sdk.UpdateHandlerOptions{Validator: func(ctx sdk.Context, n int) error {
		if n <= 0 {
			return fmt.Errorf("add %d: only positive amounts", n)
		}
		return nil
	}})
	if err != nil {
		return 0, err
	}
	add := sdk.GetSignalChannel[int](ctx, "add")
	done := sdk.GetSignalChannel[string](ctx, "done")
	for finished := false; !finished; {
		sdk.NewSelector(ctx).
			AddReceive(add, func(bool) { total += add.Receive(ctx) }).
			AddReceive(done, func(bool) { done.Receive(ctx); finished = true }).
			Select(ctx)
	}
	for {
		v, ok := add.ReceiveAsync()
		if !ok {
			return total, nil
		}
		total += v
	}
}

// WaitForCancel blocks until the run is canceled (or terminated).
func WaitForCancel(ctx sdk.Context) (string, error) {
	if err := sdk.Await(ctx, func() bool { return false }); err != nil {
		return "", err
	}
	return "not canceled", nil
}

// HoldOn runs the "Hold" activity (see Holder) with activity id "hold".
func HoldOn(ctx sdk.Context, in string) (string, error) {
	o := activityOptions
	o.ActivityID = "hold"
	ctx = sdk.WithActivityOptions(ctx, o)
	return sdk.ExecuteActivityByName[string](ctx, "Hold", in).Get(ctx)
}

// Holder is the "Hold" activity: it reports that it started and returns
// only once the test releases it.
type Holder struct {
	Started chan struct{}
	Release chan struct{}
	once    sync.Once
}

// NewHolder returns a Holder; register its Hold method as "Hold".
func NewHolder() *Holder {
	return &Holder{Started: make(chan struct{}), Release: make(chan struct{})}
}

// Hold is the activity.
func (h *Holder) Hold(ctx context.Context, in string) (string, error) {
	h.once.Do(func() { close(h.Started) })
	select {
	case <-h.Release:
		return "held " + in, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Pay charges an order with Charge, a SideEffect activity.
func Pay(ctx sdk.Context, o Order) (Receipt, error) {
	ctx = sdk.WithActivityOptions(ctx, activityOptions)
	return sdk.ExecuteActivity(ctx, Charge, o).Get(ctx)
}

// Charge cannot tell whether the payment went through: the run pauses until
// a person resolves it.
func Charge(_ context.Context, o Order) (Receipt, error) {
	return Receipt{}, fmt.Errorf("gateway timed out after the charge for %s was sent: %w", o.ID, activities.ErrOutcomeUnknown)
}

// Bulky returns a result well above the engine's inline threshold, so it is
// recorded by reference: a client reading it must get the whole value.
func Bulky(_ sdk.Context, n int) (string, error) { return strings.Repeat("b", n), nil }
