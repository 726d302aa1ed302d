package view_test

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// Query is the Lookup tool's argument.
type Query struct {
	Q string `json:"q"`
}

// Lookup is the agent's one tool.
func Lookup(_ context.Context, q Query) (string, error) { return "about " + q.Q, nil }

// Researcher is the agent the comparison is tested on.
func Researcher(ctx sdk.Context, topic string) (agent.Result, error) {
	a := agent.New(ctx, agent.Options{Model: "fake-1", System: "You look things up.",
		Tools: []agent.Tool{agent.NewTool(Lookup, "Look a topic up.")}})
	return a.Run(ctx, "Tell me about "+topic)
}

// researcherRuns runs Researcher twice on one engine: run "a" with a
// model that looks up "badger" at turn 2, run "b" with one that answers
// at turn 2 instead. Both look up "cairn" at turn 1.
func researcherRuns(t *testing.T) (a, b *view.RunData) {
	t.Helper()
	var variant atomic.Int32
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		switch {
		case r.Turn == 0:
			return fakellm.CallTool("Lookup", `{"q":"cairn"}`)
		case r.Turn == 1 && variant.Load() == 0:
			return fakellm.CallTool("Lookup", `{"q":"badger"}`)
		}
		return fakellm.Say("Cairn is a workflow engine.")
	})
	hs := httptest.NewServer(model)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Options{Engine: engine.Options{Pricing: engine.Pricing{"fake-1": {Input: 1, Output: 2}}}})
	env.RegisterWorkflow(Researcher)
	if err := m.Register(env.Worker); err != nil {
		t.Fatal(err)
	}
	env.RegisterActivity(Lookup)
	env.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	load := func(id string) *view.RunData {
		var res agent.Result
		if err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: id}, Researcher, "cairn", &res); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
		d, err := view.LoadRun(ctx, env.Client.Service(), id, "")
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a = load("a")
	variant.Store(1)
	return a, load("b")
}

// prefix is the run cut after its first n events (a run that has not got
// further yet).
func prefix(d *view.RunData, n int) *view.RunData {
	c := *d
	c.Events = d.Events[:n]
	return &c
}

// forkOf is a fork of base at its event at: base's events before it, the
// WorkflowReset marker, then rest's events from its own event at on,
// numbered one more (what issue 20's fork records).
func forkOf(base, rest *view.RunData, at int64) *view.RunData {
	f := &view.RunData{WorkflowID: "fork-1", RunID: strings.Repeat("f", 32)}
	f.Events = append(f.Events, base.Events[:at-1]...)
	f.Events = append(f.Events, history.Event{ID: at, Time: base.Events[at-2].Time,
		Attrs: &history.WorkflowReset{Kind: "fork", BaseWorkflowID: base.WorkflowID, BaseRunID: base.RunID, AtEventID: at}})
	shift := func(id int64) int64 {
		if id >= at {
			return id + 1
		}
		return id
	}
	for _, ev := range rest.Events[at-1:] {
		ev.ID = shift(ev.ID)
		switch a := ev.Attrs.(type) {
		case *history.ActivityStarted:
			c := *a
			c.ScheduledEventID = shift(c.ScheduledEventID)
			ev.Attrs = &c
		case *history.ActivityCompleted:
			c := *a
			c.ScheduledEventID = shift(c.ScheduledEventID)
			ev.Attrs = &c
		}
		f.Events = append(f.Events, ev)
	}
	tr := *rest.Transcript
	tr.Items = nil
	for _, it := range rest.Transcript.Items {
		if it.ModelCall != nil {
			c := *it.ModelCall
			c.ScheduledEventID = shift(c.ScheduledEventID)
			it.ModelCall = &c
		}
		if it.ToolCall != nil {
			c := *it.ToolCall
			c.ScheduledEventID = shift(c.ScheduledEventID)
			it.ToolCall = &c
		}
		tr.Items = append(tr.Items, it)
	}
	f.Transcript = &tr
	return f
}

// firstTurn2 is the index of the event that schedules the second model
// call.
func firstTurn2(t *testing.T, d *view.RunData) int64 {
	t.Helper()
	for _, s := range view.Steps(d.Events, d.Transcript) {
		if s.Kind == "model call" && s.Turn == 2 {
			return s.EventID
		}
	}
	t.Fatalf("%s has no second model call", d.WorkflowID)
	return 0
}

