package sdk

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Sentinel errors of the SDK. Check them with errors.Is.
var (
	// ErrHistoryGap: a task does not continue the Execution's history — its
	// first event is not the one after the last seen, or the decision the
	// Execution produced last was not recorded (the completion was refused
	// or the task was redelivered elsewhere). Nothing was changed: close
	// the Execution and build a new one from the full history.
	ErrHistoryGap = errors.New("sdk: history gap")
	// ErrClosed: the Execution was closed.
	ErrClosed = errors.New("sdk: execution closed")
	// ErrNondeterminism: workflow code produced commands that differ from
	// the recorded history. The concrete error is a *NondeterminismError.
	ErrNondeterminism = errors.New("sdk: nondeterminism")
	// ErrDeadlock: a workflow coroutine blocked outside the SDK. The
	// concrete error is a *DeadlockError.
	ErrDeadlock = errors.New("sdk: workflow blocked outside the sdk")
	// ErrCanceled matches every *CanceledError with errors.Is.
	ErrCanceled = errors.New("sdk: canceled")
	// ErrUnknownWorkflowType: no workflow is registered under the task's type.
	ErrUnknownWorkflowType = errors.New("sdk: unknown workflow type")
	// ErrUnknownQuery: no handler is registered for a query type.
	ErrUnknownQuery = errors.New("sdk: unknown query type")
	// ErrSignalNotDelivered: SignalExternalWorkflow found no open run.
	ErrSignalNotDelivered = errors.New("sdk: signal not delivered: no open run has that workflow id")
)

// Failure types the SDK writes into history.Failure.Type and recognises
// when it turns a failure back into an error.
const (
	FailureTypeCanceled = "CanceledError"
	FailureTypeTimeout  = "TimeoutError"
	FailureTypePanic    = "PanicError"
	// FailureTypeResultTooLarge: the activity completed (its effect
	// happened) but its result was over the engine's payload limit and was
	// not recorded; see history.ActivityCompleted.ResultOmitted.
	FailureTypeResultTooLarge = "ResultTooLarge"
	// FailureTypeUnknownWorkflowType: a workflow task failed because the
	// worker has no workflow of the run's type (ErrUnknownWorkflowType).
	FailureTypeUnknownWorkflowType = "UnknownWorkflowType"
)

// ApplicationError is an error raised by workflow or activity code and
// carried through history as a plain failure (activities.ApplicationError:
// activities raise it without importing the workflow runtime).
type ApplicationError = activities.ApplicationError

// NewApplicationError returns an *ApplicationError. details, when given, are
// encoded with the default converter (one value as itself, several as a
// list).
func NewApplicationError(message, errType string, details ...any) error {
	return activities.NewApplicationError(message, errType, details...)
}

// NewNonRetryableError returns an *ApplicationError that stops activity
// retries regardless of the retry policy.
func NewNonRetryableError(message, errType string, details ...any) error {
	return activities.NewNonRetryableError(message, errType, details...)
}

// CanceledError reports that an operation stopped because cancellation was
// requested: an activity that acknowledged cancellation, a timer canceled by
// its context, a workflow context's Err. It matches ErrCanceled.
type CanceledError struct {
	Message string
	Details history.Payload
}

// Error describes the cancellation.
func (e *CanceledError) Error() string {
	if e.Message == "" {
		return "canceled"
	}
	return "canceled: " + e.Message
}

// Is makes errors.Is(err, ErrCanceled) true.
func (e *CanceledError) Is(target error) bool { return target == ErrCanceled }

// TimeoutError reports a timeout. TimeoutType is "start_to_close",
// "schedule_to_start", "schedule_to_close", "heartbeat", "execution" or
// "run"; Cause is the last failure before the timeout, if any.
type TimeoutError struct {
	TimeoutType string
	Cause       error
}

// Error describes the timeout.
func (e *TimeoutError) Error() string {
	msg := "timeout"
	if e.TimeoutType != "" {
		msg += " (" + e.TimeoutType + ")"
	}
	if e.Cause != nil {
		msg += ": last failure: " + e.Cause.Error()
	}
	return msg
}

// Unwrap returns the last failure.
func (e *TimeoutError) Unwrap() error { return e.Cause }

// RetryState says why an activity stopped being retried.
type RetryState uint8

