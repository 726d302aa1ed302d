// Package payables is the founding article's accounts-payable agent,
// driven by a model: it reads an invoice, checks the budget, asks a person
// to approve the payment, pays (SideEffect, with a Reconcile lookup) and
// e-mails the vendor (Idempotent: the key goes to the mail provider, which
// deduplicates on it). The model is any OpenAI-compatible endpoint, or the
// scripted fake (Reply, which follows the task's invoice) that
// `examples/agent` and `cairn demo agent` use. The fake ledger holds
// INV-9 (ACME, $4,200), INV-3 (Initech, $980) and INV-7 (Globex, $12,500:
// over budget, so the agent declines to pay it).
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
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/filelock"
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
	// Stream streams the model's answers, so that `cairn workflow watch`
	// and the web UI show them as they come; nil streams (the default),
	// false does not.
	Stream *bool `json:",omitempty"`
}

// streamByDefaultChange versions streaming by default: a run recorded
// when an unset Task.Stream meant no streaming (the setting is part of
// the recorded model input) replays that way.
const streamByDefaultChange = "payables.stream-by-default"

// stream reports whether the agent streams the model's answers.
func (t Task) stream(ctx sdk.Context) bool {
	if t.Stream != nil {
		return *t.Stream
	}
	return sdk.GetVersion(ctx, streamByDefaultChange, sdk.DefaultVersion, 1) >= 1
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
		Stream:   task.stream(ctx),
	})
	return a.Run(ctx, "Pay invoice "+task.InvoiceID+".")
}

// Turns is the number of model calls the scripted model (Reply) takes to
// pay an invoice within budget: read it, check the budget, pay, e-mail
// the vendor, answer.
const Turns = 5

// Reply is the scripted model (for fakellm.NewFunc): it follows the task —
// the invoice id in the user's message — and the tools' results: it reads
// the invoice, checks the budget for its amount, pays it if it fits (a
// person approves the payment), e-mails the vendor, and sums up; it stops
// early, saying why, when the invoice cannot be read, is over budget, or
// the payment did not go through. Its answers depend only on the
// conversation, so a retried or resumed call gets the same one.
func Reply(req fakellm.Request) fakellm.Reply {
	msgs, err := req.Messages()
	if err != nil {
		return fakellm.Reply{Status: http.StatusBadRequest}
	}
	c := readConversation(msgs)
	switch {
	case c.invoiceID == "":
		return fakellm.Say(`The task names no invoice: say which, e.g. "Pay invoice INV-9."`)
	case len(c.results) == 0:
		return callTool("ReadInvoice", InvoiceRef{InvoiceID: c.invoiceID})
	case c.invoice.ID == "":
		return fakellm.Say(fmt.Sprintf("I could not read invoice %s (%s); nothing was paid.", c.invoiceID, c.results[0]))
	case len(c.results) == 1:
		return callTool("CheckBudget", BudgetQuery{InvoiceID: c.invoice.ID, Amount: c.invoice.Amount})
	case len(c.results) == 2:
		return pay(c)
	case len(c.results) == 3:
		if !strings.Contains(c.results[2], `"payment_id"`) {
			return fakellm.Say(fmt.Sprintf("%s was not paid: %s", c.invoice.ID, c.results[2]))
		}
		inv := c.invoice
		return callTool("EmailVendor", Email{To: inv.VendorEmail, Subject: inv.ID + " paid",
			Body: fmt.Sprintf("We paid %s ($%s).", inv.ID, dollars(inv.Amount)), InvoiceID: inv.ID})
	}
	inv := c.invoice
	return fakellm.Say(fmt.Sprintf("Paid $%s to %s for %s and e-mailed %s.", dollars(inv.Amount), inv.Vendor, inv.ID, inv.VendorEmail))
}

// pay asks for the payment when the budget answer allows it.
func pay(c conversation) fakellm.Reply {
	var b BudgetAnswer
	if err := json.Unmarshal([]byte(c.results[1]), &b); err != nil || !b.Approved {
		return fakellm.Say(fmt.Sprintf("%s ($%s to %s) is over this month's budget (%s); I did not pay it.",
			c.invoice.ID, dollars(c.invoice.Amount), c.invoice.Vendor, c.results[1]))
	}
	r := callTool("SendPayment", Payment{InvoiceID: c.invoice.ID, Vendor: c.invoice.Vendor, Amount: c.invoice.Amount})
	r.Content = "The invoice is within budget; paying it."
	return r
}

