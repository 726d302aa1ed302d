package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Typed errors of the service contract. Every error a Service returns wraps
// one of these (check with errors.Is); the HTTP transport carries them as a
// stable Code and rebuilds the same sentinel on the client side.
var (
	// ErrNotFound: no such workflow, run or activity.
	ErrNotFound = errors.New("cairn: not found")
	// ErrAlreadyStarted: a run is open for the workflow id (or the reuse
	// policy forbids a new run).
	ErrAlreadyStarted = errors.New("cairn: workflow already started")
	// ErrInvalidArgument: the request is malformed.
	ErrInvalidArgument = errors.New("cairn: invalid argument")
	// ErrLimitExceeded: a configured limit (payload size, history length,
	// pending activities/timers/children, id length) would be exceeded.
	// Nothing was written.
	ErrLimitExceeded = errors.New("cairn: limit exceeded")
	// ErrStaleTask: a workflow task token no longer names the run's current
	// workflow task (it timed out, was redelivered, or the run moved on).
	ErrStaleTask = errors.New("cairn: stale workflow task")
	// ErrStaleAttempt: an activity task token names an attempt whose lease
	// is no longer current (fencing).
	ErrStaleAttempt = errors.New("cairn: stale activity attempt")
	// ErrWorkflowClosed: the run is already closed.
	ErrWorkflowClosed = errors.New("cairn: workflow closed")
	// ErrNotPaused: a resolve named a run, or an activity, that is not
	// paused on an unknown outcome (*NotPausedError says what it does
	// instead).
	ErrNotPaused = errors.New("cairn: not paused")
	// ErrQueryFailed: the query handler returned an error or does not exist.
	ErrQueryFailed = errors.New("cairn: query failed")
	// ErrUpdateRejected: the run's update validator rejected the update,
	// or the run has no handler for it. Nothing was written: the message
	// carries the validator's reason.
	ErrUpdateRejected = errors.New("cairn: update rejected")
	// ErrUnavailable: the service is shutting down or cannot serve now;
	// retry later.
	ErrUnavailable = errors.New("cairn: unavailable")
	// ErrNotSent: a client could not send the call to the server (no
	// connection): it surely was not carried out, and may be sent to
	// another server at once. It wraps ErrUnavailable, and never crosses
	// a transport (its code is unavailable).
	ErrNotSent = fmt.Errorf("%w: the call could not be sent", ErrUnavailable)
	// ErrNotOwner: the run's shard is served by another server of the
	// cluster (docs/scale-out.md): a router forwards the call to its owner,
	// and a client retries it. It wraps ErrUnavailable.
	ErrNotOwner = fmt.Errorf("%w: this server does not serve the run's shard", ErrUnavailable)
	// ErrUnauthenticated: missing or wrong credentials (transport only).
	ErrUnauthenticated = errors.New("cairn: unauthenticated")
	// ErrInternal: an unexpected failure inside the service.
	ErrInternal = errors.New("cairn: internal error")
	// ErrDataCorrupt: the stored data of the run (or of a record the call
	// needs) is damaged. The run is quarantined: its writes are refused
	// with this error until an operator restores it (docs/reliability.md,
	// "Operations"); every other run is served. Where the store named the
	// damage, the error also wraps history.ErrCorrupt.
	ErrDataCorrupt = errors.New("cairn: data corrupt")
	// ErrResourceExhausted: the server ran out of a resource it needs to
	// write (the message starts "resource exhausted: disk full" for a full
	// disk). Nothing was written; reads keep working and writes succeed
	// again once the resource returns, so retry later.
	ErrResourceExhausted = errors.New("resource exhausted")
	// ErrFailedPrecondition: the request is well formed but the run is not
	// in a state that allows it (a reset of a child run, a fork past a
	// child that still runs). The message says what would allow it.
	ErrFailedPrecondition = errors.New("cairn: failed precondition")
)

// Code is the stable, transport-level name of an error.
type Code string

// The error codes, one per sentinel.
const (
	CodeOK              Code = ""
	CodeNotFound        Code = "not_found"
	CodeAlreadyStarted  Code = "already_started"
	CodeInvalidArgument Code = "invalid_argument"
	CodeLimitExceeded   Code = "limit_exceeded"
	CodeStaleTask       Code = "stale_task"
	CodeStaleAttempt    Code = "stale_attempt"
	CodeWorkflowClosed  Code = "workflow_closed"
	CodeNotPaused       Code = "not_paused"
	CodeQueryFailed     Code = "query_failed"
	// CodeUpdateRejected: ErrUpdateRejected.
	CodeUpdateRejected Code = "update_rejected"
	CodeUnavailable    Code = "unavailable"
	// CodeNotOwner: ErrNotOwner.
	CodeNotOwner         Code = "not_owner"
	CodeUnauthenticated  Code = "unauthenticated"
	CodeInternal         Code = "internal"
	CodeDeadlineExceeded Code = "deadline_exceeded"
	CodeCanceled         Code = "canceled"
	CodeDataCorrupt      Code = "data_corrupt"
	// CodeResourceExhausted: ErrResourceExhausted.
	CodeResourceExhausted Code = "resource_exhausted"
	// CodeFailedPrecondition: ErrFailedPrecondition.
	CodeFailedPrecondition Code = "failed_precondition"
)

