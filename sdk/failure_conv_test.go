package sdk

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
)

func TestFailureConversion(t *testing.T) {
	cases := []struct {
		err   error
		typ   string
		check func(error) bool
	}{
		{NewApplicationError("nope", "Nope", 1, "two"), "Nope", func(e error) bool {
			var a *ApplicationError
			var d []any
			return errors.As(e, &a) && a.Message == "nope" && !a.NonRetryable && a.DetailsInto(&d) == nil && len(d) == 2
		}},
		{NewNonRetryableError("stop", "Stop"), "Stop", func(e error) bool {
			var a *ApplicationError
			return errors.As(e, &a) && a.NonRetryable
		}},
		{&CanceledError{Message: "by user"}, FailureTypeCanceled, func(e error) bool {
			var c *CanceledError
			return errors.As(e, &c) && c.Message == "by user" && errors.Is(e, ErrCanceled)
		}},
		{&TimeoutError{TimeoutType: "heartbeat"}, FailureTypeTimeout, func(e error) bool {
			var to *TimeoutError
			return errors.As(e, &to) && to.TimeoutType == "heartbeat"
		}},
		{&PanicError{Value: "boom", Stack: "stack"}, FailureTypePanic, func(e error) bool {
			var p *PanicError
			return errors.As(e, &p) && p.Value == "boom" && p.Stack == "stack"
		}},
		{io.EOF, "errorString", func(e error) bool { return e.Error() == "errorString: EOF" }},
		{fmt.Errorf("wrapped: %w", NewNonRetryableError("inner", "Inner")), "Inner", func(e error) bool {
			var a *ApplicationError
			return errors.As(e, &a) && a.NonRetryable && strings.Contains(a.Message, "wrapped: Inner: inner")
		}},
	}
	for _, c := range cases {
		f := ErrorToFailure(c.err)
		if f.Type != c.typ {
			t.Errorf("%v: type %q, want %q", c.err, f.Type, c.typ)
		}
		if back := FailureToError(f); !c.check(back) {
			t.Errorf("%v: came back as %#v", c.err, back)
		}
	}
	if f := ErrorToFailure(nil); !reflect.DeepEqual(f, history.Failure{}) {
		t.Fatal("nil error")
	}
	// Errors wrapping an activity error keep the cause's type.
	ae := &ActivityError{ActivityType: "SendPayment", ActivityID: "2", ScheduledEventID: 7, Cause: NewNonRetryableError("declined", "CardDeclined")}
	if f := ErrorToFailure(fmt.Errorf("pay: %w", ae)); f.Type != "CardDeclined" || !f.NonRetryable || !strings.Contains(f.Message, "SendPayment") {
		t.Fatalf("activity error failure %+v", f)
	}
	if cause, f := TaskFailure(errors.New("x")); cause != "error" || f.Message != "x" {
		t.Fatal("plain task failure")
	}
}
