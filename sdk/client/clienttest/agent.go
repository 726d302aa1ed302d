package clienttest

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// LookupQuery is Lookup's input.
type LookupQuery struct {
	Word string `json:"word"`
}

// Lookup is the suite agent's tool.
func Lookup(_ context.Context, q LookupQuery) (string, error) { return "found " + q.Word, nil }

// Explain is the suite's agent: one tool, streamed answers, a budget of
// one model call (so that its second is held until the budget is raised).
func Explain(ctx sdk.Context, question string) (agent.Result, error) {
	a := agent.New(ctx, agent.Options{
		Model:  "fake-1",
		Tools:  []agent.Tool{agent.NewTool(Lookup, "Look a word up.")},
		Budget: history.Budget{MaxTurns: 1},
		Stream: true,
	})
	return a.Run(ctx, question)
}

// The agent kit's typed methods: a run's live stream (Next until io.EOF),
// its transcript while its second model call is held by the budget, the
// budget raised (by the client's identity) so the call goes on; and their
// typed errors.
func testAgentKit(t *testing.T, s *suite) {
	const answer = "A cairn is a pile of stones."
	srv := httptest.NewServer(fakellm.New(fakellm.Script{fakellm.CallTool("Lookup", `{"word":"cairn"}`), fakellm.Say(answer)}))
	t.Cleanup(srv.Close)
	m, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "fake-1"})
	if err != nil {
		t.Fatal(err)
	}
	s.startWorker(func(w *worker.Worker) error {
		return errors.Join(w.RegisterWorkflow(Explain), w.RegisterActivity(Lookup), m.Register(w))
	})
	run := s.start(s.opts("explain"), Explain, "What is a cairn?")
	stream := s.c.WatchStream(s.ctx, "explain", "", 0)

	// Turn 1 streams its tool call and is done; turn 2 is held.
	next := func() client.StreamEvent {
		t.Helper()
		ev, err := stream.Next(s.ctx)
		if err != nil {
			t.Fatalf("Stream.Next: %v", err)
		}
		return ev
	}
	var first client.StreamEvent
	for ev := next(); ev.Kind != api.StreamDone; ev = next() {
		if first.Seq == 0 {
			first = ev
		}
		if ev.Kind != api.StreamToolCall || ev.ActivityType != agent.ModelActivity {
			t.Fatalf("turn 1 streamed %+v", ev)
		}
	}
	if first.ToolName != "Lookup" || stream.RunID() != run.RunID() {
		t.Fatalf("turn 1's first event %+v; the stream follows run %q", first, stream.RunID())
	}
	s.waitEvent("explain", "", 1, history.TypeBudgetExceeded)
	tr, err := s.c.GetTranscript(s.ctx, "explain", "")
	if err != nil {
		t.Fatal(err)
	}
	var calls []*api.ModelCallInfo
	var tool *api.ToolCallInfo
	for _, it := range tr.Items {
		if it.ModelCall != nil {
			calls = append(calls, it.ModelCall)
		}
		if it.ToolCall != nil {
			tool = it.ToolCall
		}
	}
	if tr.RunID != run.RunID() || tr.Status != api.StatusPaused || len(calls) != 2 || calls[0].State != api.CallCompleted ||
		calls[1].State != api.CallHeld || tool == nil || tool.Name != "Lookup" || tool.Result != "found cairn" ||
		tr.Budget == nil || tr.Budget.Exceeded == "" || len(tr.Budget.Held) != 1 {
		t.Fatalf("the held run's transcript: status %v, model calls %+v, tool %+v, budget %+v", tr.Status, calls, tool, tr.Budget)
	}

	st, err := s.c.UpdateBudget(s.ctx, client.BudgetUpdate{WorkflowID: "explain", Budget: history.Budget{MaxTurns: 3}, Reason: "worth finishing"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Budget.MaxTurns != 3 || st.Exceeded != "" {
		t.Fatalf("the raised budget %+v", st)
	}
	var text strings.Builder
	for {
		ev, err := stream.Next(s.ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Stream.Next after the raise: %v", err)
		}
		if ev.Kind == api.StreamText {
			text.WriteString(ev.Text)
		}
	}
	var res agent.Result
	if err := run.Get(s.ctx, &res); err != nil {
		t.Fatal(err)
	}
	if res.Final != answer || text.String() != answer {
		t.Fatalf("result %+v; streamed %q", res, text.String())
	}
	raised := s.waitEvent("explain", "", 1, history.TypeBudgetUpdated)
	for raised.Attrs.(*history.BudgetUpdated).WorkflowTaskCompletedEventID != 0 { // the workflow's own, at start
		raised = s.waitEvent("explain", "", raised.ID+1, history.TypeBudgetUpdated)
	}
	if u := raised.Attrs.(*history.BudgetUpdated); u.By == "" || u.Reason != "worth finishing" || u.Budget.MaxTurns != 3 {
		t.Fatalf("the raise in history: %+v", u)
	}

	// Typed errors: no such run; a stop with nothing held; a closed run.
	_, err = s.c.UpdateBudget(s.ctx, client.BudgetUpdate{WorkflowID: "nobody", Budget: history.Budget{MaxTurns: 1}, Reason: "x"})
	wantCode(t, "UpdateBudget of no run", err, api.ErrNotFound)
	_, err = s.c.GetTranscript(s.ctx, "nobody", "")
	wantCode(t, "GetTranscript of no run", err, api.ErrNotFound)
	_, err = s.c.WatchStream(s.ctx, "nobody", "", 0).Next(s.ctx)
	wantCode(t, "WatchStream of no run", err, api.ErrNotFound)
	_, err = s.c.UpdateBudget(s.ctx, client.BudgetUpdate{WorkflowID: "explain", Stop: true, Reason: "x"})
	if err == nil {
		t.Fatal("a stop of a closed run succeeded")
	}
	// A reader whose context ends gets its error, not an endless loop of
	// empty polls.
	s.start(s.opts("quiet"), WaitForCancel, nil)
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	if _, err := s.c.WatchStream(s.ctx, "quiet", "", 0).Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Stream.Next with its context canceled: %v", err)
	}
	// A stream opened after the run closed ends at once, after what the
	// window still holds.
	late := s.c.WatchStream(s.ctx, "explain", run.RunID(), 0)
	for {
		if _, err := late.Next(s.ctx); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("a closed run's stream: %v", err)
			}
			break
		}
	}
}