var codeErrors = []struct {
	code Code
	err  error
}{
	{CodeNotFound, ErrNotFound},
	{CodeAlreadyStarted, ErrAlreadyStarted},
	{CodeInvalidArgument, ErrInvalidArgument},
	{CodeLimitExceeded, ErrLimitExceeded},
	{CodeStaleTask, ErrStaleTask},
	{CodeStaleAttempt, ErrStaleAttempt},
	{CodeWorkflowClosed, ErrWorkflowClosed},
	{CodeNotPaused, ErrNotPaused},
	{CodeQueryFailed, ErrQueryFailed},
	{CodeUpdateRejected, ErrUpdateRejected},
	{CodeNotOwner, ErrNotOwner}, // before unavailable, which it wraps
	{CodeUnavailable, ErrUnavailable},
	{CodeUnauthenticated, ErrUnauthenticated},
	{CodeDataCorrupt, ErrDataCorrupt},
	{CodeResourceExhausted, ErrResourceExhausted},
	{CodeFailedPrecondition, ErrFailedPrecondition},
}

// ErrorCode returns the stable code for err (CodeOK for nil, CodeInternal
// for an error that wraps no sentinel of this package).
func ErrorCode(err error) Code {
	if err == nil {
		return CodeOK
	}
	for _, ce := range codeErrors {
		if errors.Is(err, ce.err) {
			return ce.code
		}
	}
	return CodeInternal
}

// TransportCode is ErrorCode for an error about to cross a transport: a
// context's deadline or cancellation has its own code (deadline_exceeded,
// canceled) rather than internal.
func TransportCode(err error) Code {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return CodeDeadlineExceeded
	case errors.Is(err, context.Canceled):
		return CodeCanceled
	}
	return ErrorCode(err)
}

// ErrorFromCode rebuilds an error from a code and message received over a
// transport; the result wraps the code's sentinel.
func ErrorFromCode(code Code, msg string) error {
	for _, ce := range codeErrors {
		if ce.code == code {
			return &remoteError{sentinel: ce.err, msg: msg}
		}
	}
	return &remoteError{sentinel: ErrInternal, msg: msg}
}

type remoteError struct {
	sentinel error
	msg      string
}

func (e *remoteError) Error() string {
	if strings.HasPrefix(e.msg, e.sentinel.Error()) {
		return e.msg
	}
	return e.sentinel.Error() + ": " + e.msg
}
func (e *remoteError) Unwrap() error { return e.sentinel }

// Errorf returns an error wrapping sentinel with a formatted message.
func Errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", sentinel, fmt.Sprintf(format, args...))
}

// NotPausedError is the refusal of a resolve that names nothing waiting
// on a person: the run, or the activity it names, is not paused on an
// unknown outcome. It says what it does instead and what on the run can
// be resolved. errors.Is(err, ErrNotPaused) holds; over a transport the
// message travels (code not_paused), the fields do not.
type NotPausedError struct {
	WorkflowID string
	RunID      string
	// Activity names the activity the resolve asked for (`activity "pay"
	// (Charge, scheduled event 5)`); empty when it named none (the run's
	// paused one).
	Activity string
	// Doing says what the run, or that activity, does instead, as a
	// predicate ("is running attempt 2 on worker \"w1\"").
	Doing string
	// Resolvable names the activities of the run paused on an unknown
	// outcome, which a resolve can decide; empty when there are none.
	Resolvable []string
}

// Error reads `cairn: not paused: workflow "w" run "r": activity … is
// running attempt 2 …; what can be resolved: …`.
func (e *NotPausedError) Error() string {
	subject := fmt.Sprintf("workflow %q run %q", e.WorkflowID, e.RunID)
	if e.Activity != "" {
		subject += ": " + e.Activity
	}
	can := "nothing on this run can be resolved"
	if len(e.Resolvable) > 0 {
		can = "what can be resolved: " + strings.Join(e.Resolvable, "; ")
	}
	return fmt.Sprintf("%s: %s %s; %s", ErrNotPaused, subject, e.Doing, can)
}

// Unwrap returns ErrNotPaused.
func (e *NotPausedError) Unwrap() error { return ErrNotPaused }
