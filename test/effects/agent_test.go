//go:build unix

package effects_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/sdk"
)

// This file is the agent under test and the payment provider it pays
// through. Both the test process and the worker processes it starts (the
// same binary, re-executed) use it.

// Payment is one payment instruction.
type Payment struct {
	Invoice string
	Amount  int
	// RequestedAt is set when the agent stamps its requests (Order.Stamp):
	// an argument that changes on every run.
	RequestedAt time.Time
}

// Receipt is the provider's answer.
type Receipt struct {
	PaymentID string
	Invoice   string
	Amount    int
	Key       string // the Idempotency-Key the request carried
}

// Order is what the agent is asked to do.
type Order struct {
	Invoice string
	Amount  int
	// Times pays the same invoice this many times in the run (default 1):
	// the same payment made twice on purpose.
	Times int
	// ExtraStep takes one more step (a Read activity) before paying, as a
	// re-run agent whose model decided a little differently would.
	ExtraStep bool
	// Stamp puts sdk.Now into the payment's arguments.
	Stamp bool
	// PayQueue is the task queue SendPayment runs on (default: the
	// workflow's).
	PayQueue string
	// WaitSignal waits for the "ship" signal after paying.
	WaitSignal bool
}

// Outcome is the agent's result.
type Outcome struct {
	Receipts []Receipt
	// When a payment failed: what the workflow code saw.
	ActivityError  bool   // errors.As(err, **sdk.ActivityError)
	FailureType    string // errors.As(err, **sdk.ApplicationError): its Type
	FailureMessage string
}

// leaseTimeout is the heartbeat timeout of every activity: a worker that
// stops heartbeating (killed, stopped) loses its lease this long after its
// last heartbeat, while a live worker renews it every third of it. The
// start-to-close timeout is long, so a slow but live worker never loses it.
const leaseTimeout = 2 * time.Second

// PayInvoice is the agent.
func PayInvoice(ctx sdk.Context, o Order) (Outcome, error) {
	var a *agent // method values name the activities; they run on the worker's agent
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{
		TaskQueue:           o.PayQueue,
		StartToCloseTimeout: time.Minute,
		HeartbeatTimeout:    leaseTimeout,
		RetryPolicy:         &sdk.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumInterval: time.Second, MaximumAttempts: 5},
	})
	if o.ExtraStep {
		if _, err := sdk.ExecuteActivity(ctx, a.CheckBudget, Payment{Invoice: o.Invoice, Amount: o.Amount}).Get(ctx); err != nil {
			return Outcome{}, err
		}
	}
	var out Outcome
	for range max(o.Times, 1) {
		p := Payment{Invoice: o.Invoice, Amount: o.Amount}
		if o.Stamp {
			p.RequestedAt = sdk.Now(ctx)
		}
		r, err := sdk.ExecuteActivity(ctx, a.SendPayment, p).Get(ctx)
		if err != nil {
			var actErr *sdk.ActivityError
			var appErr *sdk.ApplicationError
			out.ActivityError = errors.As(err, &actErr)
			if errors.As(err, &appErr) {
				out.FailureType, out.FailureMessage = appErr.Type, appErr.Message
			}
			return out, nil
		}
		out.Receipts = append(out.Receipts, r)
	}
	if o.WaitSignal {
		sdk.GetSignalChannel[string](ctx, "ship").Receive(ctx)
	}
	return out, nil
}

// agent holds the activities of a worker process.
type agent struct {
	prov provider
	// dedupe: the provider honours the Idempotency-Key (Idempotent class).
	dedupe bool
	// lookupDown: LookupPayment cannot reach the provider.
	lookupDown bool
	// gateBefore / gateAfter: the n-th SendPayment call of this process
	// waits for a "go" line on stdin before paying / before returning
	// (0: never).
	gateBefore, gateAfter int
	gate                  <-chan struct{}
	calls                 atomic.Int32
	say                   func(format string, args ...any)
	// pending: after paying, SendPayment prints "pending KEY TOKEN RECEIPT"
	// and returns ErrResultPending (the test completes it).
	pending bool
}