// The retry states.
const (
	RetryStateUnspecified RetryState = iota
	// RetryStateNonRetryableFailure: the failure was marked non-retryable
	// or its type is listed in the policy's NonRetryableErrorTypes.
	RetryStateNonRetryableFailure
	// RetryStateMaximumAttemptsReached: the policy's attempts ran out.
	RetryStateMaximumAttemptsReached
	// RetryStateTimeout: a schedule-to-close (or similar) timeout ended it.
	RetryStateTimeout
	// RetryStateCancelRequested: the activity was canceled.
	RetryStateCancelRequested
	// RetryStateResolved: a person (or a Reconcile lookup) decided it.
	RetryStateResolved
)

// String returns the state's name.
func (s RetryState) String() string {
	switch s {
	case RetryStateNonRetryableFailure:
		return "non_retryable_failure"
	case RetryStateMaximumAttemptsReached:
		return "maximum_attempts_reached"
	case RetryStateTimeout:
		return "timeout"
	case RetryStateCancelRequested:
		return "cancel_requested"
	case RetryStateResolved:
		return "resolved"
	}
	return "unspecified"
}

// ActivityError is what workflow code receives from a failed activity. It
// wraps the cause (an *ApplicationError, *TimeoutError, *CanceledError or
// *PanicError), so errors.As reaches it.
type ActivityError struct {
	ActivityType     string
	ActivityID       string
	ScheduledEventID int64
	RetryState       RetryState
	Cause            error
}

// Error names the activity and the cause.
func (e *ActivityError) Error() string {
	return fmt.Sprintf("activity %s (id %s, scheduled at event %d) failed: %v", e.ActivityType, e.ActivityID, e.ScheduledEventID, e.Cause)
}

// Unwrap returns the cause.
func (e *ActivityError) Unwrap() error { return e.Cause }

// ChildWorkflowError is what workflow code receives from a child workflow
// that did not complete. It wraps the cause.
type ChildWorkflowError struct {
	WorkflowID       string
	RunID            string
	WorkflowType     string
	InitiatedEventID int64
	Cause            error
}

// Error names the child and the cause.
func (e *ChildWorkflowError) Error() string {
	return fmt.Sprintf("child workflow %s (id %s, run %s) failed: %v", e.WorkflowType, e.WorkflowID, e.RunID, e.Cause)
}

// Unwrap returns the cause.
func (e *ChildWorkflowError) Unwrap() error { return e.Cause }

// PanicError is a panic in workflow (or activity) code, with its stack.
type PanicError struct {
	// Value is the panic value rendered as text.
	Value string
	// Stack is the panicking goroutine's stack.
	Stack string
}

// Error returns "panic: <value>".
func (e *PanicError) Error() string { return "panic: " + e.Value }

func newPanicError(r any, stack []byte) *PanicError {
	return &PanicError{Value: fmt.Sprint(r), Stack: string(stack)}
}

// NondeterminismError reports that replayed workflow code did not produce
// what the history recorded. EventID is the event at which they diverge;
// Recorded describes what history has there (e.g. "ActivityScheduled
// SendPayment id=2 args#ab12cd34"), Produced what the code produced
// ("nothing" when the code produced fewer commands).
type NondeterminismError struct {
	EventID  int64
	Recorded string
	Produced string
}

// Error names the event, what history recorded and what the code produced.
func (e *NondeterminismError) Error() string {
	return fmt.Sprintf("sdk: nondeterminism at event %d: history recorded %s, workflow code produced %s", e.EventID, e.Recorded, e.Produced)
}

// Is makes errors.Is(err, ErrNondeterminism) true.
func (e *NondeterminismError) Is(target error) bool { return target == ErrNondeterminism }

// DeadlockError reports a workflow coroutine that did not yield within the
// deadlock timeout: it blocked outside the SDK (a native channel, a mutex,
// time.Sleep, I/O) or computed for too long. The goroutine is abandoned.
type DeadlockError struct {
	Coroutine string
	Timeout   time.Duration
	// Stack is the stuck goroutine's stack when it was detected.
	Stack string
}

// Error names the coroutine and the timeout; the stack is in Stack.
func (e *DeadlockError) Error() string {
	return fmt.Sprintf("sdk: workflow coroutine %q did not yield within %s: it is blocked outside the sdk (native channel, mutex, time.Sleep, I/O?) or busy",
		e.Coroutine, e.Timeout)
}

