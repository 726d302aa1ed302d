package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// awaiting starts run id whose agent awaits approval of call, its marker
// recorded as sdk/agent records it (no worker runs it).
func awaiting(t *testing.T, eng *engine.Engine, id, call string) {
	t.Helper()
	ctx := context.Background()
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "Agent", TaskQueue: "agents"}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "agents", Identity: "w"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	b, err := msgpack.Marshal(&history.ApprovalRequest{CallID: call, Tool: "SendPayment", Arguments: `{"amount":4200}`, Signal: "approve-payments"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Identity: "w",
		Commands: []api.Command{{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: history.MarkerApprovalRequested,
			ID: "1:" + call, Data: history.Payload{Encoding: "msgpack", Data: b}}}}}); err != nil {
		t.Fatal(err)
	}
}

// POST /api/approve sends a person's decision as the approval signal the
// call's agent takes, naming the call, who decided (as the web UI records
// a person) and why; a decision that applies to no awaited call, or that
// lacks who or (to reject) why, is refused and nothing is sent. The runs
// list filters and counts the runs awaiting approval.
func TestApproveAction(t *testing.T) {
	eng := newEngine(t)
	awaiting(t, eng, "pay-1", "call_1")
	b := newBrowser(t, New(eng, Options{}))
	b.session()
	for _, c := range []struct{ body, want string }{
		{`{"workflowId":"pay-1","callId":"call_9","approved":true,"by":"Ada"}`, `agent: the call does not await approval: \"call_9\" (awaiting: call_1 (SendPayment))`},
		{`{"workflowId":"pay-1","approved":true}`, "say who you are"},
		{`{"workflowId":"pay-1","approved":false,"by":"Ada"}`, "say why you reject it"},
		{`{"workflowId":"pay-1","by":"Ada"}`, "say approved: true or false"},
	} {
		if code, out := b.action("/api/approve", c.body); code != http.StatusBadRequest || !strings.Contains(out, c.want) || !strings.Contains(out, `"invalid_argument"`) {
			t.Errorf("%s: %d %s, want 400 saying %q", c.body, code, out, c.want)
		}
	}
	hist := func() []history.Event {
		resp, err := eng.GetHistory(context.Background(), &api.GetHistoryRequest{WorkflowID: "pay-1"})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Events
	}
	if n := len(hist()); n != 3 { // started, the task, the marker
		t.Fatalf("a refused decision was sent: %d events", n)
	}

	code, out, _ := b.do("GET", "/api/runs?status=awaiting_approval", "", nil)
	if code != 200 || !strings.Contains(out, `"workflowId":"pay-1"`) || !strings.Contains(out, `"kind":"approval"`) {
		t.Fatalf("/api/runs?status=awaiting_approval: %d %s", code, out)
	}
	if code, out, _ := b.do("GET", "/api/counts", "", nil); code != 200 || !strings.Contains(out, `{"status":"awaiting_approval","count":1}`) {
		t.Fatalf("/api/counts: %d %s", code, out)
	}
	code, out, _ = b.do("GET", "/api/pause?id=pay-1", "", nil)
	if code != 200 || !strings.Contains(out, `"approvals":[{"callId":"call_1"`) || !strings.Contains(out, `"arguments":"{\"amount\":4200}"`) {
		t.Fatalf("/api/pause: %d %s", code, out)
	}

	code, out = b.action("/api/approve", `{"workflowId":"pay-1","approved":false,"by":"Ada","reason":"paid by wire"}`)
	if code != 200 || !strings.Contains(out, `"callId":"call_1"`) || !strings.Contains(out, `"approved":false`) {
		t.Fatalf("reject: %d %s", code, out)
	}
	evs := hist()
	sig, ok := evs[len(evs)-1].Attrs.(*history.SignalReceived)
	if !ok || sig.Name != "approve-payments" || sig.Identity != "Ada (web UI)" {
		t.Fatalf("the last event: %+v", evs[len(evs)-1])
	}
	var ap map[string]any
	if err := msgpack.Unmarshal(sig.Input.Data, &ap); err != nil {
		t.Fatal(err)
	}
	if got, _ := json.Marshal(ap); string(got) != `{"Approved":false,"By":"Ada (web UI)","CallID":"call_1","Reason":"paid by wire"}` {
		t.Fatalf("the approval sent: %s", got)
	}
}
