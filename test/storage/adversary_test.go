//go:build linux

package storage_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// The adversary's workload: orders paid through a real `cairn server`
// process by workers in this process, while the server is killed with
// SIGKILL at random moments and restarted on the same directory.

const orderQueue = "orders"

// padMax bounds an order's padding (CAIRN_ADVERSARY_PAD, bytes): larger
// orders fill the tables sooner (flushes, compactions).
var padMax = func() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("CAIRN_ADVERSARY_PAD"), &n); err == nil && n > 0 {
		return n
	}
	return 24 << 10
}()

// Order is what Fulfil pays. Pad makes its events large (the started
// event and the activity's input carry it); Big asks for a result large
// enough for the value log.
type Order struct {
	ID      string
	Pad     string
	Approve bool
	Big     bool
}

// Fulfil waits for an approval when asked, pays (a side effect, with a
// Reconcile lookup), waits a moment (a durable timer), fetches a note (a
// read whose result may be large) and returns the payment and the note's
// size.
func Fulfil(ctx sdk.Context, o Order) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: 5 * time.Second,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: 50 * time.Millisecond}})
	if o.Approve {
		sdk.GetSignalChannel[string](ctx, "approve").Receive(ctx)
	}
	paid, err := sdk.ExecuteActivityByName[string](ctx, "Charge", o).Get(ctx)
	if err != nil {
		return "", err
	}
	if err := sdk.Sleep(ctx, 20*time.Millisecond); err != nil {
		return "", err
	}
	note, err := sdk.ExecuteActivityByName[string](ctx, "Note", o).Get(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s/%d", paid, len(note)), nil
}

// shop is the outside world: the payment provider, which counts every
// payment by its idempotency key and outlives every crash of the server.
type shop struct {
	mu    sync.Mutex
	paid  map[string]int
	first map[string]string
}

func newShop() *shop { return &shop{paid: map[string]int{}, first: map[string]string{}} }

func (s *shop) Charge(ctx context.Context, o Order) (string, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paid[key]++
	id := fmt.Sprintf("pay-%s-%d", o.ID, s.paid[key])
	if s.paid[key] == 1 {
		s.first[key] = id
	}
	return id, nil
}

func (s *shop) Lookup(ctx context.Context, _ Order) (string, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	s.mu.Lock()
	defer s.mu.Unlock()
	if id, ok := s.first[key]; ok {
		return id, nil
	}
	return "", activities.ErrNotHappened
}

func (s *shop) Note(_ context.Context, o Order) (string, error) {
	if o.Big {
		return strings.Repeat("b", 1100<<10), nil
	}
	return o.Pad, nil
}

// ledger is what the server acknowledged: it must all be there after any
// crash.
type ledger struct {
	mu      sync.Mutex
	started map[string]string // workflow id → run id, start acknowledged
	signals map[string]int    // workflow id → approvals acknowledged
	results map[string]string // workflow id → result the server returned
	waiting []string          // acknowledged starts awaiting their approval
	tried   []string          // every workflow id a start was sent for
}

func newLedger() *ledger {
	return &ledger{started: map[string]string{}, signals: map[string]int{}, results: map[string]string{}}
}

func (l *ledger) counts() (started, signals, results int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.signals {
		signals += n
	}
	return len(l.started), signals, len(l.results)
}

// life is one server process and the load against it.
type life struct {
	srv     *testkit.Server
	c       client.Client
	stopW   func()
	cancel  context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup
	ops     atomic.Int64 // acknowledged operations in this life
	mu      sync.Mutex
	waiters []waiter // released by wake once ops reaches theirs
	nextID  *atomic.Int64
	led     *ledger
	rng     *rand.Rand
	rngMu   sync.Mutex
	gens    int // load generators (started by load)
	bigOdds int // one order in bigOdds asks for a large result (0: none)
	padMax  int
}

func (lf *life) randN(n int) int {
	lf.rngMu.Lock()
	defer lf.rngMu.Unlock()
	return lf.rng.IntN(n)
}

