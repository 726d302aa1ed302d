//go:build unix

// Package effects_test proves Cairn's effect-safety guarantees end to end,
// with real processes: the engine runs in the test process (or, where the
// engine itself must die, in a child process) and serves HTTP; workers are
// the test binary re-executed; the payment provider is a file every process
// appends to. A process "dies" with SIGKILL at the exact moment a scenario
// names — the worker prints "paid …" and blocks, the test kills it — so no
// test sleeps, and every assertion counts the provider's ledger and reads
// the run's history. See docs/effects.md for the guarantees.
package effects_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk/client"
)

var inv = Order{Invoice: "INV-9", Amount: 4200}

// pauseAfterPayment runs the agent with a SideEffect SendPayment until the
// provider took the payment, kills the worker process right then (the
// completion is never reported) and waits for the run to pause. It returns
// the run and the key the worker sent.
func pauseAfterPayment(t *testing.T, e *env, id string) (client.Run, string) {
	t.Helper()
	w1 := e.worker("w1", workerCfg{Class: history.SideEffect, GateAfter: 1})
	run := e.start(id, inv)
	paid := w1.WaitFields(t.Context(), "paid")
	w1.Kill()
	u := e.waitEvent(run, "the pause", is(history.TypeActivityOutcomeUnknown)).Attrs.(*history.ActivityOutcomeUnknown)
	if u.IdempotencyKey != paid[1] || u.Attempt != 1 {
		t.Fatalf("ActivityOutcomeUnknown %+v, want key %s attempt 1", u, paid[1])
	}
	return run, paid[1]
}

// pauseBeforePayment is pauseAfterPayment with the worker killed after it
// received the task and before it called the provider: the engine cannot
// tell the difference.
func pauseBeforePayment(t *testing.T, e *env, id string) (client.Run, string) {
	t.Helper()
	w1 := e.worker("w1", workerCfg{Class: history.SideEffect, GateBefore: 1})
	run := e.start(id, inv)
	started := w1.WaitFields(t.Context(), "started")
	w1.Kill()
	u := e.waitEvent(run, "the pause", is(history.TypeActivityOutcomeUnknown)).Attrs.(*history.ActivityOutcomeUnknown)
	if u.IdempotencyKey != started[1] {
		t.Fatalf("ActivityOutcomeUnknown %+v, want key %s", u, started[1])
	}
	return run, started[1]
}

