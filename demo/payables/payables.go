// Package payables is the founding article's accounts-payable agent,
// driven by a model: it reads an invoice, checks the budget, asks a person
// to approve the payment, pays (SideEffect, with a Reconcile lookup) and
// e-mails the vendor (Idempotent: the key goes to the mail provider, which
// deduplicates on it). The model is any OpenAI-compatible endpoint, or the
// scripted fake (Script) that `examples/agent` and `cairn demo agent` use.
//
//	t := &payables.Tools{Dir: dir}                   // the fake provider's ledger and outbox
//	m, _ := llm.New(llm.Config{BaseURL: url, Model: payables.FakeModel})
//	err := payables.Register(w, t, m)                // workflow, model call, tools with their effect classes
//	run, _ := c.StartWorkflow(ctx, client.StartOptions{ID: "pay-INV-9", TaskQueue: payables.TaskQueue}, payables.PayInvoiceAgent, payables.Task{InvoiceID: "INV-9"})
//	c.SignalWorkflow(ctx, "pay-INV-9", "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ap-clerk"})
//
// Every tool appends a line to Dir/calls.log when it runs, so a caller can
// check that a resumed run called no tool twice.
package payables

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
)

// TaskQueue is the agent's task queue.
const TaskQueue = "payables"

// FakeModel is the model name the scripted fake answers as.
const FakeModel = "fake-ap-1"

// Task is what the agent is asked to do.
type Task struct {
	InvoiceID string
	// Model overrides the model name (a real endpoint's).
	Model string `json:",omitempty"`
	// Stream streams the model's answers.
	Stream bool `json:",omitempty"`
}

// InvoiceRef names an invoice.
type InvoiceRef struct {
	InvoiceID string `json:"invoice_id" jsonschema:"description=The invoice id, e.g. INV-9"`
}

// Invoice is an invoice as the ledger holds it.
type Invoice struct {
	ID          string `json:"id"`
	Vendor      string `json:"vendor"`
	VendorEmail string `json:"vendor_email"`
	Amount      int    `json:"amount_usd"`
}

// BudgetQuery asks whether an amount fits the month's budget.
type BudgetQuery struct {
	InvoiceID string `json:"invoice_id"`
	Amount    int    `json:"amount_usd"`
}

// BudgetAnswer is CheckBudget's answer.
type BudgetAnswer struct {
	Approved  bool `json:"within_budget"`
	Remaining int  `json:"remaining_usd"`
}

// Payment is a payment instruction.
type Payment struct {
	InvoiceID string `json:"invoice_id"`
	Vendor    string `json:"vendor"`
	Amount    int    `json:"amount_usd"`
}

// Receipt is the payment provider's answer.
type Receipt struct {
	PaymentID      string `json:"payment_id"`
	InvoiceID      string `json:"invoice_id"`
	Amount         int    `json:"amount_usd"`
	IdempotencyKey string `json:"idempotency_key"`
}

// Email is a message to a vendor.
type Email struct {
	To        string `json:"to"`
	Subject   string `json:"subject"`
	Body      string `json:"body"`
	InvoiceID string `json:"invoice_id"`
}

// Sent is the mail provider's answer.
type Sent struct {
	MessageID string `json:"message_id"`
	Duplicate bool   `json:"deduplicated,omitempty"`
}

// System is the agent's system prompt.
const System = `You are an accounts-payable agent. For the invoice you are given: read it, check the budget,
pay it if it is within budget (a person approves each payment), then e-mail the vendor that it was paid.
Use the tools; answer with a one-line summary when done.`

// PayInvoiceAgent is the agent.
func PayInvoiceAgent(ctx sdk.Context, task Task) (agent.Result, error) {
	var t *Tools // method values name the activities; they run on the worker's Tools
	model := task.Model
	if model == "" {
		model = FakeModel
	}
	a := agent.New(ctx, agent.Options{
		Model:  model,
		System: System,
		Tools: []agent.Tool{
			agent.NewTool(t.ReadInvoice, "Read an invoice from the ledger."),
			agent.NewTool(t.CheckBudget, "Check whether an amount fits this month's budget."),
			agent.NewTool(t.SendPayment, "Pay an invoice. A person approves every payment.", agent.RequireApproval()),
			agent.NewTool(t.EmailVendor, "E-mail a vendor."),
		},
		MaxTurns: 12,
		Budget:   history.Budget{MaxTurns: 12, MaxTokens: 200_000},
		Stream:   task.Stream,
	})
	return a.Run(ctx, "Pay invoice "+task.InvoiceID+".")
}

// Script is the fake model's part: one answer per turn.
func Script() fakellm.Script {
	return fakellm.Script{
		fakellm.CallTool("ReadInvoice", `{"invoice_id":"INV-9"}`),
		fakellm.CallTool("CheckBudget", `{"invoice_id":"INV-9","amount_usd":4200}`),
		{Content: "The invoice is within budget; paying it.", ToolCalls: []fakellm.ToolCall{{Name: "SendPayment",
			Arguments: `{"invoice_id":"INV-9","vendor":"ACME","amount_usd":4200}`}}},
		fakellm.CallTool("EmailVendor", `{"to":"ap@acme.example","subject":"INV-9 paid","body":"We paid INV-9 ($4,200).","invoice_id":"INV-9"}`),
		fakellm.Say("Paid $4,200 to ACME for INV-9 and e-mailed ap@acme.example."),
	}
}

// Tools are the agent's tools, over a fake ledger, payment provider and
// mail provider kept as files in Dir (shared by worker processes).
type Tools struct {
	Dir string
	mu  sync.Mutex
}