// conversation is what Reply reads from a request: the invoice the user
// named, the tools' results in order, and the invoice ReadInvoice returned.
type conversation struct {
	invoiceID string
	results   []string
	invoice   Invoice
}

func readConversation(msgs []map[string]any) conversation {
	var c conversation
	for _, m := range msgs {
		content, _ := m["content"].(string)
		switch m["role"] {
		case "user":
			c.invoiceID = invoiceIn(content)
		case "tool":
			c.results = append(c.results, content)
		}
	}
	if len(c.results) > 0 {
		_ = json.Unmarshal([]byte(c.results[0]), &c.invoice) // an error message leaves it empty
	}
	return c
}

// invoiceIn returns the first invoice id ("INV-…") in text.
func invoiceIn(text string) string {
	for _, f := range strings.Fields(text) {
		if w := strings.Trim(f, "?.,!;:\"'()"); strings.HasPrefix(w, "INV-") && len(w) > len("INV-") {
			return w
		}
	}
	return ""
}

// callTool is a reply asking for one tool call with args as JSON.
func callTool(name string, args any) fakellm.Reply {
	b, _ := json.Marshal(args) // plain structs: cannot fail
	return fakellm.CallTool(name, string(b))
}

// dollars writes n with a thousands separator: 4200 → "4,200".
func dollars(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Tools are the agent's tools, over a fake ledger, payment provider and
// mail provider kept as files in Dir (shared by worker processes: each
// read-modify-append of a file holds its lock, internal/filelock).
type Tools struct {
	Dir string
}

var invoices = map[string]Invoice{
	"INV-9": {ID: "INV-9", Vendor: "ACME", VendorEmail: "ap@acme.example", Amount: 4200},
	"INV-7": {ID: "INV-7", Vendor: "Globex", VendorEmail: "billing@globex.example", Amount: 12500},
	"INV-3": {ID: "INV-3", Vendor: "Initech", VendorEmail: "ap@initech.example", Amount: 980},
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
	var lines []string
	err := t.locked("payments.jsonl", func() error {
		var err error
		lines, err = t.lines("payments.jsonl")
		return err
	})
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
	var sent Sent
	err := t.locked("outbox.jsonl", func() error {
		lines, err := t.lines("outbox.jsonl")
		if err != nil {
			return err
		}
		for _, l := range lines {
			if strings.HasPrefix(l, key+" ") {
				sent = Sent{MessageID: strings.Fields(l)[1], Duplicate: true}
				return nil
			}
		}
		sent = Sent{MessageID: fmt.Sprintf("msg_%03d", len(lines)+1)}
		b, _ := json.Marshal(e)
		return t.writeLine("outbox.jsonl", key+" "+sent.MessageID+" "+string(b))
	})
	return sent, err
}

// Calls returns the tool calls logged so far ("Tool key" per line).
func (t *Tools) Calls() ([]string, error) { return t.lines("calls.log") }

// Payments returns the provider's payments.
func (t *Tools) Payments() ([]string, error) { return t.lines("payments.jsonl") }

// Outbox returns the messages sent.
func (t *Tools) Outbox() ([]string, error) { return t.lines("outbox.jsonl") }

func (t *Tools) logCall(tool, key string) { _ = t.appendLine("calls.log", tool+" "+key) }

// append appends the record numbered after the file's lines, holding the
// file's lock.
func (t *Tools) append(file string, record func(n int) any) error {
	return t.locked(file, func() error {
		lines, err := t.lines(file)
		if err != nil {
			return err
		}
		b, err := json.Marshal(record(len(lines)))
		if err != nil {
			return err
		}
		return t.writeLine(file, string(b))
	})
}

func (t *Tools) appendLine(file, line string) error {
	return t.locked(file, func() error { return t.writeLine(file, line) })
}

// locked runs fn holding file's lock, for the goroutines and the worker
// processes that share Dir.
func (t *Tools) locked(file string, fn func() error) error {
	return filelock.With(filepath.Join(t.Dir, file), fn)
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
