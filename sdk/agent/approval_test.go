package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// jsonSignal is a signal's value as the CLI sends it (--input JSON).
func jsonSignal(s string) history.Payload {
	return history.Payload{Encoding: sdk.EncodingJSON, Data: []byte(s)}
}

// isMarker matches the marker events named name.
func isMarker(name string) func(history.Event) bool {
	return func(ev history.Event) bool {
		m, ok := ev.Attrs.(*history.MarkerRecorded)
		return ok && m.Name == name
	}
}

// nth matches the n-th event match matches.
func nth(n int, match func(history.Event) bool) func(history.Event) bool {
	seen := 0
	return func(ev history.Event) bool {
		if match(ev) {
			seen++
		}
		return seen == n
	}
}

// An approval a person mistypes decides nothing: {} , a misspelt key, a
// decision that is not a boolean are recorded as ignored — saying what is
// wrong — and the call keeps waiting; the JSON-tag spelling
// ({"approved": true, "by": "ada"}) is an approval, as the Go field names
// are. Before, each of the mistyped ones rejected the call, and the model
// was told the approval had timed out.
func TestMistypedApprovalDecidesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, srv := newEnv(t, fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.Say("Paid INV-9."),
	})
	const id = "mistyped"
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: env.TaskQueue()}, Payer, "INV-9")
	must(t, err)
	waitFor(t, ctx, env.Client, id, isMarker(history.MarkerApprovalRequested))
	for i, tc := range []struct {
		signal string
		why    string
	}{
		{`{}`, `does not say whether the call is approved`},
		{`{"aproved":true,"by":"ada"}`, `unknown field "aproved"`},
		{`{"APPROVED":true}`, `unknown field "APPROVED"`},
		{`{"Approved":"yes","By":"ada"}`, `"Approved" is a string, not true or false`},
		{`{"approved":true,"Approved":false}`, `"Approved" and "approved" are the same field`},
		{`{"Approved":true,"By":7}`, `"By" is a number, not a string`},
	} {
		must(t, env.Client.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, jsonSignal(tc.signal)))
		waitFor(t, ctx, env.Client, id, nth(i+1, isMarker(history.MarkerApprovalIgnored)))
		tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id})
		must(t, err)
		if len(tr.Ignored) != i+1 || !strings.Contains(tr.Ignored[i].Why, "not an agent.Approval") || !strings.Contains(tr.Ignored[i].Why, tc.why) {
			t.Fatalf("%s: ignored approvals %+v, want the last to say %q", tc.signal, tr.Ignored, tc.why)
		}
		if st := paymentState(tr); st != api.CallAwaitingApproval || tl.count("SendPayment") != 0 {
			t.Fatalf("after %s the payment is %q and ran %d times", tc.signal, st, tl.count("SendPayment"))
		}
	}
	must(t, env.Client.SignalWorkflow(ctx, id, "", agent.ApprovalSignal, jsonSignal(`{"approved":true,"by":"ada"}`)))
	var res agent.Result
	must(t, run.Get(ctx, &res))
	tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: id})
	must(t, err)
	if res.Final != "Paid INV-9." || tl.count("SendPayment") != 1 || paymentState(tr) != api.CallCompleted || approvedBy(tr) != "ada" || srv.Calls() != 2 {
		t.Fatalf("result %+v; payment ran %d times, %q by %q", res, tl.count("SendPayment"), paymentState(tr), approvedBy(tr))
	}
	replay(t, ctx, env, id, run.RunID())
}

// A rejection that names nobody is a rejection, not a timeout: the model
// is told so (it was told "the approval timed out").
func TestRejectionNamingNobodyIsNotATimeout(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, _ := newEnv(t, fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice":"INV-9","amount":4200}`),
		fakellm.Say("Not paid."),
	})
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "anonymous", TaskQueue: env.TaskQueue()}, Payer, "INV-9")
	must(t, err)
	waitFor(t, ctx, env.Client, "anonymous", isMarker(history.MarkerApprovalRequested))
	must(t, env.Client.SignalWorkflow(ctx, "anonymous", "", agent.ApprovalSignal, jsonSignal(`{"approved":false}`)))
	must(t, run.Get(ctx, nil))
	tr, err := env.Client.Service().GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "anonymous"})
	must(t, err)
	told := toolMessages(tr)
	if tl.count("SendPayment") != 0 || len(told) != 1 || told[0] != "rejected (the approval names nobody). The tool did not run." {
		t.Fatalf("payment ran %d times; the model was told %q", tl.count("SendPayment"), told)
	}
	replay(t, ctx, env, "anonymous", run.RunID())
}

// A history recorded before approvals were read strictly replays: there,
// {"approved": true, "by": "ada"} rejected the first call and
// {"Approved": false} the second, and the model was told both had timed
// out. testdata/legacy-approvals.json was recorded (with its chunks) by
// the agent of commit d9f8459 running Payer with those two signals; the
// code reads them as recorded, because the history has no version marker.
func TestLegacyApprovalHistoryReplays(t *testing.T) {
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Payer))
	var trace strings.Builder
	must(t, r.ReplayFile("testdata/legacy-approvals.json", worker.ReplayOptions{Trace: &trace}))
	if strings.Contains(trace.String(), "strict-approvals") {
		t.Fatalf("the replay recorded a version marker:\n%s", trace.String())
	}
}

func paymentState(tr *api.GetTranscriptResponse) string {
	for _, it := range tr.Items {
		if it.ToolCall != nil && it.ToolCall.Name == "SendPayment" {
			return it.ToolCall.State
		}
	}
	return ""
}

func approvedBy(tr *api.GetTranscriptResponse) string {
	for _, it := range tr.Items {
		if it.ToolCall != nil && it.ToolCall.Name == "SendPayment" {
			return it.ToolCall.ApprovedBy
		}
	}
	return ""
}

func toolMessages(tr *api.GetTranscriptResponse) []string {
	var out []string
	for _, it := range tr.Items {
		if it.Message != nil && it.Message.Role == "tool" {
			out = append(out, it.Message.Content)
		}
	}
	return out
}

// replay replays the run's history through the code, as a new worker
// would.
func replay(t *testing.T, ctx context.Context, env *testenv.Env, id, runID string, workflows ...any) {
	t.Helper()
	if len(workflows) == 0 {
		workflows = []any{Payer}
	}
	evs, err := env.Client.GetHistory(ctx, id, runID)
	must(t, err)
	r := worker.NewReplayer(worker.ReplayerOptions{})
	for _, wf := range workflows {
		must(t, r.RegisterWorkflow(wf))
	}
	must(t, r.ReplayHistory(history.RunRef{WorkflowID: id, RunID: runID}, evs,
		worker.ReplayOptions{Chunks: client.NewChunkCache(env.Client.Service(), 0)}))
}
