package ui

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// GET /api/compare answers the comparison of two runs (a workflow id, or
// ID/RUN), by the view convention; it needs both and says which run it
// cannot find.
func TestCompareAPI(t *testing.T) {
	eng := newEngine(t)
	b := newBrowser(t, New(eng, Options{}))
	c := client.NewLocal(eng, client.Options{})
	w, err := worker.New(c, worker.Options{TaskQueue: "mail", Identity: "ui-test", GracefulStop: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterWorkflow(Notify); err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterActivity(Mail, activities.Options{Effect: activities.Idempotent}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var runIDs []string
	for _, to := range []string{"ada", "bob"} {
		run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "notify-" + to, TaskQueue: "mail"}, Notify, to)
		if err != nil {
			t.Fatal(err)
		}
		if err := run.Get(ctx, nil); err != nil {
			t.Fatal(err)
		}
		runIDs = append(runIDs, run.RunID())
	}

	get := func(a, bb string) (int, string) {
		code, body, _ := b.do("GET", "/api/compare?"+url.Values{"a": {a}, "b": {bb}}.Encode(), "", nil)
		return code, body
	}
	var v struct {
		Same       int `json:"same"`
		Divergence *struct {
			Step int `json:"step"`
			A    struct {
				Kind   string `json:"kind"`
				Detail string `json:"detail"`
			} `json:"a"`
		} `json:"divergence"`
		A struct {
			RunID     string `json:"runId"`
			Status    string `json:"status"`
			ToolCalls []struct {
				Name    string `json:"name"`
				Outcome string `json:"outcome"`
			} `json:"toolCalls"`
		} `json:"a"`
	}
	code, body := get("notify-ada/"+runIDs[0], "notify-ada")
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.Divergence != nil || v.Same == 0 || v.A.RunID != runIDs[0] ||
		v.A.Status != "completed" || len(v.A.ToolCalls) != 1 || v.A.ToolCalls[0].Name != "Mail" || v.A.ToolCalls[0].Outcome != "result" {
		t.Fatalf("a run and itself: %d %s", code, body)
	}
	code, body = get("notify-ada", "notify-bob")
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || v.Divergence == nil || v.Divergence.Step != 1 || v.Divergence.A.Kind != "start" ||
		v.Divergence.A.Detail != `"ada"` {
		t.Fatalf("two runs: %d %s", code, body)
	}
	if code, body := get("notify-ada", ""); code != 400 {
		t.Errorf("without b: %d %s", code, body)
	}
	if code, body := get("notify-ada", "nobody"); code != 404 {
		t.Errorf("a run that does not exist: %d %s", code, body)
	}
	if code, _, _ := b.do("GET", "/compare?a=notify-ada", "", nil); code != 200 {
		t.Errorf("the compare page: %d", code)
	}
}