// TestKilledAfterEffect kills the worker after the provider took the
// payment and before the completion reached the engine: the effect
// happened and nothing recorded it. What happens next depends on the
// effect class.
func TestKilledAfterEffect(t *testing.T) {
	t.Parallel()

	// SideEffect without Reconcile: nobody can tell whether it happened,
	// so the run pauses for a person, with the key, attempt and reason.
	t.Run("SideEffect pauses", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		run, key := pauseAfterPayment(t, e, "killed-side-effect")
		d, err := e.c.DescribeWorkflow(context.Background(), run.WorkflowID(), run.RunID())
		if err != nil {
			t.Fatal(err)
		}
		if d.Info.Status != api.StatusPaused || d.Info.Pause == nil {
			t.Fatalf("status %s, pause %+v; want paused", d.Info.Status, d.Info.Pause)
		}
		if p := d.Info.Pause; p.IdempotencyKey != key || p.ActivityType != "SendPayment" || p.Attempt != 1 || p.Reason == "" {
			t.Fatalf("pause %+v, want SendPayment attempt 1 with key %s and a reason", p, key)
		}
		if len(d.PendingActivities) != 1 || d.PendingActivities[0].State != api.ActivityStateUnknown {
			t.Fatalf("pending activities %+v, want one in state unknown", d.PendingActivities)
		}
		list, err := e.c.ListWorkflows(context.Background(), &api.ListWorkflowsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Workflows) != 1 || list.Workflows[0].Status != api.StatusPaused {
			t.Fatalf("list %+v, want the run listed as paused", list.Workflows)
		}
		e.wantPayments(1)
		evs := e.history(run)
		_, ids := evs.scheduled("SendPayment")
		if n := len(evs.started(ids[0])); n != 1 {
			t.Fatalf("%d dispatches of SendPayment, want 1:\n%s", n, evs)
		}
	})

	// Idempotent: the downstream deduplicates, so the engine retries with
	// the same key, and the provider sees the same key twice and pays once.
	t.Run("Idempotent retries with the same key", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		w1 := e.worker("w1", workerCfg{Class: history.Idempotent, GateAfter: 1})
		run := e.start("killed-idempotent", inv)
		first := w1.WaitFields(t.Context(), "paid")
		w1.Kill()
		w2 := e.worker("w2", workerCfg{Class: history.Idempotent})
		retry := w2.WaitFields(t.Context(), "paid")
		if retry[1] != first[1] || retry[2] != "2" || retry[3] != first[3] || retry[4] != "deduped" {
			t.Fatalf("the retry printed %q after %q; want attempt 2 with the same key, deduplicated by the provider", retry, first)
		}
		o := result(t, run)
		if len(o.Receipts) != 1 || o.Receipts[0].PaymentID != first[3] {
			t.Fatalf("outcome %+v, want the receipt of %s", o, first[3])
		}
		e.wantPayments(1)
		evs := e.history(run)
		sched, ids := evs.scheduled("SendPayment")
		if sched[0].IdempotencyKey != first[1] || len(evs.started(ids[0])) != 2 || evs.count(history.TypeActivityOutcomeUnknown) != 0 {
			t.Fatalf("want two dispatches under key %s and no pause:\n%s", first[1], evs)
		}
	})

	// SideEffect with Reconcile: the engine runs the lookup as a task; it
	// finds the payment and the run goes on without a person.
	t.Run("Reconcile resolves without a person", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		w1 := e.worker("w1", workerCfg{Class: history.SideEffect, Reconcile: true, GateAfter: 1})
		run := e.start("killed-reconcile", inv)
		paid := w1.WaitFields(t.Context(), "paid")
		w1.Kill()
		w2 := e.worker("w2", workerCfg{Class: history.SideEffect, Reconcile: true})
		if l := w2.WaitFields(t.Context(), "lookup"); l[1] != paid[1] || l[2] != "found" {
			t.Fatalf("lookup printed %q, want the payment under key %s found", l, paid[1])
		}
		o := result(t, run)
		if len(o.Receipts) != 1 || o.Receipts[0].PaymentID != paid[3] {
			t.Fatalf("outcome %+v, want the receipt of %s", o, paid[3])
		}
		e.wantPayments(1)
		if p := w2.Lines("paid"); len(p) != 0 {
			t.Fatalf("the second worker paid again: %q", p)
		}
		evs := e.history(run)
		r := only[*history.ActivityResolved](t, evs)
		if r.By != "reconcile" || r.Resolution != history.ResolvedHappened {
			t.Fatalf("ActivityResolved %+v, want happened by reconcile", r)
		}
		if evs.count(history.TypeActivityOutcomeUnknown) != 0 {
			t.Fatalf("the run paused:\n%s", evs)
		}
	})
}

