// Package good holds a deterministic workflow, for the tests of cairn vet.
package good

import (
	"time"

	"github.com/cairnflow/cairn/sdk"
)

// Remind waits on the workflow's timer.
func Remind(ctx sdk.Context, at time.Time) (time.Time, error) {
	if err := sdk.Sleep(ctx, at.Sub(sdk.Now(ctx))); err != nil {
		return time.Time{}, err
	}
	return sdk.Now(ctx), nil
}
