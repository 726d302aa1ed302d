package scenario_test

import (
	"context"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
)

// Box holds tools of the shapes NewTool accepts: no input, no output, a
// large result.
type Box struct {
	mu     sync.Mutex
	pinged int
	noted  []string
	report int
}

// Ping takes no input.
func (b *Box) Ping(context.Context) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pinged++
	return "pong", nil
}

// Note is the input of Note.
type Note struct {
	Text string `json:"text"`
}

// Note returns nothing but an error.
func (b *Box) Note(_ context.Context, n Note) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.noted = append(b.noted, n.Text)
	return nil
}

// Report is Idempotent and returns a large text (a chunk of its own).
func (b *Box) Report(_ context.Context, q InvoiceQuery) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.report++
	return bigReport(q.ID), nil
}

func bigReport(id string) string {
	return "report " + id + ": " + strings.Repeat("all lines reconciled. ", 60)
}

// Toolbox is an agent with those tools.
func Toolbox(ctx sdk.Context, prompt string) (agent.Result, error) {
	var b *Box
	a := agent.New(ctx, agent.Options{Model: "fake-1", Tools: []agent.Tool{
		agent.NewTool(b.Ping, "Ping."),
		agent.NewTool(b.Note, "Take a note."),
		agent.NewTool(b.Report, "Build a report."),
	}})
	return a.Run(ctx, prompt)
}

// newToolboxStarted is a scene whose worker also runs Toolbox and its
// tools (registered before the env starts).
func newToolboxStarted(t *testing.T, model *fakellm.Server) (*scene, *Box) {
	t.Helper()
	b := &Box{}
	s := newScene(t, model, func(*Provider) {}, withWorker(func(w registrar) {
		must(t, w.RegisterWorkflow(Toolbox))
		must(t, w.RegisterActivity(b.Ping))
		must(t, w.RegisterActivity(b.Note))
		must(t, w.RegisterActivity(b.Report, activities.Options{Effect: activities.Idempotent}))
	}))
	return s, b
}

func startOpts(s *scene, id string) client.StartOptions {
	return client.StartOptions{ID: id, TaskQueue: s.env.TaskQueue()}
}

// Tools without input and without output work; a large result is told to
// the model whole, and a second run of the same workflow id is told the
// same large result from the ledger without running the tool again.
func TestToolShapesAndALargeDeduplicatedResult(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{ID: "p", Name: "Ping", Arguments: ``},
			fakellm.ToolCall{ID: "n", Name: "Note", Arguments: `{"text":"remember"}`},
			fakellm.ToolCall{ID: "r", Name: "Report", Arguments: `{"id":"INV-L"}`},
		),
		fakellm.Say("Done."),
	}).KeepRequests()
	s, b := newToolboxStarted(t, model)
	for i := 0; i < 2; i++ {
		var res agent.Result
		run, err := s.env.Client.StartWorkflow(ctx, startOpts(s, "toolbox"), Toolbox, "go")
		must(t, err)
		must(t, run.Get(ctx, &res))
		reqs := model.Requests()
		told := requestToolMessages(t, reqs[len(reqs)-1])
		if res.Final != "Done." || len(told) != 3 || told[0][1] != "pong" || told[2][1] != bigReport("INV-L") {
			t.Fatalf("run %d: result %+v, told %q", i+1, res, told)
		}
		if strings.HasPrefix(told[1][1], "error") {
			t.Fatalf("run %d: a tool without output was told %q", i+1, told[1][1])
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pinged != 2 || len(b.noted) != 2 || b.report != 1 {
		t.Fatalf("pinged %d, noted %v, reports built %d (want 2, 2, 1: Report is Idempotent)", b.pinged, b.noted, b.report)
	}
}

// Two calls of one turn with the same call id (some local model servers
// number their calls per message, or repeat one) each get their own
// result; neither wedges the run.
func TestDuplicateToolCallIDsInOneTurn(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{ID: "call_0", Name: "Note", Arguments: `{"text":"one"}`},
			fakellm.ToolCall{ID: "call_0", Name: "Note", Arguments: `{"text":"two"}`},
		),
		fakellm.Say("Noted."),
	}).KeepRequests()
	s, b := newToolboxStarted(t, model)
	run, err := s.env.Client.StartWorkflow(ctx, startOpts(s, "dup-ids"), Toolbox, "go")
	must(t, err)
	var res agent.Result
	must(t, run.Get(ctx, &res))
	b.mu.Lock()
	notes := append([]string(nil), b.noted...)
	sort.Strings(notes) // they ran concurrently
	noted := strings.Join(notes, ",")
	b.mu.Unlock()
	if res.Final != "Noted." || noted != "one,two" {
		t.Fatalf("result %+v, noted %q", res, noted)
	}
	calls := toolCalls(t, ctx, s.env.Client, "dup-ids", "")["Note"]
	if len(calls) != 2 || calls[0].State != "completed" || calls[1].State != "completed" ||
		calls[0].ScheduledEventID == calls[1].ScheduledEventID || calls[0].Arguments != `{"text":"one"}` || calls[1].Arguments != `{"text":"two"}` ||
		calls[0].Result != "null" || calls[1].Result != "null" {
		t.Fatalf("the transcript's Note calls: %+v", calls)
	}
}

// Two calls needing approval that share a call id are approved one
// signal each, in order: both run, neither is taken for timed out.
func TestDuplicateCallIDsApprovedInOrder(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTools(
			fakellm.ToolCall{ID: "call_0", Name: "SendPayment", Arguments: `{"invoice_id":"INV-D1","amount":1}`},
			fakellm.ToolCall{ID: "call_0", Name: "SendPayment", Arguments: `{"invoice_id":"INV-D2","amount":2}`},
		),
		fakellm.Say("Both paid."),
	}).KeepRequests()
	s := newScene(t, model)
	c := s.env.Client
	run := s.start(t, ctx, "dup-approvals", Task{Approve: true})
	n := 0
	waitEvent(t, ctx, c, "dup-approvals", "", "two approval requests", func(ev history.Event) bool {
		if isMarker(history.MarkerApprovalRequested)(ev) {
			n++
		}
		return n == 2
	})
	for i := 0; i < 2; i++ {
		must(t, c.SignalWorkflow(ctx, "dup-approvals", "", agent.ApprovalSignal, agent.Approval{CallID: "call_0", Approved: true, By: "ada"}))
	}
	var res agent.Result
	must(t, run.Get(ctx, &res))
	reqs := model.Requests()
	told := requestToolMessages(t, reqs[len(reqs)-1])
	if pay, _, _, _, _ := s.prov.snapshot(); pay != 2 || len(told) != 2 || told[0][1] != "pay_001" && told[0][1] != "pay_002" ||
		strings.Contains(told[1][1], "rejected") {
		t.Fatalf("%d payments; the model was told %q", pay, told)
	}
}