func nopLogger() *zerolog.Logger {
	l := zerolog.Nop()
	return &l
}

func quiet() worker.Options {
	return worker.Options{TaskQueue: orderQueue, GracefulStop: 100 * time.Millisecond, Logger: nopLogger()}
}

// startLife starts a server on dir, a worker and generators of load.
// It returns nil, with the server's exit, when the server does not come
// up.
func startLife(t *testing.T, dir string, sh *shop, led *ledger, nextID *atomic.Int64, seed uint64, gens int, args ...string) (*life, error) {
	t.Helper()
	srv := startServer(t, dir, args...)
	rctx, rcancel := context.WithTimeout(bg, 2*time.Minute)
	defer rcancel()
	switch err := srv.Ready(rctx); {
	case err == nil:
		c, err := client.Dial(srv.Addr, client.Options{Identity: "adversary"}, client.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := worker.New(c, quiet())
		if err != nil {
			t.Fatal(err)
		}
		err = errors.Join(w.RegisterWorkflow(Fulfil),
			w.RegisterActivity(sh.Charge, activities.Options{Name: "Charge", Effect: activities.SideEffect, Reconcile: sh.Lookup}),
			w.RegisterActivity(sh.Note, activities.Options{Name: "Note"}))
		if err != nil {
			t.Fatal(err)
		}
		wctx, wcancel := context.WithCancel(bg)
		wdone := make(chan struct{})
		go func() { defer close(wdone); _ = w.Run(wctx) }()
		ctx, cancel := context.WithCancel(bg)
		lf := &life{srv: srv, c: c, cancel: cancel, ctx: ctx, nextID: nextID, led: led,
			rng: rand.New(rand.NewPCG(seed, 7)), bigOdds: 40, padMax: padMax}
		lf.stopW = func() { wcancel(); <-wdone }
		lf.gens = gens
		return lf, nil
	case errors.Is(err, testkit.ErrExited):
		return nil, fmt.Errorf("server exited before it was ready: %v\n%s", srv.Err(), srv.Output())
	default:
		t.Fatalf("server not ready within 2 minutes: %v\n%s", err, srv.Output())
	}
	return nil, nil
}

// load starts the generators.
func (lf *life) load() {
	for range lf.gens {
		lf.wg.Add(1)
		go lf.generate()
	}
}

// generate starts orders, approves waiting ones, and waits for some
// results, recording every acknowledgement, until the life ends.
func (lf *life) generate() {
	defer lf.wg.Done()
	for lf.ctx.Err() == nil {
		switch n := lf.randN(10); {
		case n < 6:
			lf.startOrder()
		case n < 8:
			lf.approveOne()
		default:
			lf.awaitOne()
		}
	}
}

func (lf *life) startOrder() {
	id := fmt.Sprintf("o-%07d", lf.nextID.Add(1))
	o := Order{ID: id, Pad: strings.Repeat("p", lf.randN(lf.padMax)), Approve: lf.randN(3) == 0}
	if lf.bigOdds > 0 && lf.randN(lf.bigOdds) == 0 {
		o.Big = true
	}
	in, _ := sdk.DefaultConverter().ToPayload(o)
	lf.led.mu.Lock()
	lf.led.tried = append(lf.led.tried, id)
	lf.led.mu.Unlock()
	resp, err := lf.c.Service().StartWorkflow(lf.ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "Fulfil",
		TaskQueue: orderQueue, Input: in, RequestID: id, TaskTimeout: 2 * time.Second, ConflictPolicy: api.ConflictUseExisting})
	if err != nil {
		return
	}
	lf.led.mu.Lock()
	lf.led.started[id] = resp.RunID
	if o.Approve {
		lf.led.waiting = append(lf.led.waiting, id)
	}
	lf.led.mu.Unlock()
	lf.acked()
}

