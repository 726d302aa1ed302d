package sdk

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/converter"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

type payClient struct{}

func (payClient) Send(_ context.Context, p Payment) (Receipt, error) {
	return Receipt{PaymentID: p.Invoice}, nil
}

func TestRegistrySignatures(t *testing.T) {
	bad := []struct {
		name string
		fn   any
		want string
	}{
		{"not a function", 42, "must be a function"},
		{"nil", nil, "must be a function"},
		{"no context", func(int) error { return nil }, "want func(sdk.Context"},
		{"go context", func(context.Context) error { return nil }, "want func(sdk.Context"},
		{"no error", func(Context) int { return 0 }, "last result must be error"},
		{"two inputs", func(Context, int, int) error { return nil }, "want func(sdk.Context"},
		{"three results", func(Context) (int, int, error) { return 0, 0, nil }, "last result must be error"},
		{"variadic", func(Context, ...int) error { return nil }, "want func(sdk.Context"},
	}
	for _, c := range bad {
		err := NewRegistry().RegisterWorkflow(c.fn, RegisterOptions{Name: "W"})
		if !errors.Is(err, ErrInvalidRegistration) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("workflow %s: %v", c.name, err)
		}
	}
	if err := NewRegistry().RegisterActivity(func(Context) error { return nil }, RegisterActivityOptions{Name: "A"}); err == nil ||
		!strings.Contains(err.Error(), "want func(context.Context") {
		t.Errorf("activity with a workflow context: %v", err)
	}

	reg := NewRegistry()
	for _, fn := range []any{Hello, PayInvoice, func(Context) error { return nil }} {
		_ = reg.RegisterWorkflow(fn, RegisterOptions{Name: funcName(fn) + "x"})
	}
	if err := reg.RegisterWorkflow(Hello); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterWorkflow(Hello); err == nil || !strings.Contains(err.Error(), "already registered") {
		t.Fatalf("duplicate: %v", err)
	}
	if err := reg.RegisterWorkflow(func(Context) error { return nil }); err == nil || !strings.Contains(err.Error(), "anonymous") {
		t.Fatalf("anonymous without a name: %v", err)
	}
	for _, fn := range []any{Greet, NoInput, Stamped, payClient{}.Send} {
		if err := reg.RegisterActivity(fn); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.RegisterActivity(SendPayment, RegisterActivityOptions{Name: "Pay", Effect: history.SideEffect}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(reg.ActivityTypes(), ","); got != "Greet,NoInput,Pay,Send,Stamped" {
		t.Fatalf("activities %s", got)
	}
	if d, ok := reg.Activity("Pay"); !ok || d.Effect() != history.SideEffect || d.InputType().Name() != "Payment" || d.ResultType().Name() != "Receipt" {
		t.Fatalf("Pay = %+v", d)
	}
	if d, _ := reg.Activity("NoInput"); d.InputType() != nil || d.ResultType() != nil {
		t.Fatal("NoInput has types")
	}
	if !strings.Contains(strings.Join(reg.WorkflowTypes(), ","), "Hello") {
		t.Fatal(reg.WorkflowTypes())
	}
	if reg.nameOf(SendPayment) != "Pay" || reg.nameOf(Fetch) != "Fetch" || reg.nameOf("X") != "X" {
		t.Fatal("nameOf")
	}
}

func TestActivityInvoke(t *testing.T) {
	reg := NewRegistry()
	boom := func(_ context.Context, n int) (int, error) {
		if n < 0 {
			panic("negative")
		}
		if n == 0 {
			return 0, NewNonRetryableError("zero", "Zero")
		}
		return n * 2, nil
	}
	if err := reg.RegisterActivity(boom, RegisterActivityOptions{Name: "Double"}); err != nil {
		t.Fatal(err)
	}
	d, _ := reg.Activity("Double")
	in, _ := DefaultConverter().ToPayload(21)
	out, err := d.Invoke(context.Background(), nil, in)
	var n int
	if err != nil || DefaultConverter().FromPayload(out, &n) != nil || n != 42 {
		t.Fatalf("invoke: %d %v", n, err)
	}
	zero, _ := DefaultConverter().ToPayload(0)
	var app *ApplicationError
	if _, err := d.Invoke(context.Background(), nil, zero); !errors.As(err, &app) || !app.NonRetryable {
		t.Fatalf("error: %v", err)
	}
	neg, _ := DefaultConverter().ToPayload(-1)
	var pe *PanicError
	if _, err := d.Invoke(context.Background(), nil, neg); !errors.As(err, &pe) || !strings.Contains(pe.Stack, "TestActivityInvoke") {
		t.Fatalf("panic: %v", err)
	}
	bad, _ := DefaultConverter().ToPayload("not a number")
	if _, err := d.Invoke(context.Background(), nil, bad); !errors.As(err, &app) || app.Type != "InvalidInput" {
		t.Fatalf("bad input: %v", err)
	}
}

func TestBusinessKey(t *testing.T) {
	for _, c := range []struct {
		fn   any
		key  any
		want string
	}{
		{SendPayment, 42, "BusinessKey has type int"},
		{SendPayment, func(p Payment) int { return 0 }, "BusinessKey has type"},
		{SendPayment, func(s string) string { return s }, "takes string but the activity's input is sdk.Payment"},
		{NoInput, func(any) (string, error) { return "", nil }, "needs an activity that takes an input"},
	} {
		err := NewRegistry().RegisterActivity(c.fn, RegisterActivityOptions{BusinessKey: c.key})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: %v, want %q", c.key, err, c.want)
		}
	}
	reg := NewRegistry()
	if err := reg.RegisterActivity(SendPayment, RegisterActivityOptions{Effect: history.SideEffect,
		BusinessKey: func(p Payment) string { return p.Invoice }}); err != nil {
		t.Fatal(err)
	}
	d, _ := reg.Activity("SendPayment")
	if k, ok, err := d.BusinessKey(Payment{Invoice: "INV-9"}); k != "INV-9" || !ok || err != nil {
		t.Fatalf("key %q %v %v", k, ok, err)
	}
	// A map from ExecuteActivityByName converts through the converter.
	if k, _, err := d.BusinessKey(map[string]any{"Invoice": "INV-7"}); k != "INV-7" || err != nil {
		t.Fatalf("converted key %q %v", k, err)
	}
	if _, _, err := d.BusinessKey(Payment{}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("empty key: %v", err)
	}
}

