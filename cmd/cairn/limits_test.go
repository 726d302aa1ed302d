package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// task-queue limit sets a limit that describe then shows, with its use and
// the backlog by limit key; --clear removes it.
func TestTaskQueueLimitShownByDescribe(t *testing.T) {
	s := newTestServer(t, false)
	out := s.must(t, "task-queue", "limit", "agents", "--type", "llm.Chat", "--key", "tenant/*", "--max", "2", "--rate", "5")
	if !strings.Contains(out, "llm.Chat") || !strings.Contains(out, "tenant/*") {
		t.Fatalf("limit set:\n%s", out)
	}
	out = s.must(t, "task-queue", "describe", "agents")
	for _, want := range []string{"MAX IN FLIGHT", "IN FLIGHT", "WAITING", "tenant/*", "llm.Chat"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	var q struct {
		ActivityLimits []struct {
			Limit struct {
				MaxInFlight   int     `json:"maxInFlight"`
				RatePerSecond float64 `json:"ratePerSecond"`
			} `json:"limit"`
			InFlight int `json:"inFlight"`
		} `json:"activityLimits"`
	}
	js := s.must(t, "task-queue", "describe", "agents", "--json")
	if err := json.Unmarshal([]byte(js), &q); err != nil {
		t.Fatal(err)
	}
	if len(q.ActivityLimits) != 1 || q.ActivityLimits[0].Limit.MaxInFlight != 2 || q.ActivityLimits[0].Limit.RatePerSecond != 5 {
		t.Fatalf("describe --json: %+v", q)
	}
	if out := s.must(t, "task-queue", "limit", "agents", "--type", "llm.Chat", "--key", "tenant/*", "--clear"); !strings.Contains(out, "no activity limit") {
		t.Fatalf("limit --clear:\n%s", out)
	}
}