// Is makes errors.Is(err, ErrDeadlock) true.
func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock }

// ContinueAsNewError, returned by a workflow function, closes the run and
// starts a new run of the same workflow id with fresh history. Build it with
// NewContinueAsNewError; empty fields take the current run's values.
type ContinueAsNewError struct {
	WorkflowType string
	Input        history.Payload
	TaskQueue    string
	RunTimeout   time.Duration
	TaskTimeout  time.Duration
}

// Error says the run continues as new.
func (e *ContinueAsNewError) Error() string {
	return "continue as new: " + e.WorkflowType
}

// IsCanceledError reports whether err is or wraps a *CanceledError.
func IsCanceledError(err error) bool { return errors.Is(err, ErrCanceled) }

// ErrorToFailure turns an error into the plain value stored in history. The
// first SDK error in the chain decides Type, NonRetryable, Details and
// Stack; Message is err.Error(). Any other error gets its Go type name as
// Type (e.g. "errorString"), for NonRetryableErrorTypes.
func ErrorToFailure(err error) history.Failure {
	if err == nil {
		return history.Failure{}
	}
	f := history.Failure{Message: err.Error()}
	var (
		app *ApplicationError
		can *CanceledError
		tmo *TimeoutError
		pan *PanicError
		fai *history.Failure
	)
	switch {
	case errors.As(err, &pan):
		f.Type, f.Stack, f.Message = FailureTypePanic, pan.Stack, strings.TrimPrefix(f.Message, "panic: ")
	case errors.As(err, &app):
		f.Type, f.NonRetryable, f.Details, f.Stack = app.Type, app.NonRetryable, app.Details, app.Stack
		if f.Message == app.Error() {
			f.Message = app.Message
		}
	case errors.As(err, &can):
		f.Type, f.Details = FailureTypeCanceled, can.Details
	case errors.As(err, &tmo):
		f.Type = FailureTypeTimeout
		if tmo.TimeoutType != "" {
			f.Details, _ = DefaultConverter().ToPayload(tmo.TimeoutType)
		}
	case errors.As(err, &fai):
		return *fai
	default:
		f.Type = errorTypeName(err)
	}
	return f
}

func errorTypeName(err error) string {
	t := reflect.TypeOf(err)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Name() == "" {
		return t.String()
	}
	return t.Name()
}

// FailureToError turns a stored failure back into the error workflow code
// receives: *CanceledError, *TimeoutError, *PanicError, or an
// *ApplicationError carrying Type, Message, NonRetryable and Details.
func FailureToError(f history.Failure) error {
	switch f.Type {
	case FailureTypeCanceled, "Canceled", "canceled":
		msg := f.Message
		if msg == "canceled" {
			msg = ""
		}
		return &CanceledError{Message: strings.TrimPrefix(msg, "canceled: "), Details: f.Details}
	case FailureTypeTimeout, "timed_out":
		var kind string
		_ = DefaultConverter().FromPayload(f.Details, &kind)
		return &TimeoutError{TimeoutType: kind}
	case FailureTypePanic:
		return &PanicError{Value: f.Message, Stack: f.Stack}
	}
	return &ApplicationError{Type: f.Type, Message: f.Message, NonRetryable: f.NonRetryable, Details: f.Details, Stack: f.Stack}
}

// TaskFailure classifies an error returned by Execution.ProcessTask (or
// NewExecution) for FailWorkflowTask: cause is "panic", "nondeterminism",
// "blocked", api.CauseUnknownWorkflowType or "error", and the failure
// carries the message and stack.
func TaskFailure(err error) (cause string, f history.Failure) {
	var (
		pan *PanicError
		non *NondeterminismError
		dl  *DeadlockError
	)
	switch {
	case errors.As(err, &pan):
		return "panic", history.Failure{Type: FailureTypePanic, Message: pan.Error(), Stack: pan.Stack}
	case errors.As(err, &non):
		return "nondeterminism", history.Failure{Type: "NondeterminismError", Message: non.Error()}
	case errors.As(err, &dl):
		return "blocked", history.Failure{Type: "DeadlockError", Message: dl.Error(), Stack: dl.Stack}
	case errors.Is(err, ErrUnknownWorkflowType):
		return api.CauseUnknownWorkflowType, history.Failure{Type: FailureTypeUnknownWorkflowType, Message: err.Error()}
	}
	return "error", ErrorToFailure(err)
}
