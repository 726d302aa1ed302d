package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

type InvoiceQuery struct {
	ID string `json:"id" jsonschema:"description=the invoice id"`
}

type Invoice struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

type Payment struct {
	Invoice string `json:"invoice"`
	Amount  int    `json:"amount"`
}

// tools counts calls, per tool.
type tools struct {
	mu    sync.Mutex
	calls map[string]int
}

func (t *tools) count(name string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls[name]
}

func (t *tools) inc(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.calls[name]++
}

func (t *tools) ReadInvoice(_ context.Context, q InvoiceQuery) (Invoice, error) {
	t.inc("ReadInvoice")
	return Invoice{ID: q.ID, Amount: 4200}, nil
}

func (t *tools) CheckBudget(_ context.Context, q InvoiceQuery) (bool, error) {
	t.inc("CheckBudget")
	return true, nil
}

func (t *tools) SendPayment(ctx context.Context, p Payment) (string, error) {
	t.inc("SendPayment")
	return "pay_001 key " + activities.GetInfo(ctx).IdempotencyKey, nil
}

// Payer is the agent under test.
func Payer(ctx sdk.Context, invoice string) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{
		Model:  "fake-1",
		System: "You pay invoices.",
		Tools: []agent.Tool{
			agent.NewTool(t.ReadInvoice, "Read an invoice"),
			agent.NewTool(t.CheckBudget, "Check the budget"),
			agent.NewTool(t.SendPayment, "Pay", agent.RequireApproval()),
		},
		Budget: history.Budget{MaxTurns: 10},
		Stream: true,
	})
	return a.Run(ctx, "Pay "+invoice)
}

// newEnv runs the agents (Payer unless others are given) against the
// scripted model.
func newEnv(t *testing.T, script fakellm.Script, agents ...any) (*testenv.Env, *tools, *fakellm.Server) {
	srv := fakellm.New(script)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	env := storeEnv(t, testenv.Options{NoTimeSkipping: true})
	tl := &tools{calls: map[string]int{}}
	if len(agents) == 0 {
		agents = []any{Payer}
	}
	for _, a := range agents {
		env.RegisterWorkflow(a)
	}
	must(t, m.Register(env.Worker))
	env.RegisterActivity(tl.ReadInvoice)
	env.RegisterActivity(tl.CheckBudget)
	env.RegisterActivity(tl.SendPayment, activities.Options{Effect: activities.SideEffect})
	env.Start()
	return env, tl, srv
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, ctx context.Context, c client.Client, id string, match func(history.Event) bool) {
	t.Helper()
	from := int64(1)
	for {
		resp, err := c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			if match(ev) {
				return
			}
			if f, ok := ev.Attrs.(*history.WorkflowTaskFailed); ok {
				t.Fatalf("workflow task failed: %s: %s", f.Cause, f.Failure.Message)
			}
		}
		from += int64(len(resp.Events))
		if resp.Closed && from >= resp.NextEventID {
			t.Fatal("run closed first")
		}
	}
}

