package main

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/worker"
)

// payablesWorker runs the demo payables agent (its scripted model in
// process) on the server's engine and returns its tools: the fake payment
// provider's ledger.
func (s *testServer) payablesWorker(t *testing.T) *payables.Tools {
	t.Helper()
	model := httptest.NewServer(fakellm.NewFunc(payables.Reply))
	t.Cleanup(model.Close)
	m, err := llm.New(llm.Config{BaseURL: model.URL + "/v1", Model: payables.FakeModel})
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(s.c, worker.Options{TaskQueue: payables.TaskQueue, Identity: "payables-worker", GracefulStop: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tools := &payables.Tools{Dir: t.TempDir()}
	if err := payables.Register(w, tools, m); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("payables worker: %v", err)
		}
	})
	return tools
}

// waitApproval waits until the run of id awaits an approval.
func (s *testServer) waitApproval(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	from := int64(1)
	for {
		resp, err := s.c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			t.Fatalf("waiting for %s to await an approval: %v", id, err)
		}
		for _, ev := range resp.Events {
			if m, ok := ev.Attrs.(*history.MarkerRecorded); ok && m.Name == history.MarkerApprovalRequested {
				return
			}
		}
		from += int64(len(resp.Events))
		if resp.Closed && from >= resp.NextEventID {
			t.Fatalf("%s closed without awaiting an approval", id)
		}
	}
}

// The payables agent's payment awaits a person: the CLI lists the run as
// paused on an approval, describes the call (tool, effect class,
// arguments), refuses a decision no call awaits, and approves it — the
// payment is made once.
func TestApproveAndRejectFromTheCLI(t *testing.T) {
	s := newTestServer(t, true)
	tools := s.payablesWorker(t)
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "hold-1", "--task-queue", testQueue, "--input", `"x"`)
	s.must(t, "workflow", "start", "--type", "PayInvoiceAgent", "--id", "pay-INV-9", "--task-queue", payables.TaskQueue,
		"--input", `{"InvoiceID":"INV-9"}`)
	s.waitApproval(t, "pay-INV-9")

	out := s.must(t, "workflow", "list", "--status", "paused")
	if !strings.Contains(out, "pay-INV-9") || !strings.Contains(out, "awaits approval: SendPayment (SideEffect) call ") || strings.Contains(out, "hold-1") {
		t.Fatalf("list --status paused:\n%s", out)
	}
	if out := s.must(t, "workflow", "list", "--pause", "approval"); !strings.Contains(out, "pay-INV-9") || strings.Contains(out, "hold-1") {
		t.Fatalf("list --pause approval:\n%s", out)
	}
	if out := s.must(t, "workflow", "list", "--pause", "budget"); strings.Contains(out, "pay-INV-9") {
		t.Fatalf("list --pause budget:\n%s", out)
	}
	if _, stderr, code := s.run(t, "", "workflow", "list", "--pause", "approvals"); code != 2 || !strings.Contains(stderr, "want approval") {
		t.Fatalf("list --pause approvals: exit %d: %s", code, stderr)
	}
	if out := s.must(t, "workflow", "count"); !strings.Contains(out, "paused on an approval: 1") {
		t.Fatalf("count:\n%s", out)
	}
	out = s.must(t, "workflow", "describe", "pay-INV-9")
	for _, want := range []string{"Status    paused", "AWAITING APPROVAL: 1 tool call(s)", ": SendPayment (SideEffect) since ",
		`args:    {"invoice_id":"INV-9","vendor":"ACME","amount_usd":4200}`, "on signal approve", "cairn workflow approve pay-INV-9 [--reason WHY]"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	var d struct {
		PendingApprovals []struct {
			CallID string `json:"callId"`
		} `json:"pendingApprovals"`
	}
	if err := json.Unmarshal([]byte(s.must(t, "workflow", "describe", "pay-INV-9", "--json")), &d); err != nil || len(d.PendingApprovals) != 1 {
		t.Fatalf("describe --json: %+v %v", d, err)
	}
	call := d.PendingApprovals[0].CallID

	// Refused, nothing sent: a run awaiting nothing, a call not awaited, a
	// rejection without a reason.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"workflow", "approve", "hold-1", "--by", "ada"}, 1, "agent: no tool call awaits approval (see: cairn workflow describe hold-1)"},
		{[]string{"workflow", "approve", "pay-INV-9", "--call", "call_9", "--by", "ada"}, 1, `agent: the call does not await approval: "call_9" (awaiting: ` + call + " (SendPayment))"},
		{[]string{"workflow", "reject", "pay-INV-9", "--by", "ada"}, 2, "--reason is required to reject"},
		{[]string{"workflow", "approve", "pay-INV-9", "--by", ""}, 2, "--by is required"},
	} {
		if _, stderr, code := s.run(t, "", c.args...); code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("cairn %s: exit %d, want %d with %q:\n%s", strings.Join(c.args, " "), code, c.code, c.want, stderr)
		}
	}
	if p, _ := tools.Payments(); len(p) != 0 {
		t.Fatalf("paid before the approval: %v", p)
	}

	out = s.must(t, "workflow", "approve", "pay-INV-9", "--call", call, "--by", "ada", "--reason", "INV-9 checked")
	if !strings.Contains(out, "approved SendPayment call "+call+" of pay-INV-9 (signal approve)") {
		t.Fatalf("approve: %s", out)
	}
	s.result(t, "pay-INV-9")
	if out := s.must(t, "workflow", "describe", "pay-INV-9"); !strings.Contains(out, "Status    completed") {
		t.Fatalf("after the approval:\n%s", out)
	}
	if p, err := tools.Payments(); err != nil || len(p) != 1 {
		t.Fatalf("payments: %v %v, want one", p, err)
	}
	if out := s.must(t, "workflow", "show", "pay-INV-9"); !strings.Contains(out, "approved by ada: INV-9 checked") {
		t.Fatalf("the history does not say who approved and why:\n%s", out)
	}

	// Another run's payment is rejected, as an update: the tool does not
	// run, the model is told why.
	s.must(t, "workflow", "start", "--type", "PayInvoiceAgent", "--id", "pay-INV-9-again", "--task-queue", payables.TaskQueue,
		"--input", `{"InvoiceID":"INV-9"}`)
	s.waitApproval(t, "pay-INV-9-again")
	if out := s.must(t, "workflow", "reject", "pay-INV-9-again", "--by", "bob", "--reason", "paid already", "--as-update"); !strings.Contains(out, "rejected SendPayment call") ||
		!strings.Contains(out, "(update approve)") {
		t.Fatalf("reject --as-update: %s", out)
	}
	s.result(t, "pay-INV-9-again")
	if p, _ := tools.Payments(); len(p) != 1 {
		t.Fatalf("payments after the rejection: %v, want the first only", p)
	}
	if out := s.must(t, "workflow", "show", "pay-INV-9-again"); !strings.Contains(out, "rejected by bob: paid already") || !strings.Contains(out, "WorkflowUpdateCompleted") {
		t.Fatalf("the history does not say who rejected and why:\n%s", out)
	}
}