func (lf *life) approveOne() {
	lf.led.mu.Lock()
	if len(lf.led.waiting) == 0 {
		lf.led.mu.Unlock()
		lf.startOrder()
		return
	}
	i := lf.randN(len(lf.led.waiting))
	id := lf.led.waiting[i]
	lf.led.waiting = append(lf.led.waiting[:i], lf.led.waiting[i+1:]...)
	lf.led.mu.Unlock()
	in, _ := sdk.DefaultConverter().ToPayload("ok")
	if _, err := lf.c.Service().SignalWorkflow(lf.ctx, &api.SignalWorkflowRequest{WorkflowID: id, SignalName: "approve", Input: in}); err != nil {
		lf.led.mu.Lock()
		lf.led.waiting = append(lf.led.waiting, id) // try again later
		lf.led.mu.Unlock()
		return
	}
	lf.led.mu.Lock()
	lf.led.signals[id]++
	lf.led.mu.Unlock()
	lf.acked()
}

func (lf *life) awaitOne() {
	lf.led.mu.Lock()
	var id, run string
	for k, v := range lf.led.started { // any one: map order is random enough
		if _, done := lf.led.results[k]; !done {
			id, run = k, v
			break
		}
	}
	lf.led.mu.Unlock()
	if id == "" {
		lf.startOrder()
		return
	}
	ctx, cancel := context.WithTimeout(lf.ctx, 3*time.Second)
	defer cancel()
	var res string
	if err := lf.c.GetWorkflow(ctx, id, run).Get(ctx, &res); err != nil {
		return
	}
	lf.led.mu.Lock()
	lf.led.results[id] = res
	lf.led.mu.Unlock()
	lf.acked()
}

// waitOps waits until ops operations were acknowledged in this life.
func (lf *life) waitOps(t *testing.T, ops int64) {
	t.Helper()
	if ops <= lf.ops.Load() {
		return
	}
	lf.mu.Lock()
	ch := make(chan struct{})
	lf.waiters = append(lf.waiters, waiter{ops, ch})
	lf.mu.Unlock()
	lf.wake()
	select {
	case <-ch:
	case <-lf.srv.Exited():
		t.Fatalf("the server died by itself: %v\n%s", lf.srv.Err(), lf.srv.Output())
	case <-time.After(3 * time.Minute):
		t.Fatalf("only %d of %d operations acknowledged in 3 minutes", lf.ops.Load(), ops)
	}
}

// wake releases the waiters whose count was reached.
func (lf *life) wake() {
	n := lf.ops.Load()
	lf.mu.Lock()
	defer lf.mu.Unlock()
	kept := lf.waiters[:0]
	for _, w := range lf.waiters {
		if n >= w.ops {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	lf.waiters = kept
}

type waiter struct {
	ops int64
	ch  chan struct{}
}

// acked counts one acknowledged operation.
func (lf *life) acked() {
	lf.ops.Add(1)
	lf.wake()
}

// end ends the life with SIGKILL (or SIGTERM, clean) once ops operations
// were acknowledged in it, and waits for the process and the load to stop.
func (lf *life) end(t *testing.T, ops int64, sig syscall.Signal) {
	t.Helper()
	lf.waitOps(t, ops)
	_ = lf.srv.Signal(sig)
	<-lf.srv.Exited()
	lf.cancel()
	lf.wg.Wait()
	lf.stopW()
	_ = lf.c.Close()
}

// verify checks, on a freshly started server, that everything the
// earlier lives acknowledged is there, and nothing is quarantined.
func verify(t *testing.T, c client.Client, led *ledger) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Minute)
	defer cancel()
	led.mu.Lock()
	started := maps(led.started)
	signals := mapsInt(led.signals)
	results := maps(led.results)
	led.mu.Unlock()
	var bad []string
	ids := make([]string, 0, len(started))
	for id := range started {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		d, err := c.DescribeWorkflow(ctx, id, started[id])
		switch {
		case err != nil:
			bad = append(bad, fmt.Sprintf("%s: acknowledged start of run %s: %v", id, started[id], err))
			continue
		case d.Info.Corrupt != "":
			bad = append(bad, fmt.Sprintf("%s: quarantined: %s", id, d.Info.Corrupt))
			continue
		}
		if want, ok := results[id]; ok {
			var got string
			if d.Info.Status != api.StatusCompleted {
				bad = append(bad, fmt.Sprintf("%s: its result %q was served, now its status is %s", id, want, d.Info.Status))
			} else if err := c.GetWorkflow(ctx, id, started[id]).Get(ctx, &got); err != nil || got != want {
				bad = append(bad, fmt.Sprintf("%s: result %q was served, now %q, %v", id, want, got, err))
			}
		}
		if n := signals[id]; n > 0 {
			evs, err := c.GetHistory(ctx, id, started[id])
			got := 0
			for _, ev := range evs {
				if ev.Type() == history.TypeSignalReceived {
					got++
				}
			}
			if err != nil || got < n {
				bad = append(bad, fmt.Sprintf("%s: %d approvals acknowledged, %d in its history (%v)", id, n, got, err))
			}
		}
	}
	list, err := c.ListWorkflows(ctx, &api.ListWorkflowsRequest{Corrupt: true})
	if err != nil {
		bad = append(bad, fmt.Sprintf("list --corrupt: %v", err))
	} else if len(list.Workflows) > 0 {
		bad = append(bad, fmt.Sprintf("%d runs quarantined after a crash that damaged nothing (first: %s: %s)",
			len(list.Workflows), list.Workflows[0].WorkflowID, list.Workflows[0].Corrupt))
	}
	return bad
}

