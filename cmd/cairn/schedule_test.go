package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/internal/clock"
)

// cairn schedule against a real server on an engine with a fake clock: a
// schedule created by the CLI fires when the clock passes its nominal
// time, and the worker runs what it started.
func TestScheduleCommands(t *testing.T) {
	t.Setenv("CAIRN_TOKEN", "")
	clk := clock.NewFake(time.Date(2026, 11, 29, 12, 0, 30, 0, time.UTC))
	s := newTestServer(t, true, func(o *engine.Options) { o.Clock = clk })
	s.must(t, "schedule", "create", "--id", "sizes", "--cron", "* * * * *", "--type", "Size", "--task-queue", testQueue,
		"--input", `"abcd"`, "--overlap", "buffer-all", "--time-zone", "Europe/Paris")
	out := s.must(t, "schedule", "describe", "sizes")
	for _, want := range []string{`cron "* * * * *" in Europe/Paris`, "overlap buffer-all", "next       2026-11-29T12:01:00Z", "active"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	clk.Advance(30 * time.Second)
	s.eng.Settle()
	s.result(t, "sizes-2026-11-29T12:01:00Z")
	var info struct {
		Actions       int
		RecentActions []struct {
			WorkflowID, RunID, Trigger string
		}
		NextActionTimes []string
	}
	if err := json.Unmarshal([]byte(s.must(t, "schedule", "describe", "sizes", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info.Actions != 1 || info.RecentActions[0].WorkflowID != "sizes-2026-11-29T12:01:00Z" || info.RecentActions[0].Trigger != "scheduled" ||
		info.NextActionTimes[0] != "2026-11-29T12:02:00Z" {
		t.Fatalf("describe --json: %+v", info)
	}
	s.must(t, "schedule", "pause", "sizes", "--note", "quiet please")
	if out := s.must(t, "schedule", "list"); !strings.Contains(out, "paused: quiet please") {
		t.Fatalf("list:\n%s", out)
	}
	clk.Advance(5 * time.Minute)
	s.eng.Settle()
	s.must(t, "schedule", "trigger", "sizes")
	s.must(t, "schedule", "backfill", "sizes", "--start", "2026-11-29T10:00:00Z", "--end", "2026-11-29T10:02:00Z")
	s.must(t, "schedule", "unpause", "sizes")
	s.must(t, "schedule", "update", "sizes", "--interval", "1h", "--offset", "5m")
	out = s.must(t, "schedule", "describe", "sizes")
	for _, want := range []string{"every 1h0m0s +5m0s", "sizes-2026-11-29T10:02:00Z", "backfill", "trigger", "4 started"} {
		if !strings.Contains(out, want) {
			t.Fatalf("describe lacks %q:\n%s", want, out)
		}
	}
	if _, errs, code := s.run(t, "", "schedule", "create", "--id", "x", "--type", "Size", "--task-queue", "q"); code != 2 || !strings.Contains(errs, "--cron") {
		t.Fatalf("create without a spec: exit %d, %s", code, errs)
	}
	if _, errs, code := s.run(t, "", "schedule", "create", "--id", "x", "--cron", "99 * * * *", "--type", "Size", "--task-queue", "q"); code != 1 || !strings.Contains(errs, "out of range") {
		t.Fatalf("create with a bad cron: exit %d, %s", code, errs)
	}
	s.must(t, "schedule", "delete", "sizes")
	if _, _, code := s.run(t, "", "schedule", "describe", "sizes"); code != 1 {
		t.Fatalf("describe a deleted schedule: exit %d", code)
	}
}
