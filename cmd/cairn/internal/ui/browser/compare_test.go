package browser

import (
	"context"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// Topic is the Lookup tool's argument.
type Topic struct {
	Q string `json:"q"`
}

// Lookup is the compared agent's one tool.
func Lookup(_ context.Context, q Topic) (string, error) { return "about " + q.Q, nil }

// Researcher looks a topic up and answers.
func Researcher(ctx sdk.Context, topic string) (agent.Result, error) {
	a := agent.New(ctx, agent.Options{Model: "fake-1", System: "You look things up.",
		Tools: []agent.Tool{agent.NewTool(Lookup, "Look a topic up.")}})
	return a.Run(ctx, "Tell me about "+topic)
}

// Two runs of one agent whose model answers differently at turn 2, side
// by side: the compare page (opened from a run's "Compare with…") shows
// where they diverge, both answers, and each run's tool calls.
func TestWebUIComparesTwoRuns(t *testing.T) {
	exe := chromium(t)
	var variant atomic.Int32
	model := httptest.NewServer(fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		switch {
		case r.Turn == 0:
			return fakellm.CallTool("Lookup", `{"q":"cairn"}`)
		case r.Turn == 1 && variant.Load() == 0:
			return fakellm.CallTool("Lookup", `{"q":"badger"}`)
		}
		return fakellm.Say("Cairn is a workflow engine.")
	}))
	t.Cleanup(model.Close)
	m, err := llm.New(llm.Config{BaseURL: model.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.New(t, testenv.Options{Engine: engine.Options{Pricing: engine.Pricing{"fake-1": {Input: 2.5, Output: 10}}}})
	env.RegisterWorkflow(Researcher)
	if err := m.Register(env.Worker); err != nil {
		t.Fatal(err)
	}
	env.RegisterActivity(Lookup)
	env.Start()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, id := range []string{"research-a", "research-b"} {
		variant.Store(int32(i))
		if err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: id}, Researcher, "cairn", nil); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	srv := httptest.NewServer(ui.New(env.Engine, ui.Options{}))
	t.Cleanup(srv.Close)

	bctx, _ := browse(t, exe)
	run(t, bctx, "open a run and follow its compare link",
		chromedp.Navigate(srv.URL+"/runs/research-a"),
		until(`document.querySelector("#compare-with") !== null`),
		chromedp.Click(css("#compare-with")),
		until(`location.pathname === "/compare" && document.querySelector('#compare-form [name="b"]') === document.activeElement`),
	)
	if a := textOf(t, bctx, "#compare"); !strings.Contains(a, "Name two runs") {
		t.Fatalf("the compare page without B: %q", a)
	}
	run(t, bctx, "name run B",
		chromedp.SendKeys(css(`#compare-form [name="b"]`), "research-b"),
		chromedp.Click(css(`#compare-form button[type="submit"]`)),
		until(`document.querySelector("#divergence") !== null`),
	)
	shot(t, bctx, screenshotDir(t), "compare")
	if u, _ := chromedp.Run(bctx, chromedp.Location()); !strings.Contains(u, "b="+url.QueryEscape("research-b")) {
		t.Errorf("the page's address does not name B: %s", u)
	}
	d := textOf(t, bctx, "#divergence")
	for _, want := range []string{"Diverge at step 7", "model call outcome (turn 2)", `asks for Lookup({"q":"badger"})`, `"Cairn is a workflow engine."`} {
		if !strings.Contains(d, want) {
			t.Errorf("the divergence lacks %q:\n%s", want, d)
		}
	}
	a, b := textOf(t, bctx, "#side-a .tool-calls"), textOf(t, bctx, "#side-b .tool-calls")
	if !strings.Contains(a, `{"q":"badger"}`) || !strings.Contains(a, "about badger") || strings.Count(a, "Lookup") != 2 {
		t.Errorf("run A's tool calls:\n%s", a)
	}
	if strings.Contains(b, "badger") || strings.Count(b, "Lookup") != 1 || !strings.Contains(b, "result") {
		t.Errorf("run B's tool calls:\n%s", b)
	}
	if mc := textOf(t, bctx, "#side-b .model-calls"); !strings.Contains(mc, "Cairn is a workflow engine.") || !strings.Contains(mc, "$0.00") {
		t.Errorf("run B's model calls:\n%s", mc)
	}
}
