//go:build linux

package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// Effects after a recovery of the store (docs/reliability.md, "Effects
// after a restore or an accepted loss"): a real `cairn server` pays two
// invoices — A is paid, B's payment is in flight (its worker holds it and
// never reaches the provider) — and the store then loses both payments'
// intents (a flipped bit in the WAL and --accept-data-loss, a restore of
// a backup taken before them, a copy taken before them and marked with
// `cairn effects doubt`). Neither payment may be dispatched again as if
// nothing had happened: without a Reconcile lookup both runs pause, and
// a person's answers ("happened" for A, "did not happen" for B) end with
// exactly one payment each; with a lookup, the lookup decides the same.

const (
	doubtQueue  = "settle"
	chargeQueue = "charges"
	// doubtSTC bounds how long an attempt lost in the recovery may act:
	// the lookup (or the retry after "did not happen") waits for it.
	doubtSTC = 2 * time.Second
)

// Bill is what Settle pays. Hold: the payment never reaches the provider
// (its worker holds it until it stops).
type Bill struct {
	ID   string
	Hold bool
}

// Settle pays a bill on the charges queue and returns the payment id.
func Settle(ctx sdk.Context, b Bill) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{TaskQueue: chargeQueue, StartToCloseTimeout: doubtSTC,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: 50 * time.Millisecond}})
	return sdk.ExecuteActivityByName[string](ctx, "Pay", b).Get(ctx)
}

// provider is the outside world: it pays under an idempotency key and
// does not deduplicate; it outlives every server.
type provider struct {
	mu    sync.Mutex
	paid  map[string]int    // key → payments
	first map[string]string // key → first payment id
	keys  map[string]string // bill → key it was asked to pay under
	held  chan string       // bills held
	hold  bool              // hold the bills that ask for it (life 1 only)
}

func newProvider() *provider {
	return &provider{paid: map[string]int{}, first: map[string]string{}, keys: map[string]string{}, held: make(chan string, 4), hold: true}
}

func (p *provider) Pay(ctx context.Context, b Bill) (string, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	p.mu.Lock()
	p.keys[b.ID] = key
	hold := b.Hold && p.hold
	p.mu.Unlock()
	if hold {
		p.held <- b.ID
		<-ctx.Done()
		return "", fmt.Errorf("not sent: %w", ctx.Err())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paid[key]++
	id := fmt.Sprintf("pay-%s-%d", b.ID, p.paid[key])
	if p.paid[key] == 1 {
		p.first[key] = id
	}
	return id, nil
}

func (p *provider) Lookup(ctx context.Context, _ Bill) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if id, ok := p.first[activities.GetInfo(ctx).IdempotencyKey]; ok {
		return id, nil
	}
	return "", activities.ErrNotHappened
}

// release stops holding payments: the provider answers from now on.
func (p *provider) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = false
}

// payments returns the payments made for bill.
func (p *provider) payments(bill string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paid[p.keys[bill]]
}

// payLife is a server with its workers: the workflow worker, and (once
// started) the payment worker.
type payLife struct {
	t     *testing.T
	srv   *testkit.Server
	c     client.Client
	p     *provider
	recon bool
	stops []func()
}

func startPayLife(t *testing.T, dir string, p *provider, recon bool, args ...string) *payLife {
	t.Helper()
	srv := testkit.StartServer(t.Context(), t, testkit.ServerOptions{Data: dir,
		Args: append([]string{"--log-level", "info", "--lease-drift-margin", "200ms"}, args...)})
	l := &payLife{t: t, srv: srv, p: p, recon: recon, c: testkit.Dial(t, srv.Addr, "doubt-test")}
	l.worker(doubtQueue, true)
	return l
}

// worker starts a worker on queue: the workflow worker registers Settle
// (and declares Pay, so its schedules carry the class); the payment
// worker runs Pay.
func (l *payLife) worker(queue string, workflows bool) {
	l.t.Helper()
	w, err := worker.New(l.c, worker.Options{TaskQueue: queue, GracefulStop: 100 * time.Millisecond, Logger: nopLogger()})
	if err != nil {
		l.t.Fatal(err)
	}
	opts := activities.Options{Name: "Pay", Effect: activities.SideEffect}
	if l.recon {
		opts.Reconcile = l.p.Lookup
	}
	err = w.RegisterActivity(l.p.Pay, opts)
	if workflows {
		err = errors.Join(err, w.RegisterWorkflow(Settle))
	}
	if err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	l.stops = append(l.stops, func() { cancel(); <-done })
}

