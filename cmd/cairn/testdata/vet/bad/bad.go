// Package bad holds a workflow that is not deterministic, for the tests of
// cairn vet.
package bad

import (
	"context"
	"time"

	"github.com/cairnflow/cairn/sdk"
)

// Remind waits on the wall clock.
func Remind(ctx sdk.Context, at time.Time) (string, error) {
	time.Sleep(time.Until(at))
	return sdk.ExecuteActivity(ctx, Send, "wake up").Get(ctx)
}

// Send is an activity: its clock is its own business.
func Send(ctx context.Context, msg string) (string, error) {
	return time.Now().Format(time.RFC3339) + " " + msg, nil
}
