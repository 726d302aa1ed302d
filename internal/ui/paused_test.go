package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
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

// The paused page polls the list of paused runs: one engine call however
// many runs wait; a card's details (arguments, ledger entry) are asked once
// per card, not on every poll.
func TestPausedPagePollsOneCall(t *testing.T) {
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
	const n = 3
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
	}
	if code != 200 || json.Unmarshal([]byte(body), &card) != nil || card.Info.Pause.Kind != "budget" || card.Activity.State != "held" {
		t.Fatalf("/api/pause: %d %s", code, body)
	}
}