// TestKilledBeforeIntent kills the engine process while the payment is
// scheduled and no worker has taken it: the intent (ActivityStarted and the
// ledger entry) is written only when the task is dispatched, so nothing
// claims the payment may have happened. After a restart on the same data
// (directory, or Postgres schema) the payment is made exactly once and the
// run never pauses.
func TestKilledBeforeIntent(t *testing.T) {
	t.Parallel()
	data, prov := storetest.New(t), provider{filepath.Join(t.TempDir(), "provider.jsonl")}
	engine1 := spawnEngine(t, "engine1", data)
	addr1 := engine1.WaitFields(t.Context(), "listening")[1]
	c1 := dial(t, addr1)
	// The workflow worker polls "agents"; SendPayment runs on "payments",
	// which nobody polls yet.
	wf1 := startWorker(t, addr1, prov, "wf1", workerCfg{Class: history.SideEffect})
	run := startRun(t, c1, "killed-before-intent", Order{Invoice: "INV-9", Amount: 4200, PayQueue: "payments"})
	testkit.WaitEvent(t.Context(), t, c1.Service(), run.WorkflowID(), run.RunID(), "the payment to be scheduled", is(history.TypeActivityScheduled))
	if evs := historyOf(t, c1, run); evs.count(history.TypeActivityStarted) != 0 {
		t.Fatalf("dispatched before any worker polled:\n%s", evs)
	}
	engine1.Kill()
	wf1.Kill()

	engine2 := spawnEngine(t, "engine2", data)
	addr2 := engine2.WaitFields(t.Context(), "listening")[1]
	c2 := dial(t, addr2)
	startWorker(t, addr2, prov, "wf2", workerCfg{Class: history.SideEffect})
	payer := startWorker(t, addr2, prov, "payer", workerCfg{Class: history.SideEffect, Queue: "payments"})
	o := result(t, c2.GetWorkflow(context.Background(), run.WorkflowID(), run.RunID()))
	if len(o.Receipts) != 1 {
		t.Fatalf("outcome %+v, want one receipt", o)
	}
	if ps, _ := prov.payments(); len(ps) != 1 {
		t.Fatalf("the provider holds %d payments, want 1: %+v", len(ps), ps)
	}
	if p := payer.Lines("paid"); len(p) != 1 {
		t.Fatalf("the payer paid %d times: %q", len(p), p)
	}
	evs := historyOf(t, c2, run)
	_, ids := evs.scheduled("SendPayment")
	if len(evs.started(ids[0])) != 1 || evs.count(history.TypeActivityOutcomeUnknown) != 0 {
		t.Fatalf("want one dispatch and no pause:\n%s", evs)
	}
}

func dial(t *testing.T, addr string) client.Client {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Identity: "test"}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestKilledAfterCompletionRecorded kills the worker once the payment's
// completion is in history (and the workflow task that saw it completed):
// the fresh worker replays the run and makes no new call.
func TestKilledAfterCompletionRecorded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w1 := e.worker("w1", workerCfg{Class: history.SideEffect})
	o := inv
	o.WaitSignal = true
	run := e.start("killed-after-completion", o)
	done := e.waitEvent(run, "the completion", is(history.TypeActivityCompleted))
	e.waitEvent(run, "the decision after it", after(done.ID, history.TypeWorkflowTaskCompleted))
	w1.Kill()
	w2 := e.worker("w2", workerCfg{Class: history.SideEffect})
	if err := e.c.SignalWorkflow(context.Background(), run.WorkflowID(), "", "ship", "now"); err != nil {
		t.Fatal(err)
	}
	out := result(t, run)
	ps := e.wantPayments(1)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] {
		t.Fatalf("outcome %+v, want the receipt %+v", out, ps[0])
	}
	if p := w2.Lines("started"); len(p) != 0 {
		t.Fatalf("the fresh worker called SendPayment: %q", p)
	}
	evs := e.history(run)
	_, ids := evs.scheduled("SendPayment")
	if len(evs.started(ids[0])) != 1 {
		t.Fatalf("want one dispatch:\n%s", evs)
	}
}

// TestSamePaymentTwiceInOneRun pays the same invoice twice on purpose: two
// actions, two keys (occurrence 1 and 2), two payments — and still exactly
// two after the worker dies during the second: it pauses, a person finds
// the payment at the provider and resolves it as happened.
func TestSamePaymentTwiceInOneRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w1 := e.worker("w1", workerCfg{Class: history.SideEffect, GateAfter: 2})
	o := inv
	o.Times = 2
	run := e.start("twice", o)
	first := w1.WaitFields(t.Context(), "paid")
	second := w1.WaitFields(t.Context(), "paid")
	w1.Kill()
	u := e.waitEvent(run, "the pause", is(history.TypeActivityOutcomeUnknown)).Attrs.(*history.ActivityOutcomeUnknown)

	evs := e.history(run)
	sched, ids := evs.scheduled("SendPayment")
	if len(sched) != 2 || u.ScheduledEventID != ids[1] {
		t.Fatalf("want two SendPayment and the pause on the second:\n%s", evs)
	}
	if sched[0].IdempotencyKey == sched[1].IdempotencyKey || string(sched[0].Input.Data) != string(sched[1].Input.Data) {
		t.Fatalf("identical arguments must give two keys: %+v", sched)
	}
	for i, s := range sched {
		// The documented formula: hash(workflow id, type, canonical arguments, occurrence).
		if want := engine.IdempotencyKey(run.WorkflowID(), "SendPayment", s.Input.Data, int32(i+1)); s.IdempotencyKey != want {
			t.Fatalf("key %d is %s, want %s", i+1, s.IdempotencyKey, want)
		}
	}
	if first[1] != sched[0].IdempotencyKey || second[1] != sched[1].IdempotencyKey || u.IdempotencyKey != second[1] {
		t.Fatalf("the worker sent %s then %s; history has %s, %s", first[1], second[1], sched[0].IdempotencyKey, sched[1].IdempotencyKey)
	}
	e.wantPayments(2)

	r, found, err := e.prov.find(u.IdempotencyKey)
	if err != nil || !found {
		t.Fatalf("the provider should hold the second payment: %v %v", found, err)
	}
	e.resolve(client.ResolveRequest{WorkflowID: run.WorkflowID(), Resolution: history.ResolvedHappened, Result: r,
		By: "clerk@acme", Reason: "found " + r.PaymentID + " at the provider"})
	e.worker("w2", workerCfg{Class: history.SideEffect})
	out := result(t, run)
	ps := e.wantPayments(2)
	if len(out.Receipts) != 2 || out.Receipts[0] != ps[0] || out.Receipts[1] != ps[1] {
		t.Fatalf("outcome %+v, want the two receipts %+v", out, ps)
	}
}

