// Package scenario_test is a suite of user scenarios written only against
// Cairn's public API — sdk, sdk/client, sdk/testenv, worker, activities,
// activities/llm, activities/llm/fakellm, sdk/agent and the cairn binary —
// plus the engine/api and history types those packages' signatures return.
// It is what someone outside the team would try first: an agent with
// guarded tools against the fake model, approvals, budgets, concurrent
// tool calls, a workflow id reused, a confused model, a live stream.
//
//	go test -race ./test/scenario
//
// The scenarios run on testenv's in-memory store and `cairn server`'s
// data directory, or with CAIRN_TEST_STORE=postgres on a PostgreSQL
// schema of each test's own (internal/storetest and internal/testkit, the
// suites' kits, choose it; the scenarios do not know):
//
//	CAIRN_TEST_STORE=postgres go test -race ./test/scenario
package scenario_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// InvoiceQuery asks for an invoice.
type InvoiceQuery struct {
	ID string `json:"id" jsonschema:"description=the invoice id"`
}

// Invoice is what ReadInvoice returns.
type Invoice struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
	Vendor string `json:"vendor"`
}

// Payment asks the provider to pay an invoice.
type Payment struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int    `json:"amount"`
	// Memo is free text the model words differently every time: it must
	// not take part in the key (the business key is the invoice).
	Memo string `json:"memo,omitempty"`
}

// Email is a message to a vendor.
type Email struct {
	InvoiceID string `json:"invoice_id"`
	To        string `json:"to"`
	Body      string `json:"body"`
}

// Task is the agent workflow's input.
type Task struct {
	InvoiceID string
	// Approve makes SendPayment wait for a person.
	Approve bool
	Budget  history.Budget
	Stream  bool
	// ApprovalTimeout bounds the wait for an approval.
	ApprovalTimeout time.Duration
}

// Provider is a payment provider that does not deduplicate by itself but
// can be asked whether a payment under a key was made (for Reconcile), and
// a mail service that deduplicates on the idempotency key.
type Provider struct {
	mu sync.Mutex
	// failFirst makes the first payment time out after it took effect.
	failFirst bool
	// hold, when set, makes SendPayment announce itself on started and
	// wait for hold to close.
	hold, started chan struct{}
	// extra registers more on the scene's worker (withWorker).
	extra []func(registrar)
	// mailUnknown makes the first e-mail's outcome unknown.
	mailUnknown bool
	// noLookup registers SendPayment without its Reconcile lookup.
	noLookup  bool
	payments  map[string]string // idempotency key → payment id
	charges   int               // payments made
	payCalls  int               // SendPayment invocations
	lookups   int               // LookupPayment invocations
	mails     map[string]int    // idempotency key → deliveries asked
	mailCalls int
	keys      map[string][]string // tool → keys seen, in call order
	reads     int

	// gate, when set, makes ReadInvoice wait until CheckVendor started
	// (proof that the two run at once).
	gate chan struct{}
}

func newProvider() *Provider {
	return &Provider{payments: map[string]string{}, mails: map[string]int{}, keys: map[string][]string{}}
}

func (p *Provider) seen(tool, key string) {
	p.keys[tool] = append(p.keys[tool], key)
}

// ReadInvoice reads an invoice (Read).
func (p *Provider) ReadInvoice(ctx context.Context, q InvoiceQuery) (Invoice, error) {
	p.mu.Lock()
	p.reads++
	gate := p.gate
	p.mu.Unlock()
	if q.ID == "INV-404" {
		return Invoice{}, sdk.NewNonRetryableError("invoice INV-404 not found", "NotFound")
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return Invoice{}, fmt.Errorf("CheckVendor never started while ReadInvoice ran: %w", ctx.Err())
		}
	}
	return Invoice{ID: q.ID, Amount: 4200, Vendor: "acme"}, nil
}

