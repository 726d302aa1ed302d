package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// counting is an api.Service that counts the calls the UI makes.
type counting struct {
	api.Service
	mu    sync.Mutex
	calls map[string]int
}

func (c *counting) count(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[m]++
}

func (c *counting) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := c.calls
	c.calls = map[string]int{}
	return m
}

func (c *counting) ListWorkflows(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	c.count("ListWorkflows")
	return c.Service.ListWorkflows(ctx, req)
}

func (c *counting) DescribeWorkflow(ctx context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	c.count("DescribeWorkflow")
	return c.Service.DescribeWorkflow(ctx, req)
}

func (c *counting) ListEffects(ctx context.Context, req *api.ListEffectsRequest) (*api.ListEffectsResponse, error) {
	c.count("ListEffects")
	return c.Service.ListEffects(ctx, req)
}

// Think makes two metered calls: with a budget of one, it pauses.
func Think(ctx sdk.Context, topic string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	sdk.SetBudget(ctx, history.Budget{MaxTurns: 1})
	var out string
	for range 2 {
		r, err := sdk.ExecuteActivity(ctx, Ponder, topic).Get(ctx)
		if err != nil {
			return "", err
		}
		out += r
	}
	return out, nil
}

// Ponder is a metered activity.
func Ponder(ctx context.Context, topic string) (string, error) {
	activities.RecordUsage(ctx, history.Usage{Model: "m", PromptTokens: 1, CompletionTokens: 1})
	return topic + ".", nil
}

// pausedThinkers starts n Think runs on a worker and waits until each is
// paused on its budget.
func pausedThinkers(t *testing.T, n int) *engine.Engine {
	t.Helper()
	eng := newEngine(t)
	c := client.NewLocal(eng, client.Options{})
	w, err := worker.New(c, worker.Options{TaskQueue: "think", Identity: "ui-test", GracefulStop: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterWorkflow(Think); err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterActivity(Ponder, activities.Options{Metered: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	for i := range n {
		if _, err := c.StartWorkflow(ctx, client.StartOptions{ID: fmt.Sprintf("think-%d", i), TaskQueue: "think"}, Think, "why"); err != nil {
			t.Fatal(err)
		}
	}
	// Wait (on the run's events, not on time) until each is paused on its budget.
	for i := range n {
		id := fmt.Sprintf("think-%d", i)
		for {
			d, err := eng.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: id})
			if err != nil {
				t.Fatal(err)
			}
			if d.Info.Status == api.StatusPaused {
				break
			}
			if _, err := eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, FromEventID: d.Info.HistoryLength + 1, WaitNewEvents: true}); err != nil {
				t.Fatalf("%s did not pause: %v", id, err)
			}
		}
	}
	return eng
}

// The paused page polls the list of paused runs: one engine call however
// many runs wait; a card's details (arguments, ledger entry) are asked once
// per card, not on every poll.
func TestPausedPagePollsOneCall(t *testing.T) {
	const n = 3
	eng := pausedThinkers(t, n)
	svc := &counting{Service: eng, calls: map[string]int{}}
	b := newBrowser(t, New(svc, Options{}))
	code, body, _ := b.do("GET", "/api/paused", "", nil)
	var v struct {
		Runs []struct {
			Info struct {
				WorkflowID string `json:"workflowId"`
				RunID      string `json:"runId"`
				Pause      struct {
					Kind string `json:"kind"`
				} `json:"pause"`
			} `json:"info"`
		} `json:"runs"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || len(v.Runs) != n || v.Runs[0].Info.Pause.Kind != "budget" {
		t.Fatalf("/api/paused: %d %s", code, body)
	}
	if calls := svc.take(); calls["ListWorkflows"] != 1 || len(calls) != 1 {
		t.Fatalf("one poll of the paused page made %v engine calls, want one ListWorkflows", calls)
	}
	code, body, _ = b.do("GET", "/api/pause?id="+v.Runs[1].Info.WorkflowID+"&run="+v.Runs[1].Info.RunID, "", nil)
	var card struct {
		Info struct {
			Pause struct {
				Kind string `json:"kind"`
			} `json:"pause"`
		} `json:"info"`
		Activity struct {
			State string `json:"state"`
		} `json:"activity"`
		Budget struct { // the budget card shows the current limits
			Budget struct {
				MaxTurns int64 `json:"maxTurns"`
			} `json:"budget"`
		} `json:"budget"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &card) != nil || card.Info.Pause.Kind != "budget" || card.Activity.State != "held" ||
		card.Budget.Budget.MaxTurns != 1 {
		t.Fatalf("/api/pause: %d %s", code, body)
	}
}