// TestNewRunWithExtraStep: the first run pays, its worker dies, the
// orchestrator terminates it and runs the job again under the same workflow
// id; this time the agent takes one extra step before paying. The payment
// lands at another position in the new history but has the same key, so
// the effects ledger answers it (ActivityDeduplicated names the first run)
// and the provider is not called again.
func TestNewRunWithExtraStep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w1 := e.worker("w1", workerCfg{Class: history.SideEffect})
	o := inv
	o.WaitSignal = true
	run1 := e.start("new-run", o)
	done := e.waitEvent(run1, "the payment", is(history.TypeActivityCompleted))
	e.waitEvent(run1, "the decision after it", after(done.ID, history.TypeWorkflowTaskCompleted))
	w1.Kill()
	if err := e.c.TerminateWorkflow(context.Background(), run1.WorkflowID(), run1.RunID(), "pod evicted; re-running the job"); err != nil {
		t.Fatal(err)
	}

	w2 := e.worker("w2", workerCfg{Class: history.SideEffect})
	o = inv
	o.ExtraStep = true
	run2 := e.start("new-run", o)
	out := result(t, run2)
	ps := e.wantPayments(1)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] {
		t.Fatalf("outcome %+v, want the first run's receipt %+v", out, ps[0])
	}
	if p := w2.Lines("started"); len(p) != 0 {
		t.Fatalf("the new run called SendPayment: %q", p)
	}
	sched1, ids1 := e.history(run1).scheduled("SendPayment")
	evs2 := e.history(run2)
	sched2, ids2 := evs2.scheduled("SendPayment")
	if ids1[0] == ids2[0] || sched1[0].IdempotencyKey != sched2[0].IdempotencyKey {
		t.Fatalf("want the same key at another position: run 1 event %d key %s, run 2 event %d key %s",
			ids1[0], sched1[0].IdempotencyKey, ids2[0], sched2[0].IdempotencyKey)
	}
	d := only[*history.ActivityDeduplicated](t, evs2)
	if d.OriginalRunID != run1.RunID() || d.OriginalEventID != ids1[0] || d.IdempotencyKey != sched1[0].IdempotencyKey {
		t.Fatalf("ActivityDeduplicated %+v, want run %s event %d", d, run1.RunID(), ids1[0])
	}
	if evs2.count(history.TypeActivityStarted) != 1 { // CheckBudget's
		t.Fatalf("SendPayment was dispatched:\n%s", evs2)
	}
}

