//go:build unix

package effects_test

import (
	"context"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk/client"
)

// Leases bound action in time, with real processes, SIGSTOP and SIGCONT:
// a worker never starts an attempt whose lease is over (point 1), a
// Reconcile lookup never races an attempt that may still act (point 2),
// and a worker never drops an outcome it knows (point 5).

// waitPollers waits until n activity polls are parked on queue.
func (e *env) waitPollers(queue string, n int) {
	e.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		if _, _, _, pollers := e.eng.QueueDepths(queue); pollers >= n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no activity poll parked on %q within %v", queue, waitTimeout)
		}
		runtime.Gosched()
	}
}

// Point 1: the engine hands attempt 1 to the long poll of a worker that is
// already frozen. Its lease ends while the task sits in the poll response;
// after the drift margin a lookup finds nothing and another worker pays
// (attempt 2). When the frozen worker wakes up it finds the task's lease
// over and gives it back unstarted: one payment, and the stale give-back
// changes nothing.
func TestFrozenInThePollNeverRuns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := workerCfg{Class: history.SideEffect, Reconcile: true, Queue: "payments", MaxAct: 1}
	e.worker("wf", workerCfg{Class: history.SideEffect, Reconcile: true})
	a := e.worker("a", cfg)
	e.waitPollers("payments", 1)
	a.Freeze() // parked in its poll
	o := inv
	o.PayQueue = "payments"
	run := e.start("frozen-in-poll", o)
	d := e.waitEvent(run, "the dispatch to a", func(ev history.Event) bool {
		s, ok := ev.Attrs.(*history.ActivityStarted)
		return ok && s.Identity == "a"
	}).Attrs.(*history.ActivityStarted)
	if d.Attempt != 1 || d.Reconcile {
		t.Fatalf("dispatch %+v", d)
	}
	b := e.worker("b", cfg)
	if l := b.WaitFields(t.Context(), "lookup"); l[2] != "not-found" {
		t.Fatalf("lookup printed %q", l)
	}
	if p := b.WaitFields(t.Context(), "paid"); p[2] != "2" {
		t.Fatalf("b printed %q, want attempt 2", p)
	}
	out := result(t, run)
	a.Thaw()
	if r := a.WaitFields(t.Context(), "refused"); r[1] != "stale-attempt" || r[2] != "gave-back" {
		t.Fatalf("a's report: %q, want its give-back refused as stale", r)
	}
	if p := a.Lines("started"); len(p) != 0 {
		t.Fatalf("the frozen worker started an attempt whose lease was over: %q", p)
	}
	ps := e.wantPayments(1)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] {
		t.Fatalf("outcome %+v, want %+v", out, ps)
	}
	if n := e.history(run).count(history.TypeActivityDuplicateDetected); n != 0 {
		t.Fatalf("%d duplicates for one payment", n)
	}
}

// startShopWorker starts a shop worker process (vendor_test.go) running
// at most maxAct activities at once (0: the worker's default).
func startShopWorker(t *testing.T, addr, vendorURL, name string, maxAct int) *testkit.Proc {
	t.Helper()
	return spawn(t, name, envMode+"=shop", envAddr+"="+addr, envName+"="+name, envVendorURL+"="+vendorURL,
		envMaxAct+"="+strconv.Itoa(maxAct))
}

// startVendor starts a vendor process and returns it with its URL.
func startVendor(t *testing.T, journal string, env ...string) (*testkit.Proc, string) {
	t.Helper()
	v := spawn(t, "vendor", append([]string{envMode + "=vendor", envVendorJournal + "=" + journal}, env...)...)
	return v, v.WaitFields(t.Context(), "listening")[1]
}