// CheckVendor checks a vendor (Read); it opens the gate ReadInvoice waits on.
func (p *Provider) CheckVendor(_ context.Context, q InvoiceQuery) (string, error) {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	if gate != nil {
		close(gate)
	}
	return "vendor ok for " + q.ID, nil
}

// SendPayment pays (SideEffect, business key: the invoice).
func (p *Provider) SendPayment(ctx context.Context, pay Payment) (string, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	p.mu.Lock()
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		p.started <- struct{}{}
		<-hold // the payment is slow: the test lets it go
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.payCalls++
	p.seen("SendPayment", key)
	p.charges++
	id := fmt.Sprintf("pay_%03d", p.charges)
	p.payments[key] = id
	if p.failFirst && p.charges == 1 {
		return "", fmt.Errorf("provider timed out after the request left: %w", activities.ErrOutcomeUnknown)
	}
	return id, nil
}

// LookupPayment is SendPayment's Reconcile lookup.
func (p *Provider) LookupPayment(ctx context.Context, pay Payment) (string, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lookups++
	p.seen("LookupPayment", key)
	if id, ok := p.payments[key]; ok {
		return id, nil
	}
	return "", activities.ErrNotHappened
}

// EmailVendor mails a vendor (Idempotent: the mail service deduplicates on
// the key).
func (p *Provider) EmailVendor(ctx context.Context, e Email) (string, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mailCalls++
	p.seen("EmailVendor", key)
	p.mails[key]++
	if p.mailUnknown && p.mailCalls == 1 {
		return "", fmt.Errorf("mail service timed out: %w", activities.ErrOutcomeUnknown)
	}
	return "sent to " + e.To, nil
}

func (p *Provider) snapshot() (payCalls, charges, lookups, mailCalls int, keys map[string][]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := map[string][]string{}
	for t, v := range p.keys {
		k[t] = append([]string(nil), v...)
	}
	return p.payCalls, p.charges, p.lookups, p.mailCalls, k
}

// Payables is the agent under test: workflow code, public API only.
func Payables(ctx sdk.Context, task Task) (agent.Result, error) {
	var p *Provider // method values name the activities
	var payOpts []agent.ToolOption
	if task.Approve {
		payOpts = append(payOpts, agent.RequireApproval())
	}
	a := agent.New(ctx, agent.Options{
		Model:  "fake-1",
		System: "You are an accounts-payable agent.",
		Tools: []agent.Tool{
			agent.NewTool(p.ReadInvoice, "Read an invoice."),
			agent.NewTool(p.CheckVendor, "Check a vendor."),
			agent.NewTool(p.SendPayment, "Pay an invoice.", payOpts...),
			agent.NewTool(p.EmailVendor, "E-mail a vendor."),
		},
		Budget:          task.Budget,
		Stream:          task.Stream,
		ApprovalTimeout: task.ApprovalTimeout,
	})
	return a.Run(ctx, "Pay invoice "+task.InvoiceID+".")
}

// registrar is what a worker registers on.
type registrar interface {
	RegisterWorkflow(any, ...sdk.RegisterOptions) error
	RegisterActivity(any, ...activities.Options) error
}

// withWorker returns a setup that registers more on the scene's worker
// before it starts.
func withWorker(f func(registrar)) func(*Provider) {
	return func(p *Provider) { p.extra = append(p.extra, f) }
}

// scene is one scenario's world: a fake model, a provider, an env.
type scene struct {
	env   *testenv.Env
	prov  *Provider
	model *fakellm.Server
}

// register declares the agent's activities on a worker, the way the docs
// show (docs/agents.md): the side-effecting set in one place.
func register(t *testing.T, w registrar, m *llm.Model, p *Provider) {
	t.Helper()
	must(t, w.RegisterWorkflow(Payables))
	must(t, m.Register(w))
	must(t, w.RegisterActivity(p.ReadInvoice))
	must(t, w.RegisterActivity(p.CheckVendor))
	payOpts := activities.Options{Effect: activities.SideEffect,
		BusinessKey: func(pay Payment) string { return pay.InvoiceID }, Reconcile: p.LookupPayment}
	if p.noLookup {
		payOpts.Reconcile = nil
	}
	must(t, w.RegisterActivity(p.SendPayment, payOpts))
	must(t, w.RegisterActivity(p.EmailVendor, activities.Options{Effect: activities.Idempotent,
		BusinessKey: func(e Email) string { return e.InvoiceID + "/" + e.To }}))
}