func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func mapsInt(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// cairnCheck runs `cairn check` on a copy of dir and returns its exit code
// and output.
func cairnCheck(t *testing.T, dir string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 10*time.Minute)
	defer cancel()
	out, err := testkit.CLI(ctx, t, "", "check", "--data", dir)
	if out.Code < 0 {
		t.Fatalf("cairn check: %v\n%s", err, out.Combined)
	}
	return out.Code, out.Combined
}

// TestAdversaryKills is the crash campaign on a real server: lives of a
// `cairn server` process under load from payment workers, each ended by
// SIGKILL after a random number of acknowledged operations, and restarted
// on the same directory. After every kill: `cairn check` on a copy of the
// directory must find nothing wrong, the server must start (a refusal is a
// false alarm), and everything acknowledged before must be there, with no
// run quarantined. At the end every order completes with at most one
// payment per key.
//
//	CAIRN_ADVERSARY_KILLS=N (default 2, in CI) sets the number of kills;
//	CAIRN_ADVERSARY_KEEP=DIR keeps the final data directory and one crash
//	copy per kill there, for the damage campaign (TestAdversaryDamage).
func TestAdversaryKills(t *testing.T) {
	kills := envInt(t, "CAIRN_ADVERSARY_KILLS", 2)
	if testing.Short() {
		kills = min(kills, 2)
	}
	keep := os.Getenv("CAIRN_ADVERSARY_KEEP")
	maxOps := int64(envInt(t, "CAIRN_ADVERSARY_OPS", 150))
	gens := envInt(t, "CAIRN_ADVERSARY_GENERATORS", 6)
	seed := uint64(envInt(t, "CAIRN_ADVERSARY_SEED", 1))
	root := t.TempDir()
	if keep != "" {
		root = keep
	}
	dir := filepath.Join(root, "data")
	sh, led := newShop(), newLedger()
	var nextID atomic.Int64
	rng := rand.New(rand.NewPCG(seed, 11))
	var checkAlarms, lost int
	start := time.Now()
	for k := 0; k <= kills; k++ {
		lf, err := startLife(t, dir, sh, led, &nextID, seed+uint64(k), gens)
		if err != nil {
			t.Fatalf("life %d: FALSE ALARM: the server refuses a directory that was only crashed: %v", k, err)
		}
		if k > 0 {
			if bad := verify(t, lf.c, led); len(bad) > 0 {
				lost += len(bad)
				for _, b := range bad[:min(len(bad), 10)] {
					t.Errorf("life %d: %s", k, b)
				}
			}
		}
		if k == kills {
			lf.cancel()
			lf.wg.Wait()
			finish(t, lf, sh, led)
			_ = lf.srv.Signal(syscall.SIGTERM)
			<-lf.srv.Exited()
			lf.stopW()
			_ = lf.c.Close()
			break
		}
		ops := 1 + rng.Int64N(maxOps)
		lf.load()
		lf.end(t, ops, syscall.SIGKILL)
		crash := filepath.Join(root, fmt.Sprintf("crash-%02d", k))
		if err := copyDir(dir, crash); err != nil {
			t.Fatal(err)
		}
		scratch := filepath.Join(root, "scratch")
		if err := copyDir(crash, scratch); err != nil { // check writes: it replays the WAL
			t.Fatal(err)
		}
		if code, out := cairnCheck(t, scratch); code != 0 {
			checkAlarms++
			t.Errorf("life %d: cairn check on a crash copy (nothing damaged): exit %d\n%s", k, code, out)
		}
		_ = os.RemoveAll(scratch)
		if keep == "" {
			_ = os.RemoveAll(crash)
		}
		s, sig, r := led.counts()
		t.Logf("life %d: killed after %d acknowledged operations (total: %d starts, %d approvals, %d results served; %s)",
			k, ops, s, sig, r, time.Since(start).Round(time.Second))
	}
	s, sig, r := led.counts()
	t.Logf("adversary kills: %d SIGKILLs under load, %d starts, %d approvals and %d results acknowledged; "+
		"%d false alarms of cairn check, %d acknowledged writes lost or rolled back, in %s",
		kills, s, sig, r, checkAlarms, lost, time.Since(start).Round(time.Second))
	if keep != "" {
		t.Logf("data directory and crash copies kept in %s; sizes: %s", root, dirSizes(dir))
	}
}