// Payments pays the same invoice twice on purpose and once more by name.
func Payments(ctx Context, _ string) (string, error) {
	p := Payment{Invoice: "INV-9", Amount: 4200}
	f1 := ExecuteActivity(ctx, SendPayment, p)
	f2 := ExecuteActivity(ctx, PaymentByKey, p)
	f3 := ExecuteActivity(ctx, Fetch, "read")
	f4 := ExecuteActivityByName[Receipt](ctx, "SendPayment", Payment{})
	_, err := f4.Get(ctx)
	for _, f := range []Future[Receipt]{f1, f2} {
		_, _ = f.Get(ctx)
	}
	_, _ = f3.Get(ctx)
	return err.Error(), nil
}

func TestKeyMaterial(t *testing.T) {
	for _, conv := range []Converter{NewMsgpackConverter(), NewJSONConverter()} {
		reg := NewRegistry()
		mustRegister(t, reg, []any{Payments}, Fetch)
		if err := reg.RegisterActivity(SendPayment, RegisterActivityOptions{Effect: history.SideEffect, HasReconcile: true,
			BusinessKey: func(p Payment) (string, error) { return p.Invoice, nil }}); err != nil {
			t.Fatal(err)
		}
		if err := reg.RegisterActivity(PaymentByKey, RegisterActivityOptions{Effect: history.Idempotent}); err != nil {
			t.Fatal(err)
		}
		f := newFake(t, reg, Payments, "")
		f.opts.Converter = conv
		cmds := f.task()
		wantTypes(t, cmds, api.CommandScheduleActivity, api.CommandScheduleActivity, api.CommandScheduleActivity)
		byKey, canonical, read := cmds[0].ScheduleActivity, cmds[1].ScheduleActivity, cmds[2].ScheduleActivity
		if string(byKey.KeyMaterial) != "INV-9" || byKey.Effect != history.SideEffect || !byKey.HasReconcile {
			t.Fatalf("business key: %+v", byKey)
		}
		want, _ := CanonicalEncoding(Payment{Invoice: "INV-9", Amount: 4200})
		switch {
		case converter.IsCanonical(conv): // the input payload is the canonical encoding: the engine uses it
			if canonical.KeyMaterial != nil || !bytes.Equal(canonical.Input.Data, want) {
				t.Fatalf("msgpack key material %x, input %x", canonical.KeyMaterial, canonical.Input.Data)
			}
		default:
			if !bytes.Equal(canonical.KeyMaterial, want) || canonical.Input.Encoding != EncodingJSON {
				t.Fatalf("json key material %x, want %x", canonical.KeyMaterial, want)
			}
		}
		if canonical.Effect != history.Idempotent || read.Effect != history.Read || read.KeyMaterial != nil {
			t.Fatalf("effects %v %v", canonical.Effect, read.Effect)
		}
		// An empty business key fails that activity's future, deterministically.
		f.completeActivity("1", Receipt{})
		f.completeActivity("2", Receipt{})
		f.completeActivity("3", "x")
		wantTypes(t, f.task(), api.CommandCompleteWorkflow)
		var got string
		f.result(&got)
		if !strings.Contains(got, "business key of SendPayment is empty") {
			t.Fatalf("got %q", got)
		}
		f.checkReplay()
	}
}
