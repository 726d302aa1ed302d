// Package migrate_test moves a data directory made by real workflows into
// PostgreSQL (history/storecopy, as `cairn migrate` does) and checks that
// the user keeps every run and every ledger entry: identical histories
// through the API, a paid action deduplicated from the migrated ledger, an
// open run and a paused one continuing to completion on the new store.
//
//	go test ./test/migrate
package migrate_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

func TestMain(m *testing.M) { testkit.Main(m, pgtest.Done) }

const queue = "shop"

// Order is what Shop is asked to do.
type Order struct {
	Invoice string
	Amount  int
	// Approve makes Shop wait for the signal "approve" before it charges.
	Approve bool
}

// Shop charges an order, after an approval when it asks for one.
func Shop(ctx sdk.Context, o Order) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	if o.Approve {
		sdk.GetSignalChannel[string](ctx, "approve").Receive(ctx)
	}
	return sdk.ExecuteActivityByName[string](ctx, "Charge", o).Get(ctx)
}

// Query asks the clerk's tool for an invoice.
type Query struct {
	ID string `json:"id" jsonschema:"description=the invoice id"`
}

// Clerk is an agent with one read tool, a transcript and a budget.
func Clerk(ctx sdk.Context, task string) (agent.Result, error) {
	var v *vendor // method values name the activities
	a := agent.New(ctx, agent.Options{
		Model:  "fake-1",
		System: "You are a clerk who looks invoices up.",
		Tools:  []agent.Tool{agent.NewTool(v.Lookup, "Look an invoice up.")},
		Budget: history.Budget{MaxTurns: 10, MaxTokens: 1_000_000},
	})
	return a.Run(ctx, task)
}

// clerkScript is what the fake model answers the clerk.
var clerkScript = fakellm.Script{
	fakellm.CallTool("Lookup", `{"id":"INV-1"}`),
	fakellm.CallTool("Lookup", `{"id":"INV-2"}`),
	fakellm.Say("INV-1 and INV-2 are both paid."),
}

// vendor charges (a SideEffect keyed on the invoice, no Reconcile: an
// unknown outcome pauses the run) and looks invoices up.
type vendor struct {
	mu      sync.Mutex
	charges map[string]int // idempotency key → charges made
	unknown map[string]bool
	calls   int
}

func newVendor(unknown ...string) *vendor {
	v := &vendor{charges: map[string]int{}, unknown: map[string]bool{}}
	for _, inv := range unknown {
		v.unknown[inv] = true
	}
	return v
}

// Charge charges an order; for an invoice in unknown it cannot tell.
func (v *vendor) Charge(ctx context.Context, o Order) (string, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	v.mu.Lock()
	defer v.mu.Unlock()
	v.calls++
	v.charges[key]++
	if v.unknown[o.Invoice] {
		return "", fmt.Errorf("the vendor timed out after the request left: %w", activities.ErrOutcomeUnknown)
	}
	return "charge-" + o.Invoice, nil
}

// Lookup reads an invoice, at some length (the transcript grows).
func (v *vendor) Lookup(_ context.Context, q Query) (string, error) {
	return fmt.Sprintf("invoice %s: paid in full on 2026-11-30, amount 4200 EUR, vendor acme, reference %s-REF", q.ID, q.ID), nil
}

func (v *vendor) chargeCalls() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.calls
}

// node is an engine on a store, with a client and a worker.
type node struct {
	eng  *engine.Engine
	c    client.Client
	stop func()
}

// boot opens an engine on st and runs a worker with v and the fake model.
func boot(t *testing.T, st history.Store, v *vendor, model *fakellm.Server) *node {
	t.Helper()
	eng, err := engine.Open(engine.Options{Store: st, PollTimeout: 5 * time.Second,
		Defaults: engine.Defaults{StickyTimeout: 100 * time.Millisecond}})
	if err != nil {
		t.Fatalf("open the engine: %v", err)
	}
	n := &node{eng: eng, c: client.NewLocal(eng, client.Options{Identity: "migrate-test"})}
	n.stop = runWorker(t, n.c, v, model)
	return n
}

// down stops the worker and closes the engine (not the store).
func (n *node) down(t *testing.T) {
	n.stop()
	if err := n.eng.Close(); err != nil {
		t.Fatalf("close the engine: %v", err)
	}
}

func runWorker(t *testing.T, c client.Client, v *vendor, model *fakellm.Server) (stop func()) {
	t.Helper()
	hs := httptest.NewServer(model)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", Model: "fake-1"})
	if err != nil {
		t.Fatal(err)
	}
	quiet := zerolog.Nop()
	w, err := worker.New(c, worker.Options{TaskQueue: queue, GracefulStop: time.Second, Logger: &quiet})
	if err != nil {
		t.Fatal(err)
	}
	err = errors.Join(w.RegisterWorkflow(Shop), w.RegisterWorkflow(Clerk), m.Register(w), w.RegisterActivity(v.Lookup),
		w.RegisterActivity(v.Charge, activities.Options{Name: "Charge", Effect: activities.SideEffect,
			BusinessKey: func(o Order) string { return o.Invoice }}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("worker: %v", err)
			}
			hs.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
