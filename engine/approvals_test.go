package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// approvalCmd is an approval marker as sdk/agent records it.
func approvalCmd(t *testing.T, name, key string, data any) api.Command {
	t.Helper()
	b, err := msgpack.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: name, ID: key,
		Data: history.Payload{Encoding: "msgpack", Data: b}}}
}

// listed returns the runs the list index gives for req, by workflow id.
func (h *harness) listed(req api.ListWorkflowsRequest) map[string]api.WorkflowInfo {
	h.t.Helper()
	resp, err := h.eng.ListWorkflows(h.ctx(), &req)
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string]api.WorkflowInfo{}
	for _, w := range resp.Workflows {
		out[w.WorkflowID] = w
	}
	return out
}

// counts renders CountWorkflows: "paused=1 running=1 | approval=1".
func (h *harness) counts() string {
	h.t.Helper()
	c, err := h.eng.CountWorkflows(h.ctx(), &api.CountWorkflowsRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	s := ""
	for _, sc := range c.ByStatus {
		s += fmt.Sprintf("%s=%d ", sc.Status, sc.Count)
	}
	s += "|"
	for _, pc := range c.Paused {
		s += fmt.Sprintf(" %s=%d", pc.Kind, pc.Count)
	}
	return s
}

// An agent's tool call awaiting a person's approval makes its run wait for
// a person: paused in the list index (by status and by what it waits
// for), in the counts and in describe, which says how to answer it —
// the call id, the tool, its declared effect class, its arguments, the
// signal. The entry follows the run as calls are decided, across a
// restart.
func TestApprovalAwaitedIsAPause(t *testing.T) {
	h := newHarness(t)
	h.eng.declare(h.ctx(), "q", []api.ActivityDeclaration{{ActivityType: "SendPayment", Effect: history.SideEffect}})
	h.start("other", "W")
	h.start("pay-1", "PayInvoiceAgent")
	h.complete(h.pollWFT("q")) // "other": goes on running
	h.complete(h.pollWFT("q"),
		approvalCmd(t, history.MarkerApprovalRequested, "2:call_1", &history.ApprovalRequest{CallID: "call_1", Tool: "SendPayment",
			Arguments: `{"invoice":"INV-9","amount":4200}`, Signal: "approve-payments"}),
		approvalCmd(t, history.MarkerApprovalRequested, "2:call_2", &history.ApprovalRequest{CallID: "call_2", Tool: "Refund",
			Arguments: `{"invoice":"INV-8"}`, Signal: "approve-payments"}))

	d := h.describe("pay-1")
	p := d.Info.Pause
	if d.Info.Status != api.StatusPaused || p == nil || p.Kind != api.PauseApproval || p.CallID != "call_1" || p.Signal != "approve-payments" ||
		p.ActivityType != "SendPayment" || p.ActivityID != "tool:2:call_1" || !p.EffectKnown || p.Effect != history.SideEffect ||
		p.Approvals != 2 || string(p.Input.Data) != `{"invoice":"INV-9","amount":4200}` || !p.Since.Equal(testStart) {
		t.Fatalf("described %s, pause %+v", d.Info.Status, p)
	}
	if a := d.PendingApprovals; len(a) != 2 || a[0].Key != "2:call_1" || a[1].CallID != "call_2" || a[1].Tool != "Refund" ||
		a[1].Arguments != `{"invoice":"INV-8"}` || a[1].EffectKnown || a[0].EventID != 3 {
		t.Fatalf("pending approvals %+v", a)
	}
	if got := h.listed(api.ListWorkflowsRequest{Status: api.StatusPaused}); got["pay-1"].Pause == nil || got["pay-1"].Pause.CallID != "call_1" ||
		len(got) != 1 {
		t.Fatalf("paused runs: %+v", got)
	}
	if got := h.listed(api.ListWorkflowsRequest{PauseKind: api.PauseApproval}); len(got) != 1 || got["pay-1"].Pause.Approvals != 2 {
		t.Fatalf("runs awaiting approval: %+v", got)
	}
	if got := h.listed(api.ListWorkflowsRequest{PauseKind: api.PauseBudget}); len(got) != 0 {
		t.Fatalf("runs paused on their budget: %+v", got)
	}
	if got := h.listed(api.ListWorkflowsRequest{Status: api.StatusRunning}); len(got) != 1 || got["other"].WorkflowID == "" {
		t.Fatalf("running runs: %+v", got)
	}
	if got := h.listed(api.ListWorkflowsRequest{WorkflowID: "pay-1", PauseKind: api.PauseApproval}); len(got) != 1 {
		t.Fatalf("pay-1's runs awaiting approval: %+v", got)
	}
	if got := h.counts(); got != "running=1 paused=1 | approval=1" {
		t.Fatalf("counts: %s", got)
	}

	// The refund's declaration, learned after it began to wait, is
	// described; the state survives a restart.
	h.eng.declare(h.ctx(), "q", []api.ActivityDeclaration{{ActivityType: "Refund", Effect: history.Idempotent}})
	h.reopen()
	if a := h.describe("pay-1").PendingApprovals; len(a) != 2 || !a[1].EffectKnown || a[1].Effect != history.Idempotent {
		t.Fatalf("after a restart, pending approvals %+v", a)
	}

	// The first call is decided: the entry moves on to the second.
	h.signal("pay-1", "approve-payments", `{"CallID":"call_1","Approved":true}`)
	h.complete(h.pollWFT("q"), approvalCmd(t, history.MarkerApprovalDecided, "2:call_1", &history.Approval{Approved: true, By: "ada"}))
	if got := h.listed(api.ListWorkflowsRequest{Status: api.StatusPaused}); got["pay-1"].Pause == nil || got["pay-1"].Pause.CallID != "call_2" ||
		got["pay-1"].Pause.Approvals != 1 {
		t.Fatalf("after the first decision, the paused runs: %+v", got)
	}
	// The second: the run runs again, everywhere.
	h.signal("pay-1", "approve-payments", `{"CallID":"call_2","Approved":false}`)
	h.complete(h.pollWFT("q"), approvalCmd(t, history.MarkerApprovalDecided, "2:call_2", &history.Approval{By: "bob"}))
	if d := h.describe("pay-1"); d.Info.Status != api.StatusRunning || d.Info.Pause != nil || d.PendingApprovals != nil {
		t.Fatalf("after both decisions: %s %+v %+v", d.Info.Status, d.Info.Pause, d.PendingApprovals)
	}
	if got := h.listed(api.ListWorkflowsRequest{Status: api.StatusPaused}); len(got) != 0 {
		t.Fatalf("paused runs after both decisions: %+v", got)
	}
	if got := h.counts(); got != "running=2 |" {
		t.Fatalf("counts after both decisions: %s", got)
	}
}

// A call recorded by an agent before the marker carried anything (an
// empty Approval) is a pause too: its call id from the marker's id, the
// default signal, and its tool and arguments from the transcript when it
// has them (here it has none: they stay empty).
func TestApprovalOfAnOlderMarkerIsAPause(t *testing.T) {
	h := newHarness(t)
	h.start("pay-1", "PayInvoiceAgent")
	h.complete(h.pollWFT("q"), approvalCmd(t, history.MarkerApprovalRequested, "2:call_2_0", &history.Approval{}))
	d := h.describe("pay-1")
	if p := d.Info.Pause; d.Info.Status != api.StatusPaused || p == nil || p.Kind != api.PauseApproval || p.CallID != "call_2_0" ||
		p.Signal != history.DefaultApprovalSignal || p.EffectKnown {
		t.Fatalf("described %s, pause %+v", d.Info.Status, p)
	}
}

// A run paused on its budget and awaiting an approval is listed as paused
// on its budget; once the budget is raised it is still paused, and its
// entry now says it awaits the approval.
func TestApprovalAfterABudgetPauseIsListed(t *testing.T) {
	h := newHarness(t)
	h.startWith(api.StartWorkflowRequest{WorkflowID: "pay-1", WorkflowType: "PayInvoiceAgent", TaskQueue: "q", Budget: history.Budget{MaxTurns: 1}})
	metered := func(id string) api.Command {
		c := schedule(id, "llm.Chat", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute})
		c.ScheduleActivity.Metered = true
		return c
	}
	h.complete(h.pollWFT("q"), metered("model:1"), metered("model:2"),
		approvalCmd(t, history.MarkerApprovalRequested, "1:call_1", &history.ApprovalRequest{CallID: "call_1", Tool: "SendPayment"}))
	kind := func() string {
		got := h.listed(api.ListWorkflowsRequest{Status: api.StatusPaused})
		if p := got["pay-1"].Pause; p != nil {
			return p.Kind
		}
		return ""
	}
	if k := kind(); k != api.PauseBudget {
		t.Fatalf("paused on %q, want its budget first", k)
	}
	if _, err := h.eng.UpdateBudget(h.ctx(), &api.UpdateBudgetRequest{WorkflowID: "pay-1", Budget: history.Budget{MaxTurns: 5}, Identity: "ada",
		Reason: "worth it"}); err != nil {
		t.Fatal(err)
	}
	if k := kind(); k != api.PauseApproval {
		t.Fatalf("after the raise, listed as paused on %q, want the approval", k)
	}
}
