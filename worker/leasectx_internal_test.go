package worker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/internal/clock"
)

// A process that wakes from a freeze runs whatever was due first; the
// attempt's Err must not wait for the lease timer: it consults the clock.
func TestLeaseContextErrConsultsTheClock(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	// A heartbeater whose lease timer has not run (it is not even armed).
	hb := &heartbeater{clk: clk, cancel: cancel, until: clk.Now().Add(10 * time.Second)}
	lc := leaseContext{ctx, hb}
	if err := lc.Err(); err != nil {
		t.Fatalf("within the lease: %v", err)
	}
	clk.Set(clk.Now().Add(10 * time.Second)) // woken up at the lease end: no callback ran
	if err := lc.Err(); !errors.Is(err, context.Canceled) || !errors.Is(context.Cause(lc), activities.ErrLeaseLost) {
		t.Fatalf("past the lease: %v (cause %v), want canceled with activities.ErrLeaseLost", err, context.Cause(lc))
	}
	select {
	case <-lc.Done():
	default:
		t.Fatal("Err saw the lease over but Done is still open")
	}
}
