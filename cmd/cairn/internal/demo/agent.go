// Package demo is the accounts-payable agent of `cairn demo`: it pays an
// invoice through a fake payment provider whose ledger is a file shared by
// every worker process, so that a double payment is visible.
package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/internal/filelock"
	"github.com/cairnflow/cairn/sdk"
)

// Invoice is what the agent is asked to pay.
type Invoice struct {
	ID     string
	Vendor string
	Amount int // dollars
}

// Payment is one payment instruction to the provider.
type Payment struct {
	Invoice string
	Vendor  string
	Amount  int
}

// Receipt is the provider's answer.
type Receipt struct {
	PaymentID      string
	Invoice        string
	Vendor         string
	Amount         int
	IdempotencyKey string `json:",omitempty"`
}

// String renders a receipt the way the demo prints it.
func (r Receipt) String() string {
	return fmt.Sprintf("paid $%s to %s for %s (%s)", dollars(r.Amount), r.Vendor, r.Invoice, r.PaymentID)
}

func dollars(n int) string {
	s := fmt.Sprint(n)
	if len(s) > 3 {
		s = s[:len(s)-3] + "," + s[len(s)-3:]
	}
	return s
}

// TaskQueue is the demo's task queue.
const TaskQueue = "accounts-payable"

// Agent holds the activities. Its fields set how a worker process behaves
// in the demo's scenarios.
type Agent struct {
	// Ledger is the provider's ledger file.
	Ledger string
	// StallNotify makes NotifyVendor hang, so the process can be killed
	// right after the payment was recorded.
	StallNotify bool
	// HangAfterPay makes SendPayment hang after paying, before it returns:
	// the process dies with the payment made and no completion recorded.
	HangAfterPay bool
	// OnPaid is called after the provider took a payment.
	OnPaid func(Receipt)
	// TimesOut, when it holds for a payment, makes the provider take the
	// payment and then time out: SendPayment cannot tell whether it went
	// through (its outcome is unknown), as `cairn dev --demo` shows.
	TimesOut func(Payment) bool
}

// PayInvoice is the agent: check the budget, pay, tell the vendor.
func PayInvoice(ctx sdk.Context, inv Invoice) (Receipt, error) {
	var a *Agent // method values name the activities; they run on the worker's Agent
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{
		StartToCloseTimeout: 2 * time.Second,
		RetryPolicy:         &sdk.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 5},
	})
	ok, err := sdk.ExecuteActivity(ctx, a.CheckBudget, inv).Get(ctx)
	if err != nil {
		return Receipt{}, err
	}
	if !ok {
		return Receipt{}, sdk.NewNonRetryableError("over budget", "OverBudget")
	}
	receipt, err := sdk.ExecuteActivity(ctx, a.SendPayment, Payment{Invoice: inv.ID, Vendor: inv.Vendor, Amount: inv.Amount}).Get(ctx)
	if err != nil {
		return Receipt{}, err
	}
	if _, err := sdk.ExecuteActivity(ctx, a.NotifyVendor, receipt).Get(ctx); err != nil {
		return Receipt{}, err
	}
	return receipt, nil
}

// ProviderTimeout is the provider's answer when it took too long: nobody
// can tell whether the payment went through (it is an
// activities.ErrOutcomeUnknown).
type ProviderTimeout struct{ After time.Duration }

// Error says so.
func (e ProviderTimeout) Error() string {
	return fmt.Sprintf("the payment provider did not answer within %s", e.After)
}

// Unwrap makes it an unknown outcome.
func (e ProviderTimeout) Unwrap() error { return activities.ErrOutcomeUnknown }

// CheckBudget approves invoices up to $10,000.
func (a *Agent) CheckBudget(_ context.Context, inv Invoice) (bool, error) {
	return inv.Amount <= 10000, nil
}

