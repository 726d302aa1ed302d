package acceptance_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// ---- usage, budgets and live streams ----

// meter is a metered activity: each call uses 100 prompt and 50
// completion tokens and streams two pieces of text; its first attempt
// fails (having used tokens) and asks to be retried after a minute.
type meter struct{ calls atomic.Int32 }

func (m *meter) Think(ctx context.Context, n int) (int, error) {
	activities.RecordUsage(ctx, history.Usage{Model: "m1", PromptTokens: 100, CompletionTokens: 50, CachedTokens: 20})
	activities.Stream(ctx, activities.StreamDelta{Kind: "text", Text: "thinking "})
	if m.calls.Add(1) == 1 {
		return 0, activities.WithRetryAfter(errors.New("rate limited"), time.Minute)
	}
	activities.Stream(ctx, activities.StreamDelta{Kind: "text", Text: "done"})
	return n + 1, nil
}

// Budgeted sets a budget of 400 tokens and makes metered calls until one
// fails.
func Budgeted(ctx sdk.Context, calls int) (int, error) {
	var m *meter
	sdk.SetBudget(ctx, history.Budget{MaxTokens: 400})
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	n := 0
	for i := 0; i < calls; i++ {
		var err error
		if n, err = sdk.ExecuteActivity(ctx, m.Think, n).Get(ctx); err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestUsageBudgetAndStream(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{Engine: engine.Options{Pricing: engine.Pricing{"m1": {Input: 1, CachedInput: 0.5, Output: 2}}}})
	m := &meter{}
	env.RegisterWorkflow(Budgeted)
	env.RegisterActivity(m.Think, activities.Options{Metered: true})
	env.Start()
	run := start(t, ctx, env, "budgeted", Budgeted, 4)

	// Calls 1 (two attempts: 300 tokens) and 2 (150) cross 400: call 3 is
	// held and the run is paused with the reason, never silently going on.
	waitEvent(t, ctx, env.Client, "budgeted", run.RunID(), 0, func(ev history.Event) bool { return ev.Type() == history.TypeBudgetExceeded })
	d, err := env.Client.DescribeWorkflow(ctx, "budgeted", run.RunID())
	if err != nil {
		t.Fatal(err)
	}
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseBudget {
		t.Fatalf("status %s, pause %+v; want paused on the budget", d.Info.Status, d.Info.Pause)
	}
	if u := d.Usage.Total; u.Tokens() != 450 || u.Attempts != 3 || u.CachedTokens != 60 {
		t.Fatalf("run usage %+v, want 450 tokens over 3 attempts (the failed one included)", u)
	}
	// 3 × (80×1 + 20×0.5 + 50×2) / 1e6 dollars.
	if got, want := d.Usage.Total.CostUSD, 3*190/1e6; got < want*0.999 || got > want*1.001 {
		t.Fatalf("cost %v, want %v", got, want)
	}
	if d.WorkflowUsage == nil || d.WorkflowUsage.Total.Tokens() != 450 {
		t.Fatalf("workflow-id usage %+v", d.WorkflowUsage)
	}
	var first history.ActivityCompleted
	for _, ev := range events(t, ctx, env.Client, "budgeted", run.RunID()) {
		if c, ok := ev.Attrs.(*history.ActivityCompleted); ok && first.ScheduledEventID == 0 {
			first = *c
		}
	}
	if first.Usage.Attempts != 2 || first.Usage.Tokens() != 300 {
		t.Fatalf("the first call's event records %+v, want both attempts", first.Usage)
	}

	// The live stream: the first attempt's text, superseded; the second's, done.
	ws, err := env.Client.Service().WatchStream(ctx, &api.WatchStreamRequest{WorkflowID: "budgeted"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, ev := range ws.Events {
		if ev.ScheduledEventID == first.ScheduledEventID {
			kinds = append(kinds, string(ev.Kind)+":"+ev.Text)
		}
	}
	if want := "[text:thinking  superseded: text:thinking  text:done done:]"; fmtList(kinds) != want {
		t.Fatalf("stream of the first call %s, want %s", fmtList(kinds), want)
	}

	// A person raises the budget: the held call goes on; the next one is
	// held again; stopping it fails it, and the workflow sees why.
	if _, err := env.Client.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "budgeted",
		Budget: history.Budget{MaxTokens: 600}, Identity: "ada", Reason: "worth it"}); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ctx, env.Client, "budgeted", run.RunID(), first.ScheduledEventID, func(ev history.Event) bool {
		b, ok := ev.Attrs.(*history.BudgetExceeded)
		return ok && b.Used.Tokens() == 600
	})
	if _, err := env.Client.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "budgeted", Stop: true,
		Identity: "ada", Reason: "enough"}); err != nil {
		t.Fatal(err)
	}
	var n int
	err = run.Get(ctx, &n)
	var app *sdk.ApplicationError
	if !errors.As(err, &app) || app.Type != "BudgetExceeded" {
		t.Fatalf("run ended with %v, want a BudgetExceeded failure", err)
	}
}

func fmtList(s []string) string {
	out := "["
	for i, x := range s {
		if i > 0 {
			out += " "
		}
		out += x
	}
	return out + "]"
}