// TestTimestampInArguments: the agent puts sdk.Now into the payment's
// arguments, so every run of the job builds different arguments.
func TestTimestampInArguments(t *testing.T) {
	t.Parallel()
	o := inv
	o.Stamp = true
	payTwice := func(t *testing.T, businessKey bool) (*env, client.Run, client.Run) {
		e := newEnv(t)
		e.worker("w", workerCfg{Class: history.SideEffect, BusinessKey: businessKey})
		run1 := e.start("stamped", o)
		result(t, run1)
		run2 := e.start("stamped", o) // "run it again"
		result(t, run2)
		return e, run1, run2
	}

	// The documented failure (docs/effects.md, "Arguments that change"):
	// keyed on the whole arguments, the re-run's key differs and the
	// invoice is paid twice. This test asserts the double payment on
	// purpose; it is the reason BusinessKey exists.
	t.Run("without BusinessKey the re-run pays twice (documented failure)", func(t *testing.T) {
		t.Parallel()
		e, run1, run2 := payTwice(t, false)
		e.wantPayments(2)
		s1, _ := e.history(run1).scheduled("SendPayment")
		evs2 := e.history(run2)
		s2, _ := evs2.scheduled("SendPayment")
		if s1[0].IdempotencyKey == s2[0].IdempotencyKey || evs2.count(history.TypeActivityDeduplicated) != 0 {
			t.Fatalf("expected different keys and no deduplication:\n%s", evs2)
		}
	})

	// The fix: key on the invoice. The re-run is recognised.
	t.Run("BusinessKey pays once", func(t *testing.T) {
		t.Parallel()
		e, run1, run2 := payTwice(t, true)
		ps := e.wantPayments(1)
		evs2 := e.history(run2)
		d := only[*history.ActivityDeduplicated](t, evs2)
		s1, _ := e.history(run1).scheduled("SendPayment")
		if d.OriginalRunID != run1.RunID() || d.IdempotencyKey != s1[0].IdempotencyKey {
			t.Fatalf("ActivityDeduplicated %+v, want run %s's key %s", d, run1.RunID(), s1[0].IdempotencyKey)
		}
		if want := engine.IdempotencyKey("stamped", "SendPayment", []byte("INV-9"), 1); d.IdempotencyKey != want {
			t.Fatalf("key %s, want hash(workflow id, type, business key, 1) = %s", d.IdempotencyKey, want)
		}
		if r := decode[Receipt](t, d.Result); r != ps[0] {
			t.Fatalf("deduplicated result %+v, want %+v", r, ps[0])
		}
	})
}

// TestTwoWorkersRace: two worker processes poll the same queue while ten
// payments are scheduled at once: each attempt is leased to exactly one of
// them (one ActivityStarted per attempt) and each payment is made once.
func TestTwoWorkersRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.worker("a", workerCfg{Class: history.SideEffect})
	b := e.worker("b", workerCfg{Class: history.SideEffect})
	const n = 10
	var runs []client.Run
	for i := range n {
		o := inv
		o.Invoice = "INV-" + string(rune('A'+i))
		runs = append(runs, e.start("race-"+o.Invoice, o))
	}
	for _, run := range runs {
		result(t, run)
		evs := e.history(run)
		_, ids := evs.scheduled("SendPayment")
		if st := evs.started(ids[0]); len(st) != 1 || st[0].Attempt != 1 {
			t.Fatalf("%s: want exactly one lease:\n%s", run.WorkflowID(), evs)
		}
	}
	ps := e.wantPayments(n)
	keys := map[string]bool{}
	for _, p := range ps {
		keys[p.Key] = true
	}
	paid := append(a.Lines("paid"), b.Lines("paid")...)
	if len(keys) != n || len(paid) != n {
		t.Fatalf("%d distinct keys and %d payments by the workers, want %d: %+v", len(keys), len(paid), n, ps)
	}
}

