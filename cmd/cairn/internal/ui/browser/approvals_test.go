package browser

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// The conversation page lists the approval signals the agent ignored
// (recorded by sdk/agent as cairn.agent.approval-ignored markers), with
// why, so that a person who approved the wrong call id sees it.
func TestWebUIShowsIgnoredApprovals(t *testing.T) {
	exe := chromium(t)
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	ctx := context.Background()
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "pay-1", WorkflowType: "PayInvoiceAgent", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	ign, err := msgpack.Marshal(&history.IgnoredApproval{CallID: "call_9", Approved: true, By: "eve",
		Why: `no tool call "call_9" is awaiting approval; awaiting: call_2_0`})
	if err != nil {
		t.Fatal(err)
	}
	req, err := msgpack.Marshal(&history.Approval{}) // what sdk/agent records for a call awaiting approval
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Identity: "w",
		Commands: []api.Command{
			{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: history.MarkerApprovalRequested,
				ID: "2:call_2_0", Data: history.Payload{Encoding: "msgpack", Data: req}}},
			{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: history.MarkerApprovalIgnored,
				ID: "call_9", Data: history.Payload{Encoding: "msgpack", Data: ign}}}}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.New(eng, ui.Options{}))
	t.Cleanup(srv.Close)
	bctx, _ := browse(t, exe)
	run(t, bctx, "open the conversation",
		chromedp.Navigate(srv.URL+"/agent/pay-1"),
		until(`document.querySelector("#ignored-approvals") !== null`),
	)
	shot(t, bctx, screenshotDir(t), "agent-ignored")
	c := textOf(t, bctx, "#ignored-approvals")
	for _, want := range []string{"1 approval signal(s) ignored", "approve call_9 by eve", `no tool call "call_9" is awaiting approval; awaiting: call_2_0`} {
		if !strings.Contains(c, want) {
			t.Fatalf("the ignored approvals lack %q: %q", want, c)
		}
	}

	// The run's history says what the markers mean, and which approval
	// would apply, not their data's stored names ({"ok":false}).
	run(t, bctx, "open the run",
		chromedp.Navigate(srv.URL+"/runs/pay-1"),
		until(`(document.querySelector("#timeline")?.textContent || "").includes("cairn.agent.approval-requested")`),
	)
	check(t, bctx, "the approval request reads as one, with the approval that applies",
		`[...document.querySelectorAll("#timeline tr.ev")].some((tr) => tr.children[6].textContent.includes('call_2_0 awaits a person\'s approval: {"CallID":"call_2_0","Approved":true}'))`)
}