// finish approves every waiting order and waits for every acknowledged
// start to complete, then checks the payments: one per key, and the
// result each run returns is the one the provider recorded first.
func finish(t *testing.T, lf *life, sh *shop, led *ledger) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, 5*time.Minute)
	defer cancel()
	led.mu.Lock()
	started := maps(led.started)
	tried := append([]string(nil), led.tried...)
	led.mu.Unlock()
	for _, id := range tried { // a start the crash left unanswered may have happened
		if _, ok := started[id]; ok {
			continue
		}
		if d, err := lf.c.DescribeWorkflow(ctx, id, ""); err == nil {
			started[id] = d.Info.RunID
		} else if !errors.Is(err, api.ErrNotFound) {
			t.Fatalf("describe %s: %v", id, err)
		}
	}
	for id, run := range started {
		in, _ := sdk.DefaultConverter().ToPayload("ok")
		_, _ = lf.c.Service().SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: id, SignalName: "approve", Input: in})
		var res string
		if err := lf.c.GetWorkflow(ctx, id, run).Get(ctx, &res); err != nil {
			d, _ := lf.c.DescribeWorkflow(bg, id, run)
			t.Fatalf("%s did not complete: %v (%+v)", id, err, d)
		}
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	for key, n := range sh.paid {
		if n != 1 {
			t.Errorf("%d payments under key %s", n, key)
		}
	}
	if len(sh.paid) != len(started) {
		t.Errorf("payments under %d keys for %d orders", len(sh.paid), len(started))
	}
}

// dirSizes summarises a data directory: files by kind and bytes.
func dirSizes(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	count := map[string]int{}
	size := map[string]int64{}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			continue
		}
		k := fileKind(e.Name())
		if k == "" {
			k = e.Name()
		}
		count[k]++
		size[k] += fi.Size()
	}
	var parts []string
	for k, n := range count {
		parts = append(parts, fmt.Sprintf("%s×%d %.1fMB", k, n, float64(size[k])/1e6))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
