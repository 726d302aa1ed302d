// Package activities is the activity side of Cairn: the effect classes an
// activity declares where it is registered, the idempotency key and attempt
// information a running activity can read, heartbeats, and the outcomes a
// tool or a Reconcile lookup can report.
//
// The side-effecting set is a deliberate, reviewable list: it is declared
// where activities are registered, next to the code that performs them.
//
//	w.RegisterActivity(SendPayment, activities.Options{
//		Effect:      activities.SideEffect,
//		BusinessKey: func(p Payment) string { return p.Invoice }, // key on the invoice, not the whole arguments
//		Reconcile:   LookupPayment,                               // "did this payment happen?"
//	})
//
// Inside the activity:
//
//	func SendPayment(ctx context.Context, p Payment) (Receipt, error) {
//		info := activities.GetInfo(ctx)
//		req.Header.Set("Idempotency-Key", info.IdempotencyKey) // let the provider dedupe too
//		...
//		if vendorTimedOut {
//			return Receipt{}, activities.ErrOutcomeUnknown // nobody can tell whether it was paid
//		}
//	}
package activities

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnflow/cairn/history"
)

// Effect is an activity's effect class: what a lost lease or an unknown
// outcome means for it. See docs/effects.md.
type Effect = history.EffectClass

// The effect classes.
const (
	// Read: no side effect. A lost attempt is retried per the retry policy;
	// replaying a read is free. The default.
	Read = history.Read
	// Idempotent: the downstream deduplicates on the idempotency key (an
	// Idempotency-Key header, a conditional write). Intent is recorded
	// before dispatch and a lost attempt is retried with the same key.
	Idempotent = history.Idempotent
	// SideEffect: the effect must not happen twice and the downstream cannot
	// deduplicate. Intent is recorded durably before dispatch; an attempt
	// whose outcome is unknown runs the Reconcile lookup if there is one and
	// otherwise pauses the run until a person resolves it.
	SideEffect = history.SideEffect
)

// Sentinel outcomes an activity (or its Reconcile lookup) may return.
var (
	// ErrOutcomeUnknown: the tool cannot tell whether the action took effect
	// (a vendor timeout, a dropped connection after the request was sent).
	// For a SideEffect activity the engine reconciles or pauses the run; for
	// Idempotent and Read activities it retries.
	ErrOutcomeUnknown = errors.New("activities: outcome unknown")
	// ErrNotHappened is returned by a Reconcile lookup that established the
	// action did not take place: the engine retries it with the same key.
	ErrNotHappened = errors.New("activities: action did not happen")
	// ErrLeaseLost is the cause (context.Cause) of an activity's context
	// canceled because the worker no longer holds the attempt's lease: a
	// heartbeat learned it is gone, or its end passed without a renewal
	// (the server unreachable, the process frozen), or the start-to-close
	// timeout is over. Another attempt may run: stop, and do not start
	// the action now. A SideEffect activity interrupted this way with a
	// context error is reported as an unknown outcome; return an error
	// that does not wrap the context's when the request was certainly not
	// sent.
	ErrLeaseLost = errors.New("activities: lease lost")
	// ErrResultPending, returned by an activity, says that its outcome
	// will be reported later by someone else — a person following a link,
	// a webhook — who holds the attempt's task token (Info.TaskToken) or
	// its ids (workflow id, run id, activity id) and calls the client's
	// CompleteActivity, FailActivity or HeartbeatActivity (or `cairn
	// activity complete|fail|heartbeat`). The worker reports nothing and
	// the attempt stays started: its start-to-close timeout (and heartbeat
	// timeout, if set, which the token holder must then keep with
	// HeartbeatActivity) still apply, so give such an activity a generous
	// StartToCloseTimeout. Its effect class keeps its meaning: a
	// SideEffect's intent was recorded before it ran, and its asynchronous
	// completion is judged as a worker's report is. Hand the token over
	// durably before returning: a Read attempt is dispatched again after a
	// server restart (its start is not recorded), under a new token.
	ErrResultPending = errors.New("activities: result pending: the activity will be completed asynchronously")
)

// Options declare an activity where it is registered.
type Options struct {
	// Name is the activity type name (default: the function's name).
	Name string
	// Effect is the activity's effect class (default Read).
	Effect Effect
	// BusinessKey derives the idempotency key material from the arguments,
	// e.g. func(p Payment) string { return p.Invoice }. Without it the key
	// is derived from the canonical encoding of all the arguments, which
	// breaks as soon as an argument changes per attempt (a timestamp, a
	// UUID). Its signature must be func(I) string for the activity's input
	// type I.
	BusinessKey any
	// Reconcile answers "did this action happen?" for a SideEffect activity
	// whose outcome is unknown. Its signature is the activity's own,
	// func(context.Context, I) (O, error): return the action's result when it
	// happened, ErrNotHappened when it did not, or ErrOutcomeUnknown when it
	// still cannot tell (the run then pauses for a person).
	Reconcile any
	// Metered marks an activity that reports usage with RecordUsage (a
	// model call): it counts against the run's budget, and is held while
	// the budget is exhausted.
	Metered bool
}

