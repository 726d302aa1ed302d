package clienttest

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
)

// testSchedules: create, describe, trigger, backfill, pause, update, list
// and delete a schedule, and its typed errors. Nothing waits for a
// nominal time (the suite has no fake clock): actions are triggered or
// backfilled.
func testSchedules(t *testing.T, s *suite) {
	opts := client.ScheduleOptions{ID: "sched", Spec: api.ScheduleSpec{Cron: "@yearly", TimeZone: "Europe/Paris"},
		Workflow: WaitForCancel, TaskQueue: TaskQueue}
	if err := s.c.CreateSchedule(s.ctx, opts); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "create a taken id", s.c.CreateSchedule(s.ctx, opts), api.ErrAlreadyStarted)
	bad := opts
	bad.ID, bad.Spec.Cron = "bad", "0 25 * * *"
	wantCode(t, "create with a bad cron", s.c.CreateSchedule(s.ctx, bad), api.ErrInvalidArgument)
	_, err := s.c.DescribeSchedule(s.ctx, "nope")
	wantCode(t, "describe an unknown schedule", err, api.ErrNotFound)

	info, err := s.c.DescribeSchedule(s.ctx, "sched")
	if err != nil {
		t.Fatal(err)
	}
	paris, _ := time.LoadLocation("Europe/Paris")
	if len(info.NextActionTimes) != 5 || info.NextActionTimes[0].In(paris).Format("01-02 15:04") != "01-01 00:00" ||
		info.Schedule.Action.WorkflowType != "WaitForCancel" {
		t.Fatalf("describe: %+v", info)
	}

	// Trigger now: a run starts at once.
	if err := s.c.PatchSchedule(s.ctx, api.PatchScheduleRequest{ScheduleID: "sched", TriggerNow: true}); err != nil {
		t.Fatal(err)
	}
	info, _ = s.c.DescribeSchedule(s.ctx, "sched")
	if info.Actions != 1 || info.RecentActions[0].Trigger != api.TriggerNow {
		t.Fatalf("after trigger: %+v", info)
	}
	triggered := info.RecentActions[0]
	if d := s.describe(triggered.WorkflowID, ""); d.Info.RunID != triggered.RunID || d.Info.WorkflowType != "WaitForCancel" {
		t.Fatalf("triggered run %+v, recorded %+v", d.Info, triggered)
	}

	// Backfill (2020-01-01, 2022-01-01]: the actions of 2021 and 2022.
	from := time.Date(2020, 1, 1, 0, 0, 0, 0, paris)
	err = s.c.PatchSchedule(s.ctx, api.PatchScheduleRequest{ScheduleID: "sched",
		Backfill: []api.BackfillRange{{Start: from, End: from.AddDate(2, 0, 0), Overlap: api.OverlapAllowAll}}})
	if err != nil {
		t.Fatal(err)
	}
	s.describe("sched-2020-12-31T23:00:00Z", "")
	s.describe("sched-2021-12-31T23:00:00Z", "")

	// Paused with a note: no next times; unpaused: they are back.
	if err := s.c.PatchSchedule(s.ctx, api.PatchScheduleRequest{ScheduleID: "sched", Pause: true, Note: "quiet"}); err != nil {
		t.Fatal(err)
	}
	if info, _ = s.c.DescribeSchedule(s.ctx, "sched"); !info.Schedule.Paused || info.Schedule.Note != "quiet" || len(info.NextActionTimes) != 0 {
		t.Fatalf("paused: %+v", info)
	}
	opts.Spec = api.ScheduleSpec{Interval: time.Hour, Offset: 10 * time.Minute}
	if err := s.c.UpdateSchedule(s.ctx, opts); err != nil {
		t.Fatal(err)
	}
	if err := s.c.PatchSchedule(s.ctx, api.PatchScheduleRequest{ScheduleID: "sched", Unpause: true}); err != nil {
		t.Fatal(err)
	}
	info, _ = s.c.DescribeSchedule(s.ctx, "sched")
	if info.Schedule.Paused || len(info.NextActionTimes) != 5 || info.NextActionTimes[0].Minute() != 10 || info.Actions != 3 {
		t.Fatalf("updated and unpaused: %+v", info)
	}
	list, err := s.c.ListSchedules(s.ctx, &api.ListSchedulesRequest{})
	if err != nil || len(list.Schedules) != 1 || list.Schedules[0].ScheduleID != "sched" {
		t.Fatalf("list %+v %v", list, err)
	}
	if err := s.c.DeleteSchedule(s.ctx, "sched"); err != nil {
		t.Fatal(err)
	}
	_, err = s.c.DescribeSchedule(s.ctx, "sched")
	wantCode(t, "describe a deleted schedule", err, api.ErrNotFound)
	wantCode(t, "delete a deleted schedule", s.c.DeleteSchedule(s.ctx, "sched"), api.ErrNotFound)
	s.describe(triggered.WorkflowID, "") // its runs stay
}
