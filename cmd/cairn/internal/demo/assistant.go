package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
)

// The invoice assistant is a small agent for `cairn dev --demo`, made with
// the agent kit like any real one: the agent loop (sdk/agent), the
// model-call activity (activities/llm, on openai-go) against an
// OpenAI-compatible endpoint, and one tool. The endpoint is the scripted
// fake (activities/llm/fakellm) served in process by AssistantModel: no
// network, no key, the same answer every time, streamed a few words at a
// time. Asked about an invoice, the model looks it up with the tool and
// answers from what the tool said.
//
//	srv, _ := demo.ServeAssistantModel(150 * time.Millisecond) // the fake endpoint, on loopback
//	defer srv.Close()
//	m, _ := llm.New(llm.Config{BaseURL: srv.URL, Model: demo.AssistantModel})
//	err := demo.RegisterAssistant(w, &demo.Assistants{}, m)
//	c.StartWorkflow(ctx, opts, demo.Assistant, demo.Question{Text: "Can we pay INV-5?"})

// AssistantModel is the fake model's name (priced in `cairn dev`).
const AssistantModel = "fake-gpt-mini"

// AskSignal carries a question to an Assistant started without one.
const AskSignal = "ask"

// LookupInvoiceTool is the assistant's tool (and its activity's name).
const LookupInvoiceTool = "lookup_invoice"

const assistantSystem = "You are the accounts-payable assistant. Use lookup_invoice before you answer about an invoice."

// Question is an Assistant's input.
type Question struct {
	// Text is the question; empty waits for the first AskSignal.
	Text string
	// Budget bounds the run's model calls (the agent loop sets it); a run
	// that uses it up pauses until a person raises it or stops it.
	Budget history.Budget
}

// Assistant answers one question about an invoice.
func Assistant(ctx sdk.Context, q Question) (string, error) {
	if q.Text == "" {
		q.Text = sdk.GetSignalChannel[string](ctx, AskSignal).Receive(ctx)
	}
	var a *Assistants // method values name the activities
	retry := &sdk.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3}
	ag := agent.New(ctx, agent.Options{
		Model:        AssistantModel,
		System:       assistantSystem,
		Tools:        []agent.Tool{agent.NewTool(a.LookupInvoice, "Find an invoice by id", agent.Named(LookupInvoiceTool))},
		MaxTurns:     4,
		Budget:       q.Budget,
		Stream:       true,
		ModelOptions: &sdk.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry},
		ToolOptions:  &sdk.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry},
	})
	res, err := ag.Run(ctx, q.Text)
	return res.Final, err
}

// Assistants holds the assistant's tool.
type Assistants struct{}

// InvoiceQuery is the tool's input.
type InvoiceQuery struct {
	Invoice string `json:"invoice" jsonschema:"description=The invoice id, e.g. INV-5"`
}

// InvoiceRecord is what the tool answers.
type InvoiceRecord struct {
	ID     string `json:"id"`
	Vendor string `json:"vendor"`
	Amount int    `json:"amount_usd"`
	Due    string `json:"due"`
}

// LookupInvoice is the assistant's tool (Read): the provider's invoice.
func (a *Assistants) LookupInvoice(_ context.Context, q InvoiceQuery) (InvoiceRecord, error) {
	if q.Invoice == "" {
		return InvoiceRecord{}, sdk.NewNonRetryableError(`lookup_invoice wants {"invoice": ID}`, "BadArguments")
	}
	amount := 980
	if strings.HasSuffix(q.Invoice, "7") {
		amount = 25000
	}
	return InvoiceRecord{ID: q.Invoice, Vendor: "Hooli", Amount: amount, Due: "2026-12-15"}, nil
}

// Registrar is what workers and replayers offer.
type Registrar interface {
	RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error
	RegisterActivity(fn any, opts ...activities.Options) error
}

// RegisterAssistant registers the assistant, its model call (m: an
// llm.Model pointed at the fake, or at a real endpoint; nil for a
// replayer, which runs no activity but needs their declarations) and its
// tool.
func RegisterAssistant(r Registrar, a *Assistants, m *llm.Model) error {
	if a == nil {
		a = &Assistants{}
	}
	model := func() error {
		if m == nil {
			return r.RegisterActivity(noModel, activities.Options{Name: llm.ActivityName, Metered: true})
		}
		return m.Register(r)
	}
	return errors.Join(
		r.RegisterWorkflow(Assistant),
		model(),
		r.RegisterActivity(a.LookupInvoice, activities.Options{Name: LookupInvoiceTool}),
	)
}

// noModel stands for the model call where none runs (a replayer).
func noModel(context.Context, history.Payload) (history.Payload, error) {
	return history.Payload{}, errors.New("demo: no model in a replayer")
}

// AssistantReply is the scripted model: the first turn asks for the
// invoice the question names, the next answers from what the tool said.
func AssistantReply(req fakellm.Request) fakellm.Reply {
	msgs, err := req.Messages()
	if err != nil {
		return fakellm.Reply{Status: http.StatusBadRequest}
	}
	var question, tool string
	for _, m := range msgs {
		content, _ := m["content"].(string)
		switch m["role"] {
		case "user":
			question = content
		case "tool":
			tool = content
		}
	}
	if tool == "" {
		id := "INV-5"
		for _, f := range strings.Fields(question) {
			if w := strings.Trim(f, "?.,!"); strings.HasPrefix(w, "INV-") {
				id = w
			}
		}
		args, _ := json.Marshal(InvoiceQuery{Invoice: id}) // a plain struct: cannot fail
		return fakellm.Reply{Content: "Let me look up " + id + " first.",
			ToolCalls: []fakellm.ToolCall{{ID: "call_1", Name: LookupInvoiceTool, Arguments: string(args)}}}
	}
	var inv InvoiceRecord
	if err := json.Unmarshal([]byte(tool), &inv); err != nil || inv.ID == "" {
		return fakellm.Say("I could not read the invoice: " + tool)
	}
	verdict := "it is within the $10,000 budget, so it can be paid"
	if inv.Amount > 10000 {
		verdict = "it is over the $10,000 budget: a person must approve it"
	}
	return fakellm.Say(fmt.Sprintf("%s is $%s to %s, due %s; %s.", inv.ID, dollars(inv.Amount), inv.Vendor, inv.Due, verdict))
}

// ModelServer is the assistant's fake model endpoint, served on loopback.
type ModelServer struct {
	// URL is the endpoint's base URL (llm.Config.BaseURL).
	URL string
	srv *http.Server
}

// ServeAssistantModel serves the scripted model (AssistantReply) on a free
// loopback port; chunkDelay spaces its streamed pieces so that a person —
// or a browser test — sees an answer arrive.
func ServeAssistantModel(chunkDelay time.Duration) (*ModelServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("demo: the assistant's model: %w", err)
	}
	fake := fakellm.NewFunc(AssistantReply)
	fake.ChunkDelay = chunkDelay
	s := &ModelServer{URL: "http://" + ln.Addr().String() + "/v1", srv: &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the endpoint.
func (s *ModelServer) Close() error { return s.srv.Close() }
