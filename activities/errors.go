package activities

import (
	"github.com/cairnflow/cairn/converter"
	"github.com/cairnflow/cairn/history"
)

// ApplicationError is an error raised by activity (or workflow) code and
// carried through history as a plain failure. Type names the kind of error
// (retry policies list non-retryable types by name); NonRetryable stops
// activity retries regardless of the policy. sdk.ApplicationError is this
// type.
type ApplicationError struct {
	Type         string
	Message      string
	NonRetryable bool
	// Details is an encoded value attached by the raiser; decode it with
	// DetailsInto.
	Details history.Payload
	// Stack is the stack recorded with the failure, if any.
	Stack string
}

// NewApplicationError returns an *ApplicationError. details, when given, are
// encoded with the default converter (one value as itself, several as a
// list).
func NewApplicationError(message, errType string, details ...any) error {
	return &ApplicationError{Type: errType, Message: message, Details: encodeDetails(details)}
}

// NewNonRetryableError returns an *ApplicationError that stops activity
// retries regardless of the retry policy.
func NewNonRetryableError(message, errType string, details ...any) error {
	return &ApplicationError{Type: errType, Message: message, NonRetryable: true, Details: encodeDetails(details)}
}

func encodeDetails(details []any) history.Payload {
	var v any
	switch len(details) {
	case 0:
		return history.Payload{}
	case 1:
		v = details[0]
	default:
		v = details
	}
	p, err := converter.Default().ToPayload(v)
	if err != nil {
		p, _ = converter.Default().ToPayload(err.Error())
	}
	return p
}

// Error returns "Type: Message", or Message when Type is empty.
func (e *ApplicationError) Error() string {
	if e.Type == "" {
		return e.Message
	}
	return e.Type + ": " + e.Message
}

// DetailsInto decodes Details into the value v points to.
func (e *ApplicationError) DetailsInto(v any) error {
	return converter.Default().FromPayload(e.Details, v)
}
