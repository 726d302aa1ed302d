// Package crash_test crashes the engine at every named crash point of its
// commits (internal/crashpoint: just before a commit, just after it) while
// payment workflows run, restarts it, and checks what must hold after any
// crash: every payment made at most once per idempotency key, nothing
// acknowledged lost, no run stuck.
//
// Two ways to die: in process (the store dies at the point — every later
// call fails — then the engine is closed and reopened over the directory),
// and for real (a `cairn server` process armed with CAIRN_CRASH_AT kills
// itself with SIGKILL at the point). CI runs every point in process and
// every point for real too, each at its second passage; the long campaign
// (CAIRN_CRASH_HITS=1,2,3,5,8,13) crashes at each listed passage of every
// point.
package crash_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

const (
	queue = "pay"
	runs  = 6
	// waitFor bounds every wait for the system to get somewhere (generous:
	// -race on a loaded two-core machine).
	waitFor = 90 * time.Second
)

// Invoice is what PayInvoice pays.
type Invoice struct {
	ID     string
	Amount int
}

// Receipt is what the provider answers.
type Receipt struct {
	Key       string
	PaymentID string
}

// PayInvoice waits for its approval (a signal), checks the budget (a
// read, which fails once and is retried), waits a moment (a durable
// timer), pays (a side effect, reconciled by a lookup when its outcome is
// unknown) and returns the receipt.
func PayInvoice(ctx sdk.Context, inv Invoice) (Receipt, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: 500 * time.Millisecond,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: 20 * time.Millisecond}})
	sdk.GetSignalChannel[string](ctx, "approve").Receive(ctx)
	if _, err := sdk.ExecuteActivityByName[bool](ctx, "CheckBudget", inv).Get(ctx); err != nil {
		return Receipt{}, err
	}
	if err := sdk.Sleep(ctx, 5*time.Millisecond); err != nil {
		return Receipt{}, err
	}
	return sdk.ExecuteActivityByName[Receipt](ctx, "SendPayment", inv).Get(ctx)
}

// provider is the payment provider: it records every payment by the
// idempotency key it was made under. It outlives every crash (it is the
// outside world).
type provider struct {
	mu      sync.Mutex
	paid    map[string]int    // key → payments made under it
	byKey   map[string]string // key → payment id
	checked map[string]bool   // invoices whose budget check failed once
}

func newProvider() *provider {
	return &provider{paid: map[string]int{}, byKey: map[string]string{}, checked: map[string]bool{}}
}

// CheckBudget reads and approves — after failing once per invoice.
func (p *provider) CheckBudget(_ context.Context, inv Invoice) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked[inv.ID] {
		p.checked[inv.ID] = true
		return false, errors.New("budget service busy")
	}
	return true, nil
}

// SendPayment pays, under the attempt's idempotency key (which it does not
// deduplicate: it counts).
func (p *provider) SendPayment(ctx context.Context, inv Invoice) (Receipt, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paid[key]++
	id := fmt.Sprintf("pay-%s-%d", inv.ID, p.paid[key])
	if p.paid[key] == 1 {
		p.byKey[key] = id
	}
	return Receipt{Key: key, PaymentID: id}, nil
}

// LookupPayment is SendPayment's Reconcile: did a payment under this key
// happen?
func (p *provider) LookupPayment(ctx context.Context, inv Invoice) (Receipt, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.byKey[key]; ok {
		return Receipt{Key: key, PaymentID: id}, nil
	}
	return Receipt{}, activities.ErrNotHappened
}

// runWorker runs a worker with the payment workflow on c until stop is
// called.
func runWorker(t *testing.T, c client.Client, p *provider) (stop func()) {
	t.Helper()
	w, err := worker.New(c, worker.Options{TaskQueue: queue, GracefulStop: 200 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	err = errors.Join(w.RegisterWorkflow(PayInvoice), w.RegisterActivity(p.CheckBudget, activities.Options{Name: "CheckBudget"}),
		w.RegisterActivity(p.SendPayment, activities.Options{Name: "SendPayment", Effect: activities.SideEffect, Reconcile: p.LookupPayment}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(ctx)
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
}

// acks records which starts the engine acknowledged.
type acks struct {
	mu  sync.Mutex
	ids map[string]string // workflow id → run id
}

// startAll starts the runs, each with its id as request id (a retried
// start finds the run an earlier, unanswered one made).
func startAll(c client.Client, a *acks) {
	var wg sync.WaitGroup
	for i := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("inv-%d", i)
			resp, err := c.Service().StartWorkflow(context.Background(), startRequest(id))
			if err == nil {
				a.mu.Lock()
				a.ids[id] = resp.RunID
				a.mu.Unlock()
				approve(context.Background(), c, id)
			}
		}()
	}
	wg.Wait()
}

// workload starts and approves the runs, then waits for them to finish;
// it closes done if they all do (the crash point was not reached often
// enough) and returns at once when the engine dies under it.
func workload(c client.Client, a *acks, done chan<- struct{}) {
	startAll(c, a)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	a.mu.Lock()
	ids := make(map[string]string, len(a.ids))
	for k, v := range a.ids {
		ids[k] = v
	}
	a.mu.Unlock()
	if len(ids) < runs {
		return
	}
	for id, run := range ids {
		if err := c.GetWorkflow(ctx, id, run).Get(ctx, nil); err != nil {
			return
		}
	}
	close(done)
}

// approve signals the run its approval (errors are the crash's).
func approve(ctx context.Context, c client.Client, id string) {
	in, _ := sdk.DefaultConverter().ToPayload("ops")
	_, _ = c.Service().SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: id, SignalName: "approve", Input: in})
}

