package ui

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
)

// The task queues page's data carries each queue's activity limits and
// their use (static/pages/queues.js draws them).
func TestQueuesShowActivityLimits(t *testing.T) {
	eng := newEngine(t)
	ctx := context.Background()
	if _, err := eng.SetActivityLimit(ctx, &api.SetActivityLimitRequest{Limit: api.ActivityLimit{TaskQueue: "agents", LimitKey: "openai/gpt-4o",
		MaxInFlight: 8, RatePerSecond: 5}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "w", WorkflowType: "W", TaskQueue: "agents"}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, New(eng, Options{}))
	code, body, _ := b.do("GET", "/api/queues", "", nil)
	var v struct {
		Queues []struct {
			Name           string `json:"name"`
			ActivityLimits []struct {
				Limit struct {
					LimitKey    string `json:"limitKey"`
					MaxInFlight int    `json:"maxInFlight"`
				} `json:"limit"`
				InFlight int `json:"inFlight"`
			} `json:"activityLimits"`
		} `json:"queues"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || len(v.Queues) != 1 || len(v.Queues[0].ActivityLimits) != 1 ||
		v.Queues[0].ActivityLimits[0].Limit.MaxInFlight != 8 || v.Queues[0].ActivityLimits[0].Limit.LimitKey != "openai/gpt-4o" {
		t.Fatalf("/api/queues: %d %s", code, body)
	}
}