// SendPayment pays through the provider, sending the idempotency key the
// engine derived (empty when the activity is registered as Read).
func (a *Agent) SendPayment(ctx context.Context, p Payment) (Receipt, error) {
	key := ""
	if info := activities.GetInfo(ctx); info != nil {
		key = info.IdempotencyKey
	}
	r, err := appendPayment(a.Ledger, p, key)
	if err != nil {
		return Receipt{}, err
	}
	if a.OnPaid != nil {
		a.OnPaid(r)
	}
	if a.TimesOut != nil && a.TimesOut(p) {
		return Receipt{}, ProviderTimeout{After: 30 * time.Second}
	}
	if a.HangAfterPay {
		<-ctx.Done() // the process is killed here: paid, but nobody recorded it
		return Receipt{}, ctx.Err()
	}
	return r, nil
}

// LookupPayment is SendPayment's Reconcile lookup: did a payment with this
// idempotency key reach the provider?
func (a *Agent) LookupPayment(ctx context.Context, p Payment) (Receipt, error) {
	info := activities.GetInfo(ctx)
	if info == nil || info.IdempotencyKey == "" {
		return Receipt{}, activities.ErrOutcomeUnknown
	}
	r, found, err := FindPayment(a.Ledger, info.IdempotencyKey)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %v", activities.ErrOutcomeUnknown, err)
	}
	if !found {
		return Receipt{}, activities.ErrNotHappened
	}
	return r, nil
}

// NotifyVendor e-mails the vendor (here: does nothing).
func (a *Agent) NotifyVendor(ctx context.Context, r Receipt) (bool, error) {
	if a.StallNotify {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return true, nil
}

// Register registers the agent on a worker. guard declares SendPayment as
// SideEffect (with LookupPayment as its Reconcile when reconcile is set);
// without it, SendPayment is a plain Read, as most agent frameworks treat
// tools.
func Register(r interface {
	RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error
	RegisterActivity(fn any, opts ...activities.Options) error
}, a *Agent, guard, reconcile bool) error {
	pay := activities.Options{Effect: activities.Read}
	if guard {
		pay = activities.Options{Effect: activities.SideEffect,
			BusinessKey: func(p Payment) string { return p.Invoice + "/" + p.Vendor }}
		if reconcile {
			pay.Reconcile = a.LookupPayment
		}
	}
	return errors.Join(
		r.RegisterWorkflow(PayInvoice),
		r.RegisterActivity(a.CheckBudget),
		r.RegisterActivity(a.SendPayment, pay),
		r.RegisterActivity(a.NotifyVendor),
	)
}

// appendPayment records a payment in the provider's ledger, durably. The
// payment's id numbers it after those in the ledger: counting and
// appending hold the ledger's lock, so that payments made at once — by
// goroutines or by worker processes — never share an id.
func appendPayment(path string, p Payment, key string) (Receipt, error) {
	var r Receipt
	err := filelock.With(path, func() error {
		n, err := countPayments(path)
		if err != nil {
			return err
		}
		r = Receipt{PaymentID: fmt.Sprintf("pay_%03d", n+1), Invoice: p.Invoice, Vendor: p.Vendor, Amount: p.Amount, IdempotencyKey: key}
		return appendLine(path, r)
	})
	if err != nil {
		return Receipt{}, fmt.Errorf("provider: %w", err)
	}
	return r, nil
}

// appendLine appends v's JSON to the file as a line, durably.
func appendLine(path string, v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return err
	}
	return f.Sync()
}

// Payments returns every payment in the provider's ledger.
func Payments(path string) ([]Receipt, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Receipt
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var r Receipt
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("provider ledger %s: %w", path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

func countPayments(path string) (int, error) {
	ps, err := Payments(path)
	return len(ps), err
}

// FindPayment looks a payment up by idempotency key (holding the
// ledger's lock: a payment being appended is seen whole or not at all).
func FindPayment(path, key string) (Receipt, bool, error) {
	var ps []Receipt
	err := filelock.With(path, func() error {
		var err error
		ps, err = Payments(path)
		return err
	})
	if err != nil {
		return Receipt{}, false, err
	}
	for _, r := range ps {
		if r.IdempotencyKey == key {
			return r, true, nil
		}
	}
	return Receipt{}, false, nil
}