func startRequest(id string) *api.StartWorkflowRequest {
	in, _ := sdk.DefaultConverter().ToPayload(Invoice{ID: id, Amount: 100})
	return &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "PayInvoice", TaskQueue: queue, Input: in, RequestID: id,
		TaskTimeout: time.Second, ConflictPolicy: api.ConflictUseExisting}
}

// finishAndCheck (after the restart) starts what was never started,
// waits for every run to complete and checks the invariants.
func finishAndCheck(t *testing.T, c client.Client, p *provider, a *acks) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	for i := range runs {
		id := fmt.Sprintf("inv-%d", i)
		a.mu.Lock()
		runID, acked := a.ids[id]
		a.mu.Unlock()
		d, err := c.DescribeWorkflow(ctx, id, "")
		switch {
		case acked && err != nil:
			t.Fatalf("%s: the start of run %s was acknowledged before the crash, and now: %v (acknowledged start lost)", id, runID, err)
		case acked && d.Info.RunID != runID:
			t.Fatalf("%s: the start of run %s was acknowledged before the crash; now its current run is %s", id, runID, d.Info.RunID)
		case err == nil:
			runID = d.Info.RunID // started, unanswered (or acknowledged)
		case errors.Is(err, api.ErrNotFound):
			resp, err := c.Service().StartWorkflow(ctx, startRequest(id))
			if err != nil {
				t.Fatalf("start %s after the restart: %v", id, err)
			}
			runID = resp.RunID
		default:
			t.Fatalf("describe %s: %v", id, err)
		}
		approve(ctx, c, id) // again: an approval the crash took is sent anew (a second one is ignored)
		var r Receipt
		if err := c.GetWorkflow(ctx, id, runID).Get(ctx, &r); err != nil {
			d, _ := c.DescribeWorkflow(context.Background(), id, runID)
			t.Fatalf("%s did not complete: %v (describe %+v)", id, err, d)
		}
		p.mu.Lock()
		n, first := p.paid[r.Key], p.byKey[r.Key]
		p.mu.Unlock()
		if n != 1 || r.PaymentID != first {
			t.Fatalf("%s: %d payments under key %s, receipt %s (provider's %s): at most one effect per key, and the one recorded", id, n, r.Key, r.PaymentID, first)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.paid) != runs {
		t.Fatalf("payments under %d keys for %d invoices: %v", len(p.paid), runs, p.paid)
	}
}

// crashHits are the passages of a point at which a trial dies: the second
// by default (the middle of the workload for most points), or the list in
// CAIRN_CRASH_HITS ("1,2,3,5,8": one trial each) for the long campaign.
func crashHits(t *testing.T) []int {
	v := os.Getenv("CAIRN_CRASH_HITS")
	if v == "" {
		return []int{2}
	}
	var hits []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			t.Fatalf("CAIRN_CRASH_HITS=%q: want positive integers separated by commas", v)
		}
		hits = append(hits, n)
	}
	return hits
}

// trials lists (point, passage) pairs; Open's points are reached once per
// life, at the first passage.
func trials(t *testing.T, points []string) []trial {
	var out []trial
	for _, p := range points {
		if strings.HasPrefix(p, "Open.") {
			out = append(out, trial{p, 1})
			continue
		}
		for _, n := range crashHits(t) {
			out = append(out, trial{p, n})
		}
	}
	return out
}

type trial struct {
	point string
	at    int
}

func (tr trial) String() string { return fmt.Sprintf("%s:%d", tr.point, tr.at) }

func sorted(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// quietLogger discards the workers' logs: a crash test makes them warn a
// lot, as it should.
func quietLogger() *zerolog.Logger {
	l := zerolog.Nop()
	return &l
}
