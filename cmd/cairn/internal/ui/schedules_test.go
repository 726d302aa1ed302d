package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
)

// The schedules page's JSON and actions, over a real engine: the list and
// one schedule by the view convention (its next actions, its recent ones
// after a trigger), pause with a note and unpause, and the page itself.
func TestSchedulesPage(t *testing.T) {
	eng := newEngine(t)
	ctx := context.Background()
	s := api.Schedule{Spec: api.ScheduleSpec{Cron: "0 9 * * MON-FRI", TimeZone: "Europe/Paris"},
		Action:   api.ScheduleAction{WorkflowType: "Report", TaskQueue: "q"},
		Policies: api.SchedulePolicies{Overlap: api.OverlapBufferOne}}
	if _, err := eng.CreateSchedule(ctx, &api.CreateScheduleRequest{ScheduleID: "weekday-report", Schedule: s}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, New(eng, Options{}))
	b.session()
	for _, p := range []string{"/schedules", "/schedules/weekday-report", "/static/pages/schedules.js"} {
		if code, body, _ := b.do("GET", p, "", nil); code != 200 || body == "" {
			t.Fatalf("GET %s: %d", p, code)
		}
	}
	code, body, _ := b.do("GET", "/api/schedules", "", nil)
	var list struct {
		Schedules []map[string]any `json:"schedules"`
	}
	if err := json.Unmarshal([]byte(body), &list); code != 200 || err != nil || len(list.Schedules) != 1 {
		t.Fatalf("/api/schedules: %d %s", code, body)
	}
	for _, want := range []string{`"scheduleId":"weekday-report"`, `"overlap":"buffer-one"`, `"cron":"0 9 * * MON-FRI"`, `"nextActionTimes":["`} {
		if !strings.Contains(body, want) {
			t.Fatalf("/api/schedules lacks %s: %s", want, body)
		}
	}
	if code, out := b.action("/api/schedule", `{"scheduleId":"weekday-report","action":"trigger"}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, out)
	}
	if code, out := b.action("/api/schedule", `{"scheduleId":"weekday-report","action":"pause","note":"holidays"}`); code != 200 {
		t.Fatalf("pause: %d %s", code, out)
	}
	_, body, _ = b.do("GET", "/api/schedule?id=weekday-report", "", nil)
	var one struct {
		Schedule struct {
			Paused bool
			Note   string
		}
		RecentActions []struct {
			WorkflowID, Trigger string
		}
		NextActionTimes []string
	}
	if err := json.Unmarshal([]byte(body), &one); err != nil || !one.Schedule.Paused || one.Schedule.Note != "holidays" ||
		len(one.RecentActions) != 1 || one.RecentActions[0].Trigger != "trigger" || !strings.HasPrefix(one.RecentActions[0].WorkflowID, "weekday-report-") ||
		len(one.NextActionTimes) != 0 {
		t.Fatalf("/api/schedule: %s (%v)", body, err)
	}
	if code, _ := b.action("/api/schedule", `{"scheduleId":"weekday-report","action":"explode"}`); code != http.StatusBadRequest {
		t.Fatalf("an unknown action: %d", code)
	}
	if code, _, _ := b.do("GET", "/api/schedule?id=nobody", "", nil); code != http.StatusNotFound {
		t.Fatalf("an unknown schedule: %d", code)
	}
	if code, _ := b.action("/api/schedule", `{"scheduleId":"weekday-report","action":"unpause"}`); code != 200 {
		t.Fatalf("unpause: %d", code)
	}
}