func TestCompareRuns(t *testing.T) {
	a, b := researcherRuns(t)
	at := firstTurn2(t, b)
	for _, tc := range []struct {
		name     string
		a, b     *view.RunData
		relation string
		// diverge: the kinds and turn of the diverging steps ("" for
		// none on that side); no divergence when both are "-".
		divA, divB string
		turn       int
	}{
		{name: "itself", a: a, b: a, divA: "-", divB: "-"},
		{name: "a different answer at turn 2", a: a, b: b, divA: "model call outcome", divB: "model call outcome", turn: 2},
		{name: "the same prefix, one side goes on", a: prefix(a, int(at)), b: a, divA: "", divB: "model call outcome", turn: 2},
		{name: "a fork at turn 2", a: a, b: forkOf(a, b, at), relation: "B was forked from A at event " + itoa(at),
			divA: "model call outcome", divB: "model call outcome", turn: 2},
		{name: "a fork, the other way round", a: forkOf(a, b, at), b: a, relation: "A was forked from B at event " + itoa(at),
			divA: "model call outcome", divB: "model call outcome", turn: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := view.Compare(tc.a, tc.b)
			if c.Relation != tc.relation {
				t.Errorf("relation %q, want %q", c.Relation, tc.relation)
			}
			if tc.divA == "-" {
				if c.Divergence != nil {
					t.Fatalf("diverges at step %d: %+v / %+v", c.Divergence.Step, c.Divergence.A, c.Divergence.B)
				}
				return
			}
			d := c.Divergence
			if d == nil {
				t.Fatal("no divergence")
			}
			for _, side := range []struct {
				s    *view.Step
				want string
			}{{d.A, tc.divA}, {d.B, tc.divB}} {
				switch {
				case side.want == "" && side.s != nil:
					t.Errorf("step %d: %v, want none", d.Step, side.s)
				case side.want != "" && (side.s == nil || side.s.Kind != side.want || side.s.Turn != tc.turn):
					t.Errorf("step %d: %v, want a %s at turn %d", d.Step, side.s, side.want, tc.turn)
				}
			}
			if d.Step != c.Same+1 {
				t.Errorf("step %d after %d alike", d.Step, c.Same)
			}
		})
	}

	c := view.Compare(a, b)
	if d := c.Divergence; !strings.Contains(d.A.Detail, `asks for Lookup({"q":"badger"})`) || d.B.Detail != `"Cairn is a workflow engine."` {
		t.Errorf("the diverging answers: %q / %q", d.A.Detail, d.B.Detail)
	}
	checkSide(t, "A", c.A, 3, []string{`Lookup {"q":"cairn"} result about cairn`, `Lookup {"q":"badger"} result about badger`})
	checkSide(t, "B", c.B, 2, []string{`Lookup {"q":"cairn"} result about cairn`})
	if !(c.A.Usage.CostUSD > c.B.Usage.CostUSD && c.B.Usage.CostUSD > 0) || c.A.Usage.Tokens() <= c.B.Usage.Tokens() {
		t.Errorf("usage: A %+v, B %+v; A made one model call more", c.A.Usage, c.B.Usage)
	}
}

