// Package sdk is a stand-in for Cairn's SDK: the names workflowcheck
// looks at, nothing more.
package sdk

import (
	"context"
	"time"
)

// Context is the workflow context.
type Context interface{ Value(key any) any }

// Now is the workflow's time.
func Now(ctx Context) time.Time { return time.Time{} }

// Sleep sleeps on the workflow's timer.
func Sleep(ctx Context, d time.Duration) error { return nil }

// Go runs fn as a workflow coroutine.
func Go(ctx Context, fn func(ctx Context)) {}

// SideEffect records fn's value.
func SideEffect[T any](ctx Context, fn func(ctx Context) T) T { return fn(ctx) }

// ExecuteActivity schedules an activity.
func ExecuteActivity[I, O any](ctx Context, fn func(context.Context, I) (O, error), in I) O {
	var o O
	return o
}