func TestLoopToolsApprovalTranscript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, srv := newEnv(t, fakellm.Script{
		fakellm.CallTools(fakellm.ToolCall{Name: "ReadInvoice", Arguments: `{"id":"INV-9"}`}, fakellm.ToolCall{Name: "CheckBudget", Arguments: `{"id":"INV-9"}`}),
		fakellm.CallTools(fakellm.ToolCall{Name: "Refund", Arguments: `{}`}, fakellm.ToolCall{Name: "SendPayment", Arguments: `{"invoice":"INV-9","amount":4200}`}),
		fakellm.Say("Paid INV-9: pay_001."),
	})
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "pay-INV-9", TaskQueue: env.TaskQueue()}, Payer, "INV-9")
	must(t, err)
	waitFor(t, ctx, env.Client, "pay-INV-9", func(ev history.Event) bool {
		m, ok := ev.Attrs.(*history.MarkerRecorded)
		return ok && m.Name == history.MarkerApprovalRequested
	})
	tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "pay-INV-9"})
	must(t, err)
	states := map[string]string{}
	for _, it := range tr.Items {
		if it.ToolCall != nil {
			states[it.ToolCall.Name] = it.ToolCall.State
		}
	}
	if states["ReadInvoice"] != api.CallCompleted || states["CheckBudget"] != api.CallCompleted ||
		states["SendPayment"] != api.CallAwaitingApproval || states["Refund"] != api.CallScheduled {
		t.Fatalf("tool states %v", states)
	}
	if tl.count("SendPayment") != 0 {
		t.Fatal("the payment ran before its approval")
	}
	must(t, env.Client.SignalWorkflow(ctx, "pay-INV-9", "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ada"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Paid INV-9: pay_001." || res.Turns != 3 || res.StopReason != "final" {
		t.Fatalf("result %+v", res)
	}
	if tl.count("ReadInvoice") != 1 || tl.count("CheckBudget") != 1 || tl.count("SendPayment") != 1 || srv.Calls() != 3 {
		t.Fatalf("calls %v, model %d", tl.calls, srv.Calls())
	}
	tr, err = env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "pay-INV-9"})
	must(t, err)
	var roles []string
	var unknownTold, paidTold bool
	for _, it := range tr.Items {
		switch {
		case it.Message != nil:
			roles = append(roles, it.Message.Role)
			if it.Message.Role == "tool" && strings.Contains(it.Message.Content, `no tool "Refund"`) {
				unknownTold = true
			}
			if it.Message.Role == "tool" && strings.Contains(it.Message.Content, "pay_001") {
				paidTold = true
			}
		case it.ToolCall != nil && it.ToolCall.Name == "SendPayment":
			if it.ToolCall.State != api.CallCompleted || it.ToolCall.ApprovedBy != "ada" || it.ToolCall.IdempotencyKey == "" {
				t.Fatalf("payment call %+v", it.ToolCall)
			}
		}
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool,tool,assistant,tool,tool,assistant" || !unknownTold || !paidTold {
		t.Fatalf("roles %s, unknown tool told %v, payment told %v", got, unknownTold, paidTold)
	}
	// The history holds each turn's new bytes once: the model inputs are
	// bare references.
	evs, err := env.Client.GetHistory(ctx, "pay-INV-9", "")
	must(t, err)
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.ActivityType == llm.ActivityName && (len(s.Input.Data) != 0 || !s.Input.ByRef()) {
			t.Fatalf("model input recorded as %+v", s.Input)
		}
	}
	// Replaying the history through the code needs neither model nor tools.
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Payer))
	must(t, r.ReplayHistory(history.RunRef{WorkflowID: "pay-INV-9", RunID: run.RunID()}, evs,
		worker.ReplayOptions{Chunks: client.NewChunkCache(env.Client.Service(), 0)}))
	// Each turn's answer is recorded once, as the chunk the next input
	// extends: the model's results are bare references.
	for _, ev := range evs {
		if c, ok := ev.Attrs.(*history.ActivityCompleted); ok && c.Result.Encoding == history.EncodingTranscript &&
			(len(c.Result.Data) != 0 || !c.Result.ByRef()) {
			t.Fatalf("a model answer recorded inline: %+v", c.Result)
		}
	}
	if srv.Calls() != 3 {
		t.Fatal("the replay called the model")
	}
}

func TestRejectedCallIsReportedToTheModel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, _ := newEnv(t, fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.Say("Understood, not paying."),
	})
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "reject", TaskQueue: env.TaskQueue()}, Payer, "INV-9")
	must(t, err)
	waitFor(t, ctx, env.Client, "reject", func(ev history.Event) bool {
		m, ok := ev.Attrs.(*history.MarkerRecorded)
		return ok && m.Name == history.MarkerApprovalRequested
	})
	must(t, env.Client.SignalWorkflow(ctx, "reject", "", agent.ApprovalSignal, agent.Approval{Approved: false, By: "bob", Reason: "duplicate invoice"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if tl.count("SendPayment") != 0 || res.Final != "Understood, not paying." {
		t.Fatalf("payment ran %d times; result %+v", tl.count("SendPayment"), res)
	}
	tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "reject"})
	must(t, err)
	found := false
	for _, it := range tr.Items {
		if it.ToolCall != nil && it.ToolCall.State == api.CallRejected && it.ToolCall.ApprovedBy == "bob" {
			found = true
		}
		if it.Message != nil && it.Message.Role == "tool" && !strings.Contains(it.Message.Content, "rejected by bob: duplicate invoice") {
			t.Fatalf("the model was told %q", it.Message.Content)
		}
	}
	if !found {
		t.Fatal("the transcript does not show the rejection")
	}
}

// Budgeted loops on a tool until the budget stops it.
func Budgeted(ctx sdk.Context, _ string) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{Model: "fake-1", Tools: []agent.Tool{agent.NewTool(t.CheckBudget, "Check")},
		Budget: history.Budget{MaxTurns: 2}})
	return a.Run(ctx, "loop")
}

func TestBudgetPausesThenStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, _, srv := newEnv(t, fakellm.Script{fakellm.CallTool("CheckBudget", `{"id":"x"}`)})
	env.RegisterWorkflow(Budgeted)
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "budget", TaskQueue: env.TaskQueue()}, Budgeted, "")
	must(t, err)
	waitFor(t, ctx, env.Client, "budget", func(ev history.Event) bool { return ev.Type() == history.TypeBudgetExceeded })
	d, err := env.Client.DescribeWorkflow(ctx, "budget", "")
	must(t, err)
	if d.Info.Status != api.StatusPaused || d.Info.Pause.Kind != api.PauseBudget || srv.Calls() != 2 {
		t.Fatalf("status %s pause %+v calls %d", d.Info.Status, d.Info.Pause, srv.Calls())
	}
	tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "budget"})
	must(t, err)
	if last := tr.Items[len(tr.Items)-1]; last.ModelCall == nil || last.ModelCall.State != api.CallHeld {
		t.Fatalf("last item %+v", last)
	}
	_, err = env.Client.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "budget", Stop: true, Identity: "ada", Reason: "enough"})
	must(t, err)
	var res agent.Result
	err = run.Get(ctx, &res)
	if err == nil || !strings.Contains(err.Error(), "budget exceeded") {
		t.Fatalf("run ended with %v", err)
	}
	_ = errors.New
	_ = fmt.Sprint
}

// Document is a tool result large enough to be shared.
type Document struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

func (t *tools) ReadDocument(_ context.Context, q InvoiceQuery) (Document, error) {
	t.inc("ReadDocument")
	return Document{ID: q.ID, Text: strings.Repeat("lorem ipsum ", 60)}, nil
}

// Reader reads one document and answers.
func Reader(ctx sdk.Context, id string) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{Model: "fake-1", Tools: []agent.Tool{agent.NewTool(t.ReadDocument, "Read a document")}})
	return a.Run(ctx, "Summarise "+id)
}

// TestToolResultRecordedOnce: a tool's result is stored once — as the
// tool activity's result, a chunk of its own — and the transcript the next
// model call reads references it; the model still gets its text, the
// transcript API shows it, and a replay reproduces the references.
func TestToolResultRecordedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, srv := newEnv(t, fakellm.Script{fakellm.CallTool("ReadDocument", `{"id":"DOC-1"}`), fakellm.Say("It says lorem ipsum.")})
	srv.KeepRequests()
	env.RegisterActivity(tl.ReadDocument)
	env.RegisterWorkflow(Reader)
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "read", TaskQueue: env.TaskQueue()}, Reader, "DOC-1")
	must(t, err)
	var res agent.Result
	must(t, run.Get(ctx, &res))
	text := `{"id":"DOC-1","text":"` + strings.Repeat("lorem ipsum ", 60) + `"}`
	evs, err := env.Client.GetHistory(ctx, "read", "")
	must(t, err)
	var result, input history.Payload
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityScheduled:
			if a.ActivityType == llm.ActivityName {
				input = a.Input
			} else if !a.ShareResult {
				t.Fatalf("tool scheduled without ShareResult: %+v", a)
			}
		case *history.ActivityCompleted:
			if a.Result.Encoding != history.EncodingTranscript {
				result = a.Result
			}
		}
	}
	if !result.ByRef() || len(result.Data) != 0 {
		t.Fatalf("the tool's result is recorded as %+v, not a reference to a chunk of its own", result)
	}
	// The second model call's own chunk: the tool message references the
	// result's chunk and holds no copy of the text.
	src := client.NewChunkCache(env.Client.Service(), 0)
	c, err := src.Chunk(ctx, input.Ref)
	must(t, err)
	if strings.Contains(string(c.Data), "lorem") {
		t.Fatal("the transcript chunk holds a copy of the tool's result")
	}
	entries, err := history.DecodeTranscript(c.Data)
	must(t, err)
	if len(entries) != 1 || entries[0].Content == nil || string(entries[0].Content.Ref) != string(result.Ref) {
		t.Fatalf("the tool message's entry %+v does not reference the result's chunk %x", entries, result.Ref)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), `"content":`+jsonString(text)) {
		t.Fatalf("the model was not sent the tool's result as text:\n%s", reqs[len(reqs)-1].Body)
	}
	tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "read"})
	must(t, err)
	shown := false
	for _, it := range tr.Items {
		if it.Message != nil && it.Message.Role == "tool" {
			shown = it.Message.Content == text
		}
	}
	if !shown {
		t.Fatalf("the transcript API does not show the tool's result: %+v", tr.Items)
	}
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Reader))
	must(t, r.ReplayHistory(history.RunRef{WorkflowID: "read", RunID: run.RunID()}, evs, worker.ReplayOptions{Chunks: src}))
	if tl.count("ReadDocument") != 1 || srv.Calls() != 2 {
		t.Fatalf("tool ran %d times, model called %d times", tl.count("ReadDocument"), srv.Calls())
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