// SendPayment pays through the provider, sending the idempotency key.
func (a *agent) SendPayment(ctx context.Context, p Payment) (Receipt, error) {
	info := activities.GetInfo(ctx)
	key := orDash(info.IdempotencyKey)
	n := int(a.calls.Add(1))
	a.say("started %s %d", key, info.Attempt)
	if n == a.gateBefore {
		<-a.gate // not ctx: a frozen process that wakes up carries on
	}
	r, fresh, err := a.prov.pay(p, info.IdempotencyKey, a.dedupe)
	if err != nil {
		return Receipt{}, err
	}
	state := "new"
	if !fresh {
		state = "deduped"
	}
	a.say("paid %s %d %s %s", key, info.Attempt, r.PaymentID, state)
	if a.pending {
		a.say("pending %s %s %s", key, info.TaskTokenString(), r.PaymentID)
		return Receipt{}, activities.ErrResultPending
	}
	if n == a.gateAfter {
		<-a.gate // killed here: paid, and nobody recorded it
	}
	return r, nil
}

// LookupPayment is SendPayment's Reconcile lookup: did a payment with this
// idempotency key reach the provider?
func (a *agent) LookupPayment(ctx context.Context, p Payment) (Receipt, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	if a.lookupDown {
		a.say("lookup %s unknown", key)
		return Receipt{}, fmt.Errorf("%w: the provider's lookup API is down", activities.ErrOutcomeUnknown)
	}
	r, found, err := a.prov.find(key)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %v", activities.ErrOutcomeUnknown, err)
	}
	if !found {
		a.say("lookup %s not-found", key)
		return Receipt{}, activities.ErrNotHappened
	}
	a.say("lookup %s found %s", key, r.PaymentID)
	return r, nil
}

// CheckBudget is a read-only step.
func (a *agent) CheckBudget(_ context.Context, p Payment) (bool, error) {
	return p.Amount <= 10000, nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// provider is a fake payment provider whose ledger is a file shared by
// every process: one JSON line per payment, appended and fsynced under an
// exclusive lock.
type provider struct{ path string }

// pay records a payment. With dedupe, a request whose key was seen before
// returns the earlier receipt instead (fresh false), as a provider that
// honours Idempotency-Key headers does.
func (p provider) pay(pm Payment, key string, dedupe bool) (r Receipt, fresh bool, err error) {
	unlock, err := p.lock()
	if err != nil {
		return Receipt{}, false, err
	}
	defer unlock()
	all, err := p.payments()
	if err != nil {
		return Receipt{}, false, err
	}
	if dedupe && key != "" {
		for _, r := range all {
			if r.Key == key {
				return r, false, nil
			}
		}
	}
	r = Receipt{PaymentID: fmt.Sprintf("pay_%03d", len(all)+1), Invoice: pm.Invoice, Amount: pm.Amount, Key: key}
	line, err := json.Marshal(r)
	if err != nil {
		return Receipt{}, false, err
	}
	f, err := os.OpenFile(p.path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return Receipt{}, false, err
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		return Receipt{}, false, err
	}
	return r, true, f.Sync()
}

func (p provider) lock() (func(), error) {
	f, err := os.OpenFile(p.path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// payments returns the ledger.
func (p provider) payments() ([]Receipt, error) {
	f, err := os.Open(p.path)
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
			return nil, fmt.Errorf("provider ledger %s: %w", p.path, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// find looks a payment up by idempotency key.
func (p provider) find(key string) (Receipt, bool, error) {
	all, err := p.payments()
	if err != nil {
		return Receipt{}, false, err
	}
	for _, r := range all {
		if key != "" && r.Key == key {
			return r, true, nil
		}
	}
	return Receipt{}, false, nil
}