// kill SIGKILLs the server, then stops the workers (a held payment ends
// without reaching the provider).
func (l *payLife) kill() {
	l.srv.Kill()
	for _, stop := range l.stops {
		stop()
	}
}

// start starts Settle for bill and waits until its payment is scheduled.
func (l *payLife) start(b Bill) {
	l.t.Helper()
	in, _ := sdk.DefaultConverter().ToPayload(b)
	if _, err := l.c.Service().StartWorkflow(l.t.Context(), &api.StartWorkflowRequest{WorkflowID: b.ID, WorkflowType: "Settle",
		TaskQueue: doubtQueue, Input: in}); err != nil {
		l.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(l.t.Context(), time.Minute)
	defer cancel()
	testkit.WaitEvent(ctx, l.t, l.c.Service(), b.ID, "", "the payment scheduled", testkit.EventOfType(history.TypeActivityScheduled))
}

// result waits for bill's run to complete and returns its result.
func (l *payLife) result(bill string) string {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(l.t.Context(), time.Minute)
	defer cancel()
	var res string
	if err := l.c.GetWorkflow(ctx, bill, "").Get(ctx, &res); err != nil {
		l.t.Fatalf("result of %s: %v", bill, err)
	}
	return res
}

// payOneHoldOne pays A and holds B: it starts both, then the payment
// worker, and waits until A completed and B's payment is held.
func (l *payLife) payOneHoldOne() {
	l.t.Helper()
	l.worker(chargeQueue, false)
	if res := l.result("A"); res != "pay-A-1" {
		l.t.Fatalf("A: %q", res)
	}
	select {
	case <-l.p.held:
	case <-time.After(time.Minute):
		l.t.Fatal("B's payment was never dispatched")
	}
}

// wantInDoubt checks, right after the recovered server is ready, that
// no payment was made again, and (without a lookup) that both runs are
// paused on their payment saying why, and listed in doubt.
func (l *payLife) wantInDoubt(why string) {
	l.t.Helper()
	if a, b := l.p.payments("A"), l.p.payments("B"); a != 1 || b != 0 {
		l.t.Fatalf("after the recovery: A paid %d times, B %d (want 1, 0)", a, b)
	}
	if l.recon {
		return
	}
	for _, bill := range []string{"A", "B"} {
		d, err := l.c.DescribeWorkflow(l.t.Context(), bill, "")
		if err != nil {
			l.t.Fatal(err)
		}
		if p := d.Info.Pause; d.Info.Status != api.StatusPaused || p == nil || !strings.Contains(p.Reason, "recovery of the store") ||
			!strings.Contains(p.Reason, why) {
			l.t.Fatalf("%s after the recovery: %s, pause %+v", bill, d.Info.Status, p)
		}
	}
	out, err := testkit.CLI(l.t.Context(), l.t, l.srv.Addr, "effects", "list", "--in-doubt")
	if err != nil || strings.Count(out.Stdout, "IN DOUBT") != 2 || !strings.Contains(out.Stdout, why) {
		l.t.Fatalf("effects list --in-doubt: %v\n%s", err, out.Stdout)
	}
	out, err = testkit.CLI(l.t.Context(), l.t, l.srv.Addr, "workflow", "describe", "B")
	if err != nil || !strings.Contains(out.Stdout, "IN DOUBT") {
		l.t.Fatalf("describe B: %v\n%s", err, out.Stdout)
	}
}

// settle ends both runs after the recovery: without a lookup, a person
// resolves A as happened (the provider has it) and B as not happened;
// with one, the lookups decide. Each bill is then paid exactly once.
func (l *payLife) settle() {
	l.t.Helper()
	l.worker(chargeQueue, false)
	if !l.recon {
		l.p.mu.Lock()
		receipt := l.p.first[l.p.keys["A"]]
		l.p.mu.Unlock()
		for _, r := range []struct {
			bill string
			args []string
		}{{"A", []string{"--happened", "--result", fmt.Sprintf("%q", receipt), "--reason", "found at the provider"}},
			{"B", []string{"--not-happened", "--reason", "not at the provider"}}} {
			if out, err := testkit.CLI(l.t.Context(), l.t, l.srv.Addr, append([]string{"workflow", "resolve", r.bill}, r.args...)...); err != nil {
				l.t.Fatalf("resolve %s: %v\n%s", r.bill, err, out.Combined)
			}
		}
	}
	if a, b := l.result("A"), l.result("B"); a != "pay-A-1" || b != "pay-B-1" {
		l.t.Fatalf("results: A %q, B %q", a, b)
	}
	if a, b := l.p.payments("A"), l.p.payments("B"); a != 1 || b != 1 {
		l.t.Fatalf("A paid %d times, B %d (want once each)", a, b)
	}
}

// firstIntent finds the first WAL record that writes the ledger entry of
// a payment (its intent, in flight) and returns the file and offset of a
// byte inside its key.
func firstIntent(t *testing.T, dir string, p *provider) (string, int64) {
	t.Helper()
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	sort.Strings(mems)
	for _, mem := range mems {
		data, err := os.ReadFile(mem)
		if err != nil {
			t.Fatal(err)
		}
		best := -1
		for _, bill := range []string{"A", "B"} {
			p.mu.Lock()
			key := append([]byte{'e'}, history.Key().Str(bill).Str(p.keys[bill]).Bytes()...)
			p.mu.Unlock()
			if i := bytes.Index(data, key); i >= 0 && (best < 0 || i < best) {
				best = i + len(key)/2
			}
		}
		if best >= 0 {
			return mem, int64(best)
		}
	}
	t.Fatal("no payment intent found in the WAL")
	return "", 0
}

func flipBit(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

// TestAcceptedLossPutsPaymentsInDoubt: the reproduction of issue 17 §4 —
// pay, SIGKILL the server, flip one bit in the WAL record of the
// payment's intent, start with --accept-data-loss. Before the fix A was
// paid a second time (dispatched again as attempt 1) and B dispatched
// with no pause.
func TestAcceptedLossPutsPaymentsInDoubt(t *testing.T) {
	for _, recon := range []bool{false, true} {
		t.Run(map[bool]string{false: "no lookup", true: "lookup"}[recon], func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			p := newProvider()
			l := startPayLife(t, dir, p, recon)
			l.start(Bill{ID: "A"})
			l.start(Bill{ID: "B", Hold: true})
			l.payOneHoldOne()
			l.kill()
			file, off := firstIntent(t, dir, p)
			flipBit(t, file, off)
			p.release()
			l = startPayLife(t, dir, p, recon, "--accept-data-loss")
			l.wantInDoubt("accepted-data-loss")
			l.settle()
			l.kill()
		})
	}
}

// TestRestoreOfAnOlderBackupPutsPaymentsInDoubt: a backup taken while both
// payments were scheduled, restored after A was paid and B's payment was
// in flight: the restored server pauses both (cairn restore left the
// mark). Before the fix A was paid again.
func TestRestoreOfAnOlderBackupPutsPaymentsInDoubt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := newProvider()
	l := startPayLife(t, dir, p, false)
	l.start(Bill{ID: "A"})
	l.start(Bill{ID: "B", Hold: true})
	backup := filepath.Join(t.TempDir(), "backup.cairn")
	if out, err := testkit.CLI(t.Context(), t, l.srv.Addr, "backup", "--out", backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out.Combined)
	}
	l.payOneHoldOne()
	l.kill()
	restored := filepath.Join(t.TempDir(), "restored")
	if out, err := testkit.CLI(t.Context(), t, "", "restore", "--from", backup, "--data", restored); err != nil {
		t.Fatalf("restore: %v\n%s", err, out.Combined)
	}
	p.release()
	l = startPayLife(t, restored, p, false)
	l.wantInDoubt("restored from the backup")
	l.settle()
	l.kill()
}

// TestOperatorMarksARestoreInDoubt: a copy of the data directory taken
// while both payments were scheduled (as a filesystem snapshot or a
// database's point-in-time recovery would give back) is served again
// after A was paid and B's payment was in flight. The store cannot know;
// `cairn effects doubt` says so, and both runs pause with its reason.
func TestOperatorMarksARestoreInDoubt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	p := newProvider()
	l := startPayLife(t, dir, p, false)
	l.start(Bill{ID: "A"})
	l.start(Bill{ID: "B", Hold: true})
	l.kill()
	snapshot := filepath.Join(t.TempDir(), "snapshot")
	if err := copyDir(dir, snapshot); err != nil {
		t.Fatal(err)
	}
	l = startPayLife(t, dir, p, false)
	l.payOneHoldOne()
	l.kill()
	out, err := testkit.CLI(t.Context(), t, "", "effects", "doubt", "--data", snapshot, "--reason", "restored from PITR at 10:42")
	if err != nil || !strings.Contains(out.Stdout, "marked") {
		t.Fatalf("effects doubt: %v\n%s", err, out.Combined)
	}
	p.release()
	l = startPayLife(t, snapshot, p, false)
	l.wantInDoubt("restored from PITR at 10:42")
	l.settle()
	l.kill()
}
