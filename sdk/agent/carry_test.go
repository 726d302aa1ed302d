package agent_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// TalkInput is LongTalker's input: the task, or the conversation carried
// from the run before.
type TalkInput struct {
	Task  string
	Carry *agent.Carry
}

// longSystem makes the conversation 24 KB before anyone speaks.
var longSystem = "You read invoices. " + strings.Repeat("Policy line. ", 2000)

// LongTalker is an agent that continues as new, carrying its
// conversation, whenever the engine suggests it.
func LongTalker(ctx sdk.Context, in TalkInput) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{
		Model:    "fake-1",
		System:   longSystem,
		Tools:    []agent.Tool{agent.NewTool(t.ReadInvoice, "Read an invoice")},
		MaxTurns: 50,
		Resume:   in.Carry,
		ContinueAsNew: func(ctx sdk.Context, c agent.Carry) error {
			return sdk.NewContinueAsNewError(ctx, LongTalker, TalkInput{Carry: &c})
		},
	})
	msg := in.Task
	if in.Carry != nil {
		msg = ""
	}
	return a.Run(ctx, msg)
}

// A long agent continues as new when the history grows past the
// suggestion, carrying its conversation by reference: the continue-as-new's
// input is a few hundred bytes while the conversation is over 24 KB, the
// next run's model call sends the model the whole conversation (the first
// run's system prompt and task included), and the agent finishes there.
func TestAgentContinuesAsNewCarryingItsTranscript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	script := fakellm.Script{}
	for i := range 6 {
		script = append(script, fakellm.CallTool("ReadInvoice", `{"id":"INV-`+string(rune('1'+i))+`"}`))
	}
	script = append(script, fakellm.Say("Read them all."))
	srv := fakellm.New(script).KeepRequests()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1"})
	must(t, err)
	env := storeEnv(t, testenv.Options{NoTimeSkipping: true, Engine: engine.Options{Limits: engine.Limits{SuggestContinueAsNewAt: 25}}})
	tl := &tools{calls: map[string]int{}}
	env.RegisterWorkflow(LongTalker)
	must(t, m.Register(env.Worker))
	env.RegisterActivity(tl.ReadInvoice)
	env.Start()

	var res agent.Result
	run, err := env.Client.ExecuteWorkflow(ctx, client.StartOptions{ID: "talker", TaskQueue: env.TaskQueue()}, LongTalker,
		TalkInput{Task: "Read invoices 1 to 6"}, &res)
	must(t, err)
	if res.Final != "Read them all." || tl.count("ReadInvoice") != 6 {
		t.Fatalf("result %+v, %d reads", res, tl.count("ReadInvoice"))
	}
	runs := 0
	for runID := run.RunID(); runID != ""; runs++ {
		evs, err := env.Client.GetHistory(ctx, "talker", runID)
		must(t, err)
		runID = ""
		last := evs[len(evs)-1]
		if can, ok := last.Attrs.(*history.WorkflowContinuedAsNew); ok {
			if n := len(can.Input.Data); n > 1000 || can.Input.ByRef() {
				t.Fatalf("run %d carried %d bytes (by reference: %v) into the next", runs+1, n, can.Input.ByRef())
			}
			runID = can.NewRunID
			t.Logf("run %d continued as new at event %d carrying %d bytes", runs+1, last.ID, len(can.Input.Data))
			var in TalkInput
			must(t, sdk.DefaultConverter().FromPayload(can.Input, &in))
			if in.Carry == nil || len(in.Carry.Tip) != 32 || in.Carry.Turns == 0 {
				t.Fatalf("carried %+v", in.Carry)
			}
		}
		if runs > 0 {
			for _, ev := range evs {
				if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.ActivityType == agent.ModelActivity && (!s.Input.ByRef() || len(s.Input.Data) > 0) {
					t.Fatalf("run %d's model call input is not a bare reference: %d bytes", runs+1, len(s.Input.Data))
				}
			}
		}
	}
	if runs < 2 {
		t.Fatalf("%d runs: the agent never continued as new", runs)
	}
	reqs := srv.Requests()
	t.Logf("%d runs; the last request is %d bytes", runs, reqs[len(reqs)-1].Size)
	msgs, err := reqs[len(reqs)-1].Messages()
	must(t, err)
	if len(msgs) < 14 || msgs[0]["role"] != "system" || msgs[0]["content"] != longSystem || msgs[1]["content"] != "Read invoices 1 to 6" {
		t.Fatalf("the last request has %d messages, starting %v / %v", len(msgs), msgs[0]["role"], msgs[1]["content"])
	}
	tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "talker"})
	must(t, err)
	if countItems(tr, api.ItemMessage) < 14 {
		t.Fatalf("the last run's transcript shows %d messages, want the whole conversation", countItems(tr, api.ItemMessage))
	}
	r := worker.NewReplayer(worker.ReplayerOptions{SuggestContinueAsNewAt: 25})
	must(t, r.RegisterWorkflow(LongTalker))
	for _, runID := range []string{run.RunID(), tr.RunID} {
		if err := r.ReplayWorkflow(ctx, env.Client, "talker", runID, worker.ReplayOptions{}); err != nil {
			t.Fatalf("replay of run %s: %v", runID, err)
		}
	}
}

func countItems(tr *api.GetTranscriptResponse, kind string) int {
	n := 0
	for _, it := range tr.Items {
		if it.Kind == kind {
			n++
		}
	}
	return n
}