// TestStoppedWorkerIsFenced freezes a worker (SIGSTOP) holding the lease of
// a SideEffect payment before it pays. Its lease expires; once the drift
// margin is over too, the Reconcile lookup finds no payment, so the engine
// dispatches attempt 2, which another worker performs. Then the frozen
// worker is resumed (SIGCONT) and pays: its SendPayment ignores its
// context — the one window no process can close on its own (frozen between
// its last check and the request leaving it; docs/effects.md). The engine
// holds attempt 1's success until attempt 2 reports; attempt 2 succeeds
// too, and the double payment is declared a duplicate (proven: two
// attempts reported success) — in history, in the ledger, through the API.
// The run's result is attempt 2's. (An Idempotent activity with a provider
// that honours the key avoids the second payment.)
func TestStoppedWorkerIsFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := workerCfg{Class: history.SideEffect, Reconcile: true, Queue: "payments", MaxAct: 1}
	e.worker("wf", workerCfg{Class: history.SideEffect, Reconcile: true}) // runs the workflow; nobody else polls "agents"
	cfg.GateBefore = 1
	a := e.worker("a", cfg)
	o := inv
	o.PayQueue = "payments"
	run := e.start("fenced", o)
	started := a.WaitFields(t.Context(), "started")
	key := started[1]
	a.Freeze()

	cfg.GateBefore, cfg.GateAfter = 0, 1
	b := e.worker("b", cfg)
	if l := b.WaitFields(t.Context(), "lookup"); l[1] != key || l[2] != "not-found" {
		t.Fatalf("lookup printed %q, want key %s not found", l, key)
	}
	// a's lease expired, so a is frozen (a live worker heartbeats): only
	// now let its SendPayment go on, which it will when it wakes up.
	a.Send("go")
	bp := b.WaitFields(t.Context(), "paid")
	if bp[1] != key || bp[2] != "2" {
		t.Fatalf("b printed %q, want attempt 2 under key %s", bp, key)
	}

	a.Thaw()
	if p := a.WaitFields(t.Context(), "paid"); p[1] != key || p[2] != "1" {
		t.Fatalf("a printed %q, want attempt 1 under key %s", p, key)
	}
	// Attempt 2 still runs: attempt 1's success is held until it reports.
	if r := a.WaitFields(t.Context(), "acked"); r[1] != "completed" {
		t.Fatalf("a's completion: %q, want it acknowledged (held)", r)
	}
	b.Send("go")
	out := result(t, run)
	ps := e.wantPayments(2)
	if len(out.Receipts) != 1 || !slices.Contains(ps, out.Receipts[0]) || out.Receipts[0].PaymentID != bp[3] {
		t.Fatalf("outcome %+v: want attempt 2's receipt (ledger %+v)", out, ps)
	}
	evs := e.history(run)
	dup := only[*history.ActivityDuplicateDetected](t, evs)
	if dup.Attempt != 1 || dup.OtherAttempt != 2 || dup.Possible || dup.IdempotencyKey != key || dup.Identity != "a" {
		t.Fatalf("ActivityDuplicateDetected %+v, want attempt 1 of a duplicating attempt 2 under key %s", dup, key)
	}
	_, ids := evs.scheduled("SendPayment")
	st := evs.started(ids[0])
	if len(st) != 2 || st[0].Attempt != 1 || st[0].Identity != "a" || st[1].Attempt != 2 || st[1].Identity != "b" {
		t.Fatalf("want attempt 1 leased to a and attempt 2 to b:\n%s", evs)
	}
	if c := only[*history.ActivityCompleted](t, evs); c.Identity != "b" {
		t.Fatalf("completed by %s, want b", c.Identity)
	}
	dups, err := e.c.ListEffects(context.Background(), &api.ListEffectsRequest{DuplicatesOnly: true})
	if err != nil || len(dups.Effects) != 1 || dups.Effects[0].IdempotencyKey != key || dups.Effects[0].Duplicates != 1 {
		t.Fatalf("ListEffects duplicates: %+v, %v", dups, err)
	}
}

// TestLateCompletionResolvesPause freezes a worker after it paid; its lease
// expires and the run pauses. When the worker wakes up and reports, its
// attempt is still the current one: the completion is accepted and resolves
// the pause, with no person and no duplicate.
func TestLateCompletionResolvesPause(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.worker("w", workerCfg{Class: history.SideEffect, GateAfter: 1, MaxAct: 1})
	run := e.start("late", inv)
	w.WaitLine(t.Context(), "paid")
	w.Freeze()
	e.waitEvent(run, "the pause", is(history.TypeActivityOutcomeUnknown))
	w.Send("go")
	w.Thaw()
	out := result(t, run)
	ps := e.wantPayments(1)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] {
		t.Fatalf("outcome %+v, want %+v", out, ps[0])
	}
	evs := e.history(run)
	if evs.count(history.TypeActivityDuplicateDetected) != 0 || evs.count(history.TypeActivityResolved) != 0 ||
		evs.count(history.TypeActivityCompleted) != 1 {
		t.Fatalf("want the late completion recorded as the result:\n%s", evs)
	}
	if r := w.Lines("refused"); len(r) != 0 {
		t.Fatalf("the late completion was refused: %q", r)
	}
}