// Point 2: the frozen attempt's charge is on its way — the request left the
// worker, and the vendor takes longer than the lease to journal it. A
// lookup at the lease's end would find nothing and a retry would charge
// twice; the engine waits for the lease deadline plus the drift margin, so
// the lookup finds the charge and the action is resolved as happened: one
// charge, no duplicate. When the frozen worker wakes up, its late report is
// a confirmation (or adds nothing), never an alarm.
func TestReconcileWaitsForTheRequestInFlight(t *testing.T) {
	t.Parallel()
	// The charge takes 2.8 s to be journaled: past the lease (2 s from the
	// dispatch, so never later than 2 s after the request left), and well
	// within the lease plus the margin (6 s) even when the request left a
	// couple of seconds after the dispatch on a loaded machine.
	e := newEnv(t, func(o *engine.Options) { o.LeaseDriftMargin = 6 * time.Second })
	journal := filepath.Join(e.dir, "vendor.jsonl")
	v, vurl := startVendor(t, journal, envVendorDelay+"=2800ms")
	// One activity at a time: once it holds the charge, the frozen worker
	// has no poll parked that would swallow the lookup too.
	a := startShopWorker(t, e.addr, vurl, "a", 1)
	run, err := e.c.StartWorkflow(context.Background(), client.StartOptions{ID: "slow-vendor", TaskQueue: agentsQueue}, Shop,
		ShopOrder{Invoice: "INV-77", Amount: 990})
	if err != nil {
		t.Fatal(err)
	}
	sent := v.WaitFields(t.Context(), "received /charge") // the request left the worker (its "sent" trace fires before the flush)
	a.Freeze()                                            // the charge is under way at the vendor; the worker is gone
	b := startShopWorker(t, e.addr, vurl, "b", 0)
	var out ShopOutcome
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if p := b.Lines("sent /charge"); len(p) != 0 {
		t.Fatalf("b charged again: %q", p)
	}
	entries, err := readJournal(journal)
	if err != nil {
		t.Fatal(err)
	}
	cs := charges(entries)[sent[2]]
	if len(cs) != 1 || out.Receipt.PaymentID != cs[0].PaymentID || out.Failed != "" {
		t.Fatalf("charges under %s: %+v; outcome %+v", sent[2], cs, out)
	}
	evs := e.history(run)
	res := only[*history.ActivityResolved](t, evs)
	if res.By != "reconcile" || res.Resolution != history.ResolvedHappened {
		t.Fatalf("resolved %+v, want happened by the lookup", res)
	}
	a.Thaw()
	a.WaitLine(t.Context(), "refused") // its late report of the charge (a confirmation, or nothing new)
	e.assertNoDuplicates()
}

func (e *env) assertNoDuplicates() {
	e.t.Helper()
	dups, err := e.c.ListEffects(context.Background(), &api.ListEffectsRequest{DuplicatesOnly: true})
	if err != nil || len(dups.Effects) != 0 {
		e.t.Fatalf("duplicates: %+v, %v", dups, err)
	}
}

// Point 5: the worker has paid and reports while the server is frozen
// (SIGSTOP) and then killed (SIGKILL); it keeps the outcome and delivers it
// once the server is back on the same data: the run completes with its
// receipt — no pause for a person, no second payment.
func TestOutcomeSurvivesAServerRestart(t *testing.T) {
	t.Parallel()
	data, prov := storetest.New(t), provider{filepath.Join(t.TempDir(), "provider.jsonl")}
	listen := testkit.FreeAddr(t)
	engine1 := spawnEngine(t, "engine1", data, envListen+"="+listen)
	addr := engine1.WaitFields(t.Context(), "listening")[1]
	c := dial(t, addr)
	w := startWorker(t, addr, prov, "w", workerCfg{Class: history.SideEffect, GateAfter: 1})
	run := startRun(t, c, "report-across-restart", inv)
	paid := w.WaitFields(t.Context(), "paid")
	engine1.Freeze()
	w.Send("go") // the completion goes out to a frozen server…
	engine1.Kill()
	engine2 := spawnEngine(t, "engine2", data, envListen+"="+listen) // …which comes back
	engine2.WaitLine(t.Context(), "listening")
	if r := w.WaitFields(t.Context(), "acked"); r[1] != "completed" {
		t.Fatalf("w's report: %q", r)
	}
	o := result(t, c.GetWorkflow(context.Background(), run.WorkflowID(), run.RunID()))
	ps, err := prov.payments()
	if err != nil || len(ps) != 1 || len(o.Receipts) != 1 || o.Receipts[0] != ps[0] || ps[0].PaymentID != paid[3] {
		t.Fatalf("payments %+v (%v), outcome %+v", ps, err, o)
	}
	evs := historyOf(t, c, run)
	if evs.count(history.TypeActivityResolved) != 0 || evs.count(history.TypeActivityDuplicateDetected) != 0 {
		t.Fatalf("want the outcome recorded without a person or an alarm:\n%s", evs)
	}
	done := only[*history.ActivityCompleted](t, evs)
	if done.Identity != "w" {
		t.Fatalf("completed %+v", done)
	}
	if refused := w.Lines("refused"); len(refused) == 0 || !strings.Contains(strings.Join(refused, "\n"), "other completed") {
		t.Fatalf("the report was not retried: refusals %q", refused)
	}
}