// Info describes the running attempt.
type Info struct {
	// IdempotencyKey identifies the logical action for Idempotent and
	// SideEffect activities: send it downstream (an Idempotency-Key header)
	// so that the provider can deduplicate too. Empty for Read activities.
	IdempotencyKey string
	WorkflowID     string
	RunID          string
	WorkflowType   string
	ActivityID     string
	ActivityType   string
	// Attempt counts from 1.
	Attempt int32
	// Effect is the class the activity was scheduled with.
	Effect Effect
	// Reconcile is true when this attempt runs the Reconcile lookup.
	Reconcile bool
	// Deadline is when the lease ends unless a heartbeat extends it.
	Deadline time.Time
	// ScheduledTime and StartedTime are the engine's clock.
	ScheduledTime time.Time
	StartedTime   time.Time
	// HeartbeatDetails are the last details recorded by an earlier attempt.
	HeartbeatDetails history.Payload
	// TaskToken names this attempt to the engine: whoever holds it can
	// report the attempt's outcome after the activity returned
	// ErrResultPending. TaskTokenString is its printable form.
	TaskToken []byte
}

// TaskTokenString returns the task token in a printable form (unpadded
// base64url: safe in a URL, a command line or a chat message), which
// ParseTaskToken reads back.
func (i *Info) TaskTokenString() string { return FormatTaskToken(i.TaskToken) }

// FormatTaskToken returns a task token's printable form (unpadded
// base64url).
func FormatTaskToken(tok []byte) string { return base64.RawURLEncoding.EncodeToString(tok) }

// ParseTaskToken reads a task token's printable form (FormatTaskToken);
// padded base64url is accepted too.
func ParseTaskToken(s string) ([]byte, error) {
	tok, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(strings.TrimSpace(s), "="))
	if err != nil || len(tok) == 0 {
		return nil, fmt.Errorf("activities: %q is not a task token (unpadded base64url)", s)
	}
	return tok, nil
}

type infoKey struct{}

type heartbeatKey struct{}

type chunksKey struct{}

// WithChunks returns ctx carrying the source of payload chunks (for workers
// and tests).
func WithChunks(ctx context.Context, src history.ChunkSource) context.Context {
	return context.WithValue(ctx, chunksKey{}, src)
}

// Chunks returns the source of stored payload chunks for the running
// attempt, or nil outside an activity. An activity that declares its input
// as a raw history.Payload receives it as recorded — possibly a reference to
// a chunk chain (a transcript) — and resolves it with this source, caching
// what it built from earlier chunks; every other activity receives its
// input resolved.
func Chunks(ctx context.Context) history.ChunkSource {
	src, _ := ctx.Value(chunksKey{}).(history.ChunkSource)
	return src
}

// Heartbeater records progress for the running attempt; the worker
// installs one in every activity's context.
type Heartbeater func(details any)

// WithInfo returns ctx carrying info (for workers and tests).
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// WithHeartbeater returns ctx carrying h (for workers and tests).
func WithHeartbeater(ctx context.Context, h Heartbeater) context.Context {
	return context.WithValue(ctx, heartbeatKey{}, h)
}

// GetInfo returns the running attempt's information, or nil outside an
// activity.
func GetInfo(ctx context.Context) *Info {
	info, _ := ctx.Value(infoKey{}).(*Info)
	return info
}

// RecordHeartbeat reports progress and extends the attempt's lease. The
// worker sends heartbeats in the background at a bounded rate, so calling it
// often is cheap. Whether cancellation was requested shows in ctx.Done().
func RecordHeartbeat(ctx context.Context, details any) {
	if h, ok := ctx.Value(heartbeatKey{}).(Heartbeater); ok && h != nil {
		h(details)
	}
}

// RetryAfterError asks for the next attempt after Delay instead of the
// retry policy's backoff (a provider's Retry-After). It does not make a
// non-retryable error retryable. Build it with WithRetryAfter.
type RetryAfterError struct {
	Err   error
	Delay time.Duration
}

// Error returns the wrapped error's message.
func (e *RetryAfterError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *RetryAfterError) Unwrap() error { return e.Err }

// WithRetryAfter wraps err so that the engine retries after d.
func WithRetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &RetryAfterError{Err: err, Delay: d}
}

// Usage records what the running attempt consumed (a model call's tokens);
// calls add up. The worker reports the sum with the attempt's outcome,
// success or failure, and the engine prices it and counts it against the
// run's budget.
func RecordUsage(ctx context.Context, u history.Usage) {
	if r, ok := ctx.Value(usageKey{}).(UsageRecorder); ok && r != nil {
		r(u)
	}
}

// UsageRecorder receives RecordUsage calls; the worker installs one.
type UsageRecorder func(history.Usage)

type usageKey struct{}

// WithUsageRecorder returns ctx carrying r (for workers and tests).
func WithUsageRecorder(ctx context.Context, r UsageRecorder) context.Context {
	return context.WithValue(ctx, usageKey{}, r)
}

// StreamDelta is a piece of the attempt's live output.
type StreamDelta struct {
	// Kind is "text" (a piece of the answer) or "tool_call" (a tool call's
	// name or a fragment of its JSON arguments).
	Kind          string
	Text          string
	ToolCallIndex int
	ToolCallID    string
	ToolName      string
}

// Streamer receives Stream calls; the worker installs one that batches
// the deltas to the engine.
type Streamer func(StreamDelta)

type streamKey struct{}

// WithStreamer returns ctx carrying s (for workers and tests).
func WithStreamer(ctx context.Context, s Streamer) context.Context {
	return context.WithValue(ctx, streamKey{}, s)
}

// Stream publishes a piece of the running attempt's output to the run's
// watchers while it is produced (nothing is written to history; the
// activity's result is). Outside a worker it does nothing.
func Stream(ctx context.Context, d StreamDelta) {
	if s, ok := ctx.Value(streamKey{}).(Streamer); ok && s != nil {
		s(d)
	}
}