// TestLateCompletionAfterReconcile: as TestLateCompletionResolvesPause, but
// the activity declares a Reconcile lookup, which runs when the lease
// expires and cannot tell (the provider's lookup API is down), so the run
// pauses. The frozen worker then wakes up and reports attempt 1's success:
// it is the late completion of the attempt the run is paused on — the
// lookup was not a new attempt — so it resolves the pause; it is not a
// duplicate (there is one payment).
func TestLateCompletionAfterReconcile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cfg := workerCfg{Class: history.SideEffect, Reconcile: true, Queue: "payments", MaxAct: 1}
	e.worker("wf", workerCfg{Class: history.SideEffect, Reconcile: true})
	cfg.GateAfter = 1
	a := e.worker("a", cfg)
	o := inv
	o.PayQueue = "payments"
	run := e.start("late-reconcile", o)
	paid := a.WaitFields(t.Context(), "paid")
	a.Freeze()
	cfg.GateAfter, cfg.LookupDown = 0, true
	b := e.worker("b", cfg)
	if l := b.WaitFields(t.Context(), "lookup"); l[2] != "unknown" {
		t.Fatalf("lookup printed %q", l)
	}
	e.waitEvent(run, "the pause", is(history.TypeActivityOutcomeUnknown))
	a.Send("go")
	a.Thaw()
	out := result(t, run)
	ps := e.wantPayments(1)
	if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] || ps[0].PaymentID != paid[3] {
		t.Fatalf("outcome %+v, want %+v", out, ps[0])
	}
	evs := e.history(run)
	if evs.count(history.TypeActivityDuplicateDetected) != 0 || evs.count(history.TypeActivityCompleted) != 1 {
		t.Fatalf("want the late completion recorded as the result, and no duplicate:\n%s", evs)
	}
	if r := a.Lines("refused"); len(r) != 0 {
		t.Fatalf("the late completion was refused: %q", r)
	}
}

// TestResolve resolves a paused payment each of the three ways.
func TestResolve(t *testing.T) {
	t.Parallel()

	// Happened: a person finds the payment at the provider; the workflow
	// continues with the result the person gave.
	t.Run("happened", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		run, key := pauseAfterPayment(t, e, "resolve-happened")
		r, found, err := e.prov.find(key)
		if err != nil || !found {
			t.Fatalf("the provider should hold the payment: %v %v", found, err)
		}
		e.resolve(client.ResolveRequest{WorkflowID: run.WorkflowID(), Resolution: history.ResolvedHappened, Result: r,
			By: "clerk@acme", Reason: "found " + r.PaymentID + " at the provider"})
		w2 := e.worker("w2", workerCfg{Class: history.SideEffect})
		out := result(t, run)
		if len(out.Receipts) != 1 || out.Receipts[0] != r {
			t.Fatalf("outcome %+v, want %+v", out, r)
		}
		e.wantPayments(1)
		if p := w2.Lines("started"); len(p) != 0 {
			t.Fatalf("SendPayment ran again: %q", p)
		}
		res := only[*history.ActivityResolved](t, e.history(run))
		if res.Resolution != history.ResolvedHappened || res.By != "clerk@acme" || !strings.Contains(res.Reason, r.PaymentID) {
			t.Fatalf("ActivityResolved %+v", res)
		}
	})

	// Not happened: the worker died before calling the provider; a person
	// checks, finds nothing, and the engine retries with the same key.
	t.Run("not happened", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		run, key := pauseBeforePayment(t, e, "resolve-not-happened")
		e.wantPayments(0)
		e.resolve(client.ResolveRequest{WorkflowID: run.WorkflowID(), Resolution: history.ResolvedNotHappened,
			By: "clerk@acme", Reason: "no payment at the provider"})
		w2 := e.worker("w2", workerCfg{Class: history.SideEffect})
		if p := w2.WaitFields(t.Context(), "paid"); p[1] != key || p[2] != "2" {
			t.Fatalf("the retry printed %q, want attempt 2 with key %s", p, key)
		}
		out := result(t, run)
		ps := e.wantPayments(1)
		if len(out.Receipts) != 1 || out.Receipts[0] != ps[0] || ps[0].Key != key {
			t.Fatalf("outcome %+v, ledger %+v; want one payment under key %s", out, ps, key)
		}
		evs := e.history(run)
		if res := only[*history.ActivityResolved](t, evs); res.Resolution != history.ResolvedNotHappened || res.By != "clerk@acme" {
			t.Fatalf("ActivityResolved %+v", res)
		}
		_, ids := evs.scheduled("SendPayment")
		if st := evs.started(ids[0]); len(st) != 2 || st[1].Attempt != 2 {
			t.Fatalf("want attempts 1 and 2 of the same activity:\n%s", evs)
		}
	})

	// Fail: a person decides the payment must not go ahead; the workflow
	// sees a typed activity failure.
	t.Run("fail", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		run, _ := pauseBeforePayment(t, e, "resolve-fail")
		e.resolve(client.ResolveRequest{WorkflowID: run.WorkflowID(), Resolution: history.ResolvedFailed,
			By: "clerk@acme", Reason: "vendor disputes the invoice"})
		w2 := e.worker("w2", workerCfg{Class: history.SideEffect})
		out := result(t, run)
		if !out.ActivityError || out.FailureType != "ResolvedFailed" || out.FailureMessage != "vendor disputes the invoice" {
			t.Fatalf("outcome %+v, want an *sdk.ActivityError wrapping *sdk.ApplicationError{Type: ResolvedFailed}", out)
		}
		e.wantPayments(0)
		if p := w2.Lines("started"); len(p) != 0 {
			t.Fatalf("SendPayment ran again: %q", p)
		}
		res := only[*history.ActivityResolved](t, e.history(run))
		if res.Resolution != history.ResolvedFailed || res.Failure == nil || !res.Failure.NonRetryable {
			t.Fatalf("ActivityResolved %+v", res)
		}
	})
}

