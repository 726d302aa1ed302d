package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// DeskPayer takes its approvals on a signal of its own.
func DeskPayer(ctx sdk.Context, invoice string) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{
		Model:          "fake-1",
		Tools:          []agent.Tool{agent.NewTool(t.SendPayment, "Pay", agent.RequireApproval())},
		ApprovalSignal: "approve-payments",
	})
	return a.Run(ctx, "Pay "+invoice)
}

// The approval-requested marker says what a person needs to answer the
// call: its id, the tool, the model's arguments, and the signal this agent
// takes approvals from.
func TestApprovalRequestedMarkerSaysHowToAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, _ := newEnv(t, fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.Say("Paid."),
	}, DeskPayer)
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "desk-INV-9", TaskQueue: env.TaskQueue()}, DeskPayer, "INV-9")
	must(t, err)
	var marker *history.MarkerRecorded
	waitFor(t, ctx, env.Client, "desk-INV-9", func(ev history.Event) bool {
		m, ok := ev.Attrs.(*history.MarkerRecorded)
		if ok && m.Name == history.MarkerApprovalRequested {
			marker = m
		}
		return marker != nil
	})
	req := history.ApprovalRequestOf(marker.ID, marker.Data)
	if req.CallID == "" || req.CallID != history.ToolCallIDOf(marker.ID) || req.Tool != "SendPayment" ||
		req.Arguments != `{"invoice":"INV-9","amount":4200}` || req.Signal != "approve-payments" || req.TaskQueue != "" {
		t.Fatalf("the marker says %+v (id %s)", req, marker.ID)
	}
	must(t, env.Client.SignalWorkflow(ctx, "desk-INV-9", "", req.Signal, agent.Approval{CallID: req.CallID, Approved: true, By: "ada"}))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Paid." || tl.count("SendPayment") != 1 {
		t.Fatalf("result %+v, payments %d", res, tl.count("SendPayment"))
	}
	d, err := env.Client.DescribeWorkflow(ctx, "desk-INV-9", "")
	must(t, err)
	if d.Info.Status != api.StatusCompleted {
		t.Fatalf("status %s", d.Info.Status)
	}

	// The history replays, and so does the same history as the agent
	// recorded it before the marker carried anything (an empty Approval).
	evs, err := env.Client.GetHistory(ctx, "desk-INV-9", "")
	must(t, err)
	old, err := msgpack.Marshal(&history.Approval{})
	must(t, err)
	var older []history.Event
	for _, ev := range evs {
		if m, ok := ev.Attrs.(*history.MarkerRecorded); ok && m.Name == history.MarkerApprovalRequested {
			c := *m
			c.Data = history.Payload{Encoding: sdk.EncodingMsgpack, Data: old}
			ev.Attrs = &c
		}
		older = append(older, ev)
	}
	for name, h := range map[string][]history.Event{"recorded": evs, "recorded before": older} {
		r := worker.NewReplayer(worker.ReplayerOptions{})
		must(t, r.RegisterWorkflow(DeskPayer))
		if err := r.ReplayHistory(history.RunRef{WorkflowID: "desk-INV-9", RunID: run.RunID()}, h,
			worker.ReplayOptions{Chunks: client.NewChunkCache(env.Client.Service(), 0)}); err != nil {
			t.Fatalf("the history as %s does not replay: %v", name, err)
		}
	}
}