func newScene(t *testing.T, model *fakellm.Server, setup ...func(*Provider)) *scene {
	t.Helper()
	hs := httptest.NewServer(model)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", Model: "fake-1"})
	must(t, err)
	env := testenv.New(t, envOptions(t))
	p := newProvider()
	for _, f := range setup {
		f(p)
	}
	register(t, env.Worker, m, p)
	for _, f := range p.extra {
		f(env.Worker)
	}
	env.Start()
	return &scene{env: env, prov: p, model: model}
}

// envOptions are a scene's testenv options: its default store, or with
// CAIRN_TEST_STORE=postgres a schema of the test's own, every shard of it
// served by the env's engine.
func envOptions(t *testing.T) testenv.Options {
	var opts testenv.Options
	if st, owner := storetest.Embedded(t, "scenario"); st != nil {
		opts.Engine.Store, opts.Engine.Shards = st, owner
	}
	return opts
}

func (s *scene) start(t *testing.T, ctx context.Context, id string, task Task) client.Run {
	t.Helper()
	run, err := s.env.Client.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: s.env.TaskQueue()}, Payables, task)
	must(t, err)
	return run
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitEvent follows a run's history (long-polling) until match holds for
// an event; a failed workflow task or the run closing first fails the test.
func waitEvent(t *testing.T, ctx context.Context, c client.Client, id, runID string, what string, match func(history.Event) bool) history.Event {
	t.Helper()
	return testkit.WaitEvent(ctx, t, c.Service(), id, runID, what, func(ev history.Event) bool {
		if match(ev) {
			return true
		}
		if f, ok := ev.Attrs.(*history.WorkflowTaskFailed); ok {
			t.Fatalf("waiting for %s: workflow task failed: %s: %s", what, f.Cause, f.Failure.Message)
		}
		return false
	})
}

func isMarker(name string) func(history.Event) bool {
	return func(ev history.Event) bool {
		m, ok := ev.Attrs.(*history.MarkerRecorded)
		return ok && m.Name == name
	}
}

// toolMessages returns the transcript's tool messages: (name, content).
func toolMessages(t *testing.T, ctx context.Context, c client.Client, id, runID string) [][2]string {
	t.Helper()
	tr, err := c.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id, RunID: runID})
	must(t, err)
	var out [][2]string
	for _, it := range tr.Items {
		if it.Message != nil && it.Message.Role == "tool" {
			out = append(out, [2]string{it.Message.Name, it.Message.Content})
		}
	}
	return out
}

// toolCalls returns the transcript's tool-call items by tool name.
func toolCalls(t *testing.T, ctx context.Context, c client.Client, id, runID string) map[string][]api.ToolCallInfo {
	t.Helper()
	tr, err := c.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id, RunID: runID})
	must(t, err)
	out := map[string][]api.ToolCallInfo{}
	for _, it := range tr.Items {
		if it.ToolCall != nil {
			out[it.ToolCall.Name] = append(out[it.ToolCall.Name], *it.ToolCall)
		}
	}
	return out
}

// requestToolMessages decodes the tool messages of the fake model's
// request number seq: (tool_call_id, content), in order.
func requestToolMessages(t *testing.T, r fakellm.Request) [][2]string {
	t.Helper()
	msgs, err := r.Messages()
	must(t, err)
	var out [][2]string
	for _, m := range msgs {
		if m["role"] == "tool" {
			id, _ := m["tool_call_id"].(string)
			content, _ := m["content"].(string)
			out = append(out, [2]string{id, content})
		}
	}
	return out
}