// TestAsyncCompletionAfterWorkerKilled: SendPayment pays, hands its task
// token over and returns ErrResultPending; its worker process is then
// killed (SIGKILL). Nothing of the attempt lived in it: the token holder
// completes the payment, the run finishes with that receipt, and the
// payment was made and recorded once (its intent was recorded before it
// ran, its completion is the ledger's).
func TestAsyncCompletionAfterWorkerKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w1 := e.worker("w1", workerCfg{Class: history.SideEffect, Pending: true})
	run := e.start("async-killed", inv)
	p := w1.WaitFields(t.Context(), "pending") // pending KEY TOKEN PAYMENT
	w1.Kill()
	tok, err := activities.ParseTaskToken(p[2])
	if err != nil {
		t.Fatal(err)
	}
	r, found, err := e.prov.find(p[1])
	if err != nil || !found || r.PaymentID != p[3] {
		t.Fatalf("the provider holds %+v (%v, %v), want %s", r, found, err, p[3])
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := e.c.CompleteActivity(ctx, client.ByToken(tok), r); err != nil {
		t.Fatalf("complete by token after the worker died: %v", err)
	}
	w2 := e.worker("w2", workerCfg{Class: history.SideEffect})
	out := result(t, run)
	if len(out.Receipts) != 1 || out.Receipts[0] != r {
		t.Fatalf("outcome %+v, want %+v", out, r)
	}
	e.wantPayments(1)
	if s := w2.Lines("started"); len(s) != 0 {
		t.Fatalf("SendPayment ran again: %q", s)
	}
	evs := e.history(run)
	_, ids := evs.scheduled("SendPayment")
	if len(ids) != 1 || len(evs.started(ids[0])) != 1 || evs.count(history.TypeActivityCompleted) < 1 ||
		evs.count(history.TypeActivityDuplicateDetected) != 0 {
		t.Fatalf("want one dispatch of SendPayment, completed once:\n%s", evs)
	}
	if err := e.c.CompleteActivity(ctx, client.ByToken(tok), Receipt{PaymentID: "other"}); !errors.Is(err, api.ErrStaleAttempt) {
		t.Fatalf("a second, different completion: %v, want ErrStaleAttempt", err)
	}
}