// checkSide checks one side's model calls (count, their usage adding up
// to the total) and tool calls ("name arguments outcome result").
func checkSide(t *testing.T, name string, s view.RunSummary, modelCalls int, tools []string) {
	t.Helper()
	if s.Status.String() != "completed" || !strings.Contains(s.Result, "Cairn is a workflow engine.") {
		t.Errorf("%s: %s, result %s", name, s.Status, s.Result)
	}
	var sum history.Usage
	for i, mc := range s.ModelCalls {
		if mc.Turn != i+1 || mc.State != "completed" || mc.Usage.Tokens() == 0 {
			t.Errorf("%s: model call %+v", name, mc)
		}
		sum = sum.Add(mc.Usage)
	}
	if len(s.ModelCalls) != modelCalls || sum.Tokens() != s.Usage.Tokens() {
		t.Errorf("%s: %d model calls (%+v), want %d; their tokens %d, the total's %d", name, len(s.ModelCalls), s.ModelCalls, modelCalls,
			sum.Tokens(), s.Usage.Tokens())
	}
	var got []string
	for _, tc := range s.ToolCalls {
		got = append(got, strings.Join([]string{tc.Name, tc.Arguments, tc.Outcome, strings.Trim(tc.Result, `"`)}, " "))
	}
	if strings.Join(got, "\n") != strings.Join(tools, "\n") {
		t.Errorf("%s: tool calls\n%s\nwant\n%s", name, strings.Join(got, "\n"), strings.Join(tools, "\n"))
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A fork's calls answered from its base's ledger say which run did them;
// held and in-doubt calls say so.
func TestCompareCallOutcomes(t *testing.T) {
	p := history.Payload{Encoding: "json/plain", Data: []byte(`"ok"`)}
	sched := func(id int64, typ string) history.Event {
		return history.Event{ID: id, Attrs: &history.ActivityScheduled{ActivityID: itoa(id), ActivityType: typ, Input: p}}
	}
	d := &view.RunData{WorkflowID: "fork-1", RunID: strings.Repeat("f", 32), Events: []history.Event{
		{ID: 1, Attrs: &history.WorkflowStarted{WorkflowType: "Pay"}},
		sched(2, "Charge"), sched(3, "Email"), sched(4, "Refund"), sched(5, "Read"),
		{ID: 6, Attrs: &history.ActivityDeduplicated{ScheduledEventID: 2, Result: p, OriginalWorkflowID: "pay-1", OriginalRunID: "r1"}},
		{ID: 7, Attrs: &history.ActivityHeld{ScheduledEventID: 3, Reason: "not in the base's ledger"}},
		{ID: 8, Attrs: &history.ActivityOutcomeUnknown{ScheduledEventID: 4, Reason: "lease lost"}},
		{ID: 9, Attrs: &history.ActivityCompleted{ScheduledEventID: 5, Result: p}},
	}}
	var got []string
	for _, c := range view.Compare(d, d).A.ToolCalls {
		got = append(got, c.Name+" "+c.Outcome+" "+c.From)
	}
	want := []string{"Charge answered from ledger pay-1/r1", "Email held ", "Refund in doubt ", "Read result "}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("calls %q, want %q", got, want)
	}
}

// Two runs that ran two activities at once take the same steps whichever
// answer came first; a different answer is a divergence.
func TestCompareOutcomesOfConcurrentActivities(t *testing.T) {
	p := func(s string) history.Payload {
		pl, err := sdk.DefaultConverter().ToPayload(s)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	run := func(first, second int64, r2 string) *view.RunData {
		return &view.RunData{WorkflowID: "w", Events: []history.Event{
			{ID: 1, Attrs: &history.WorkflowStarted{WorkflowType: "Both"}},
			{ID: 2, Attrs: &history.ActivityScheduled{ActivityID: "1", ActivityType: "Read", Input: p("x")}},
			{ID: 3, Attrs: &history.ActivityScheduled{ActivityID: "2", ActivityType: "Read", Input: p("y")}},
			{ID: 4, Attrs: &history.ActivityCompleted{ScheduledEventID: first, Result: p(map[int64]string{2: "X", 3: r2}[first])}},
			{ID: 5, Attrs: &history.ActivityCompleted{ScheduledEventID: second, Result: p(map[int64]string{2: "X", 3: r2}[second])}},
			{ID: 6, Attrs: &history.WorkflowCompleted{}},
		}}
	}
	if c := view.Compare(run(2, 3, "Y"), run(3, 2, "Y")); c.Divergence != nil || c.Same != 6 {
		t.Errorf("the answers in another order: %+v", c.Divergence)
	}
	c := view.Compare(run(2, 3, "Y"), run(3, 2, "Z"))
	if d := c.Divergence; d == nil || d.Step != 5 || d.A.Detail != `"Y"` || d.B.Detail != `"Z"` || d.A.EventID != 5 || d.B.EventID != 4 {
		t.Errorf("another answer: %+v %+v", d, c)
	}
}