var invoices = map[string]Invoice{
	"INV-9": {ID: "INV-9", Vendor: "ACME", VendorEmail: "ap@acme.example", Amount: 4200},
	"INV-7": {ID: "INV-7", Vendor: "Globex", VendorEmail: "billing@globex.example", Amount: 12500},
}

// ReadInvoice reads an invoice (Read).
func (t *Tools) ReadInvoice(_ context.Context, r InvoiceRef) (Invoice, error) {
	t.logCall("ReadInvoice", r.InvoiceID)
	inv, ok := invoices[r.InvoiceID]
	if !ok {
		return Invoice{}, sdk.NewNonRetryableError("no invoice "+r.InvoiceID, "NoSuchInvoice")
	}
	return inv, nil
}

// CheckBudget approves up to $10,000 (Read).
func (t *Tools) CheckBudget(_ context.Context, q BudgetQuery) (BudgetAnswer, error) {
	t.logCall("CheckBudget", q.InvoiceID)
	return BudgetAnswer{Approved: q.Amount <= 10000, Remaining: 10000 - q.Amount}, nil
}

// SendPayment pays (SideEffect, keyed on the invoice): the provider keeps
// each payment with the idempotency key it was sent.
func (t *Tools) SendPayment(ctx context.Context, p Payment) (Receipt, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	t.logCall("SendPayment", key)
	var r Receipt
	err := t.append("payments.jsonl", func(n int) any {
		r = Receipt{PaymentID: fmt.Sprintf("pay_%03d", n+1), InvoiceID: p.InvoiceID, Amount: p.Amount, IdempotencyKey: key}
		return r
	})
	return r, err
}

// LookupPayment is SendPayment's Reconcile: did a payment with the key
// reach the provider?
func (t *Tools) LookupPayment(ctx context.Context, p Payment) (Receipt, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	lines, err := t.lines("payments.jsonl")
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %v", activities.ErrOutcomeUnknown, err)
	}
	for _, l := range lines {
		var r Receipt
		if json.Unmarshal([]byte(l), &r) == nil && r.IdempotencyKey == key {
			return r, nil
		}
	}
	return Receipt{}, activities.ErrNotHappened
}

// EmailVendor sends a message (Idempotent): the mail provider delivers one
// message per Idempotency-Key and answers a repeat with the first.
func (t *Tools) EmailVendor(ctx context.Context, e Email) (Sent, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	t.logCall("EmailVendor", key)
	lines, err := t.lines("outbox.jsonl")
	if err != nil {
		return Sent{}, err
	}
	for _, l := range lines {
		if strings.HasPrefix(l, key+" ") {
			return Sent{MessageID: strings.Fields(l)[1], Duplicate: true}, nil
		}
	}
	id := fmt.Sprintf("msg_%03d", len(lines)+1)
	b, _ := json.Marshal(e)
	if err := t.appendLine("outbox.jsonl", key+" "+id+" "+string(b)); err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: id}, nil
}

// Calls returns the tool calls logged so far ("Tool key" per line).
func (t *Tools) Calls() ([]string, error) { return t.lines("calls.log") }

// Payments returns the provider's payments.
func (t *Tools) Payments() ([]string, error) { return t.lines("payments.jsonl") }

// Outbox returns the messages sent.
func (t *Tools) Outbox() ([]string, error) { return t.lines("outbox.jsonl") }

func (t *Tools) logCall(tool, key string) { _ = t.appendLine("calls.log", tool+" "+key) }

func (t *Tools) append(file string, record func(n int) any) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines, err := t.lines(file)
	if err != nil {
		return err
	}
	b, err := json.Marshal(record(len(lines)))
	if err != nil {
		return err
	}
	return t.writeLine(file, string(b))
}

func (t *Tools) appendLine(file, line string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.writeLine(file, line)
}

func (t *Tools) writeLine(file, line string) error {
	f, err := os.OpenFile(filepath.Join(t.Dir, file), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		return err
	}
	return f.Sync()
}

func (t *Tools) lines(file string) ([]string, error) {
	f, err := os.Open(filepath.Join(t.Dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out, sc.Err()
}

// Registrar is what workers and replayers offer.
type Registrar interface {
	RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error
	RegisterActivity(fn any, opts ...activities.Options) error
}

// Register registers the agent, the model call (m may be nil for a
// replayer) and the tools with their effect classes — the side-effecting
// set, reviewable in one place.
func Register(r Registrar, t *Tools, m *llm.Model) error {
	if t == nil {
		t = &Tools{}
	}
	model := func() error {
		if m == nil {
			return r.RegisterActivity(noModel, activities.Options{Name: llm.ActivityName, Metered: true})
		}
		return m.Register(r)
	}
	return errors.Join(
		r.RegisterWorkflow(PayInvoiceAgent),
		model(),
		r.RegisterActivity(t.ReadInvoice),
		r.RegisterActivity(t.CheckBudget),
		r.RegisterActivity(t.SendPayment, activities.Options{Effect: activities.SideEffect,
			BusinessKey: func(p Payment) string { return p.InvoiceID }, Reconcile: t.LookupPayment}),
		r.RegisterActivity(t.EmailVendor, activities.Options{Effect: activities.Idempotent,
			BusinessKey: func(e Email) string { return e.InvoiceID + "/" + e.To }}),
	)
}

// noModel stands for the model call where none runs (a replayer).
func noModel(context.Context, history.Payload) (history.ModelResult, error) {
	return history.ModelResult{}, errors.New("payables: no model in a replayer")
}