// The budget form changes only the limits it is given: raising one leaves
// the others as they were (as the CLI's budget does), instead of lifting
// them.
func TestBudgetFormKeepsTheLimitsNotGiven(t *testing.T) {
	eng := pausedThinkers(t, 1)
	b := newBrowser(t, New(eng, Options{}))
	b.session()
	code, body := b.action("/api/budget", `{"workflowId":"think-0","maxTokens":100,"reason":"more tokens","by":"ada"}`)
	var resp struct {
		Budget struct {
			Budget struct {
				MaxTokens int64 `json:"maxTokens"`
				MaxTurns  int64 `json:"maxTurns"`
			} `json:"budget"`
		} `json:"budget"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &resp) != nil || resp.Budget.Budget.MaxTokens != 100 || resp.Budget.Budget.MaxTurns != 1 {
		t.Fatalf("raise the tokens only: %d %s", code, body)
	}
	if code, body := b.action("/api/budget", `{"workflowId":"think-0","reason":"nothing","by":"ada"}`); code != 400 || !strings.Contains(body, "give a new limit") {
		t.Fatalf("a raise of nothing: %d %s", code, body)
	}
}

func (c *counting) GetHistory(ctx context.Context, req *api.GetHistoryRequest) (*api.GetHistoryResponse, error) {
	c.count("GetHistory")
	return c.Service.GetHistory(ctx, req)
}

// A run stream whose history cannot be read (a quarantined run: described,
// but its history refused) ends with a failure event at once. It used to
// read the poll's context after canceling it, which made every error look
// like "no news within refreshEvery": it looped on GetHistory as fast as
// the engine answered.
func TestRunStreamEndsOnAFailure(t *testing.T) {
	bs, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	st := faultstore.New(bs)
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer eng.Close()
	ctx := context.Background()
	r, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "s-1", WorkflowType: "W", TaskQueue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	ref := history.RunRef{WorkflowID: "s-1", RunID: r.RunID}
	for _, op := range []faultstore.Op{faultstore.OpReadEvents, faultstore.OpEvents} {
		st.Inject(faultstore.Rule{Op: op, Match: faultstore.RunIs(ref), Err: faultstore.Corrupt("event 1 fails its checksum")})
	}
	svc := &counting{Service: eng, calls: map[string]int{}}
	srv := httptest.NewServer(New(svc, Options{}))
	defer srv.Close()
	c := &http.Client{Timeout: 30 * time.Second} // a bound on the failure, not a wait
	resp, err := c.Get(srv.URL + "/api/stream/run?id=s-1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream did not end (%d GetHistory calls): %v", svc.take()["GetHistory"], err)
	}
	if !strings.Contains(string(body), "event: run") || !strings.Contains(string(body), "event: failure") || !strings.Contains(string(body), `"code":"data_corrupt"`) {
		t.Fatalf("stream: %s", body)
	}
	if n := svc.take()["GetHistory"]; n > 2 {
		t.Fatalf("%d GetHistory calls, want at most 2 (the run page's first event read, and the stream's)", n)
	}
}

// watching is an api.Service that hands each WatchStream request to the
// test before answering it.
type watching struct {
	api.Service
	calls chan *api.WatchStreamRequest
}

func (w *watching) WatchStream(ctx context.Context, req *api.WatchStreamRequest) (*api.WatchStreamResponse, error) {
	select {
	case w.calls <- req:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return w.Service.WatchStream(ctx, req)
}

// droppedStream starts a run whose activity attempt published one delta
// larger than the engine's stream window: the window keeps nothing of it,
// and a watcher from the start is told of a gap with no events.
func droppedStream(t *testing.T, eng *engine.Engine, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Identity: "w",
		Commands: []api.Command{{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1",
			ActivityType: "Model", Options: history.ActivityOptions{StartToCloseTimeout: time.Hour}}}}}); err != nil {
		t.Fatal(err)
	}
	at, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || at.Task == nil {
		t.Fatalf("poll activity: %+v %v", at, err)
	}
	big := strings.Repeat("x", 3<<19) // 1.5 MiB: more than the window's 1 MiB, less than a payload's 2 MiB
	if _, err := eng.PublishStream(ctx, &api.PublishStreamRequest{TaskToken: at.Task.TaskToken,
		Deltas: []api.StreamDelta{{Kind: api.StreamText, Text: big}}}); err != nil {
		t.Fatal(err)
	}
	r, err := eng.WatchStream(ctx, &api.WatchStreamRequest{WorkflowID: id})
	if err != nil || !r.Gap || len(r.Events) != 0 {
		t.Fatalf("the stream after an oversized delta: %+v %v, want a gap and no events", r, err)
	}
}

// A stream whose window dropped everything (a gap and no events) is read
// on from its next event. The agent page's stream used to ask again after
// the same event, get the same gap at once, and loop as fast as the engine
// answered.
func TestAgentStreamGoesOnAfterAGap(t *testing.T) {
	eng := newEngine(t)
	droppedStream(t, eng, "gap-1")
	svc := &watching{Service: eng, calls: make(chan *api.WatchStreamRequest)}
	srv := httptest.NewServer(New(svc, Options{}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a bound on a failure, not a wait
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/stream/agent?id=gap-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if first := <-svc.calls; first.AfterSeq != 0 {
		t.Fatalf("the first watch: after %d, want 0", first.AfterSeq)
	}
	if second := <-svc.calls; second.AfterSeq != 1 {
		t.Fatalf("the watch after the gap: after %d, want 1 (the dropped delta's)", second.AfterSeq)
	}
}

// unwatchable is an api.Service whose WatchStream fails at once.
type unwatchable struct {
	api.Service
	mu    sync.Mutex
	calls int
}

func (u *unwatchable) WatchStream(ctx context.Context, req *api.WatchStreamRequest) (*api.WatchStreamResponse, error) {
	u.mu.Lock()
	u.calls++
	u.mu.Unlock()
	return nil, api.Errorf(api.ErrUnavailable, "the stream is not served")
}

// An agent stream whose watch fails ends with a failure event at once (the
// same mistake as the run stream's: a failure taken for "no news").
func TestAgentStreamEndsOnAFailure(t *testing.T) {
	eng := newEngine(t)
	if _, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "a-1", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	svc := &unwatchable{Service: eng}
	srv := httptest.NewServer(New(svc, Options{}))
	defer srv.Close()
	c := &http.Client{Timeout: 30 * time.Second} // a bound on the failure, not a wait
	resp, err := c.Get(srv.URL + "/api/stream/agent?id=a-1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	svc.mu.Lock()
	n := svc.calls
	svc.mu.Unlock()
	if err != nil {
		t.Fatalf("the stream did not end (%d WatchStream calls): %v", n, err)
	}
	if !strings.Contains(string(body), "event: failure") || !strings.Contains(string(body), `"code":"unavailable"`) || n != 1 {
		t.Fatalf("%d WatchStream calls, stream: %s", n, body)
	}
}
