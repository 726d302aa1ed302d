package payables_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

type scene struct {
	env   *testenv.Env
	tools *payables.Tools
	model *fakellm.Server
}

func newScene(t *testing.T) *scene {
	t.Helper()
	model := fakellm.NewFunc(payables.Reply).KeepRequests()
	hs := httptest.NewServer(model)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", Model: payables.FakeModel})
	must(t, err)
	env := testenv.New(t, testenv.Options{NoTimeSkipping: true, TaskQueue: payables.TaskQueue})
	tools := &payables.Tools{Dir: t.TempDir()}
	must(t, payables.Register(env.Worker, tools, m))
	env.Start()
	return &scene{env: env, tools: tools, model: model}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run runs the agent on task, approving the payment it asks for.
func (s *scene) run(t *testing.T, task payables.Task) agent.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := s.env.Client
	id := "pay-" + task.InvoiceID
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: payables.TaskQueue}, payables.PayInvoiceAgent, task)
	must(t, err)
	from := int64(1)
	for { // approve the payment when the agent asks for it
		resp, err := c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			evs, _ := c.GetHistory(context.Background(), id, "")
			for _, ev := range evs {
				t.Logf("%d %s %+v", ev.ID, ev.Type(), ev.Attrs)
			}
			t.Fatal(err)
		}
		for _, ev := range resp.Events {
			if m, ok := ev.Attrs.(*history.MarkerRecorded); ok && m.Name == history.MarkerApprovalRequested {
				must(t, c.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ap-clerk"}))
			}
		}
		from += int64(len(resp.Events))
		if resp.Closed && from >= resp.NextEventID {
			break
		}
	}
	var res agent.Result
	must(t, run.Get(ctx, &res))
	return res
}

// The scripted model follows the task's invoice: it reads, checks and
// pays that one (it paid INV-9 whatever the task said), and declines one
// over budget.
func TestScriptFollowsTheTasksInvoice(t *testing.T) {
	s := newScene(t)
	res := s.run(t, payables.Task{InvoiceID: "INV-3"})
	if res.Final != "Paid $980 to Initech for INV-3 and e-mailed ap@initech.example." || res.Turns != payables.Turns {
		t.Fatalf("INV-3: %+v", res)
	}
	pays, err := s.tools.Payments()
	must(t, err)
	if len(pays) != 1 || !strings.Contains(pays[0], `"invoice_id":"INV-3"`) || !strings.Contains(pays[0], `"amount_usd":980`) {
		t.Fatalf("payments %v", pays)
	}
	res = s.run(t, payables.Task{InvoiceID: "INV-7"})
	if !strings.Contains(res.Final, "INV-7 ($12,500 to Globex) is over this month's budget") {
		t.Fatalf("INV-7: %+v", res)
	}
	res = s.run(t, payables.Task{InvoiceID: "INV-404"})
	if !strings.Contains(res.Final, "could not read invoice INV-404") {
		t.Fatalf("INV-404: %+v", res)
	}
	if pays, _ := s.tools.Payments(); len(pays) != 1 {
		t.Fatalf("payments after the declined ones: %v", pays)
	}
}

// The agent streams the model's answers unless the task says not to (it
// did only when asked, so `cairn workflow watch` showed nothing).
func TestAgentStreamsByDefault(t *testing.T) {
	s := newScene(t)
	s.run(t, payables.Task{InvoiceID: "INV-9"})
	off := false
	s.run(t, payables.Task{InvoiceID: "INV-3", Stream: &off})
	var streamed []bool
	for _, r := range s.model.Requests() {
		if strings.Contains(string(r.Body), `"content":"Pay invoice INV-9."`) {
			streamed = append(streamed, r.Stream)
		}
		if strings.Contains(string(r.Body), `"content":"Pay invoice INV-3."`) && r.Stream {
			t.Fatal("a task with Stream false streamed")
		}
	}
	if len(streamed) != payables.Turns {
		t.Fatalf("%d requests for INV-9", len(streamed))
	}
	for _, s := range streamed {
		if !s {
			t.Fatal("a task without Stream did not stream")
		}
	}
}
