package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// The invoice assistant is a small agent for `cairn dev --demo`: asked
// about an invoice, its model looks the invoice up with a tool and answers.
// The model is scripted (FakeModel): no network, the same answer every
// time, streamed token by token. Its transcript is recorded the agent
// kit's way — each model call's input a transcript chunk on top of the
// previous call's, tool calls as "tool:<turn>:<call id>" activities — so
// the web UI's conversation page shows it like any agent's.

// AssistantModel is the fake model's name (priced in `cairn dev`).
const AssistantModel = "fake-gpt-mini"

// AskSignal carries a question to an Assistant started without one.
const AskSignal = "ask"

const assistantSystem = "You are the accounts-payable assistant. Use lookup_invoice before you answer about an invoice."

// Assistant answers one question about an invoice (its input, or the
// first AskSignal when the input is empty).
func Assistant(ctx sdk.Context, question string) (string, error) {
	if question == "" {
		question = sdk.GetSignalChannel[string](ctx, AskSignal).Receive(ctx)
	}
	var a *Assistants // method values name the activities
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumAttempts: 3}})
	entries := []history.TranscriptEntry{
		{Config: &history.ChatConfig{Model: AssistantModel, Stream: true, Tools: []history.ToolSpec{{Name: "lookup_invoice",
			Description: "Find an invoice by id", Parameters: `{"type":"object","properties":{"invoice":{"type":"string"}},"required":["invoice"]}`}}}},
		{Message: &history.ChatMessage{Role: "system", Content: assistantSystem}},
		{Message: &history.ChatMessage{Role: "user", Content: question}},
	}
	prev := history.RootRef // the chunk the next call's transcript extends
	for turn := 1; turn <= 4; turn++ {
		data, err := history.AppendTranscript(nil, entries...)
		if err != nil {
			return "", err
		}
		in := history.Payload{Encoding: history.EncodingTranscript, Ref: prev, Data: data}
		prev = in.StoredRef()
		res, err := sdk.ExecuteActivity(ctx, a.Chat, in).Get(ctx)
		if err != nil {
			return "", err
		}
		msg := res.Message
		entries = []history.TranscriptEntry{{Message: &msg}}
		if len(msg.ToolCalls) == 0 {
			return msg.Content, nil
		}
		for _, tc := range msg.ToolCalls {
			tctx := sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute,
				ActivityID: fmt.Sprintf("%s%d:%s", history.ToolActivityPrefix, turn, tc.ID)})
			out, err := sdk.ExecuteActivity(tctx, a.LookupInvoice, tc.Arguments).Get(ctx)
			if err != nil {
				out = "error: " + err.Error()
			}
			entries = append(entries, history.TranscriptEntry{Message: &history.ChatMessage{Role: "tool", ToolCallID: tc.ID, Content: out}})
		}
	}
	return "", sdk.NewNonRetryableError("the model kept asking for tools", "TooManyTurns")
}

// Assistants holds the assistant's activities.
type Assistants struct {
	// TokenDelay paces the fake model's streamed tokens (default 60 ms), so
	// that a person — or a browser test — sees the answer arrive.
	TokenDelay time.Duration
}

// Chat is the model call: metered, streamed, its input the transcript.
func (a *Assistants) Chat(ctx context.Context, in history.Payload) (history.ModelResult, error) {
	p, err := history.Resolve(ctx, activities.Chunks(ctx), in)
	if err != nil {
		return history.ModelResult{}, err
	}
	entries, err := history.DecodeTranscript(p.Data)
	if err != nil {
		return history.ModelResult{}, err
	}
	msg := FakeModel(entries)
	delay := a.TokenDelay
	if delay == 0 {
		delay = 60 * time.Millisecond
	}
	words := strings.SplitAfter(msg.Content, " ")
	for _, w := range words {
		activities.Stream(ctx, activities.StreamDelta{Kind: "text", Text: w})
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return history.ModelResult{}, ctx.Err()
		}
	}
	for i, tc := range msg.ToolCalls {
		activities.Stream(ctx, activities.StreamDelta{Kind: "tool_call", ToolCallIndex: i, ToolCallID: tc.ID, ToolName: tc.Name, Text: tc.Arguments})
	}
	u := history.Usage{Model: AssistantModel, PromptTokens: int64(len(p.Data) / 4), CompletionTokens: int64(len(words) + 8*len(msg.ToolCalls))}
	activities.RecordUsage(ctx, u)
	return history.ModelResult{Message: msg, Usage: u, Model: AssistantModel, FinishReason: "stop"}, nil
}

// FakeModel answers a transcript: first it asks for the invoice, then it
// answers from what the tool said.
func FakeModel(entries []history.TranscriptEntry) history.ChatMessage {
	var question, tool string
	for _, e := range entries {
		if m := e.Message; m != nil {
			switch m.Role {
			case "user":
				question = m.Content
			case "tool":
				tool = m.Content
			}
		}
	}
	if tool == "" {
		id := "INV-5"
		for _, f := range strings.Fields(question) {
			if strings.HasPrefix(strings.Trim(f, "?.,!"), "INV-") {
				id = strings.Trim(f, "?.,!")
			}
		}
		args, _ := json.Marshal(map[string]string{"invoice": id})
		return history.ChatMessage{Role: "assistant", Content: "Let me look up " + id + " first.",
			ToolCalls: []history.ToolCall{{ID: "call_1", Name: "lookup_invoice", Arguments: string(args)}}}
	}
	var inv struct {
		ID     string
		Vendor string
		Amount int
		Due    string
	}
	if err := json.Unmarshal([]byte(tool), &inv); err != nil {
		return history.ChatMessage{Role: "assistant", Content: "I could not read the invoice: " + tool}
	}
	verdict := "it is within the $10,000 budget, so it can be paid"
	if inv.Amount > 10000 {
		verdict = "it is over the $10,000 budget: a person must approve it"
	}
	return history.ChatMessage{Role: "assistant", Content: fmt.Sprintf("%s is $%s to %s, due %s; %s.", inv.ID, dollars(inv.Amount), inv.Vendor, inv.Due, verdict)}
}

// LookupInvoice is the assistant's tool: the provider's invoice, as JSON.
func (a *Assistants) LookupInvoice(_ context.Context, args string) (string, error) {
	var in struct{ Invoice string }
	if err := json.Unmarshal([]byte(args), &in); err != nil || in.Invoice == "" {
		return "", sdk.NewNonRetryableError("lookup_invoice wants {\"invoice\": ID}", "BadArguments")
	}
	amount := 980
	if strings.HasSuffix(in.Invoice, "7") {
		amount = 25000
	}
	b, _ := json.Marshal(map[string]any{"ID": in.Invoice, "Vendor": "Hooli", "Amount": amount, "Due": "2026-12-15"})
	return string(b), nil
}

// RegisterAssistant registers the assistant on a worker.
func RegisterAssistant(r interface {
	RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error
	RegisterActivity(fn any, opts ...activities.Options) error
}, a *Assistants) error {
	return errors.Join(
		r.RegisterWorkflow(Assistant),
		r.RegisterActivity(a.Chat, activities.Options{Metered: true}),
		r.RegisterActivity(a.LookupInvoice),
	)
}
