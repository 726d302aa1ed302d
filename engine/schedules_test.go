package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/crashpoint"
)

// Schedules on the engine's injected clock: nothing here sleeps.

func everyMinute(overlap api.OverlapPolicy) api.Schedule {
	return api.Schedule{Spec: api.ScheduleSpec{Cron: "* * * * *"},
		Action:   api.ScheduleAction{WorkflowType: "W", TaskQueue: "q", Input: jsonPayload(`"tick"`)},
		Policies: api.SchedulePolicies{Overlap: overlap}}
}

func (h *harness) createSchedule(id string, s api.Schedule) {
	h.t.Helper()
	if _, err := h.eng.CreateSchedule(h.ctx(), &api.CreateScheduleRequest{ScheduleID: id, Schedule: s}); err != nil {
		h.t.Fatalf("create schedule %s: %v", id, err)
	}
}

func (h *harness) schedule(id string) api.ScheduleInfo {
	h.t.Helper()
	resp, err := h.eng.DescribeSchedule(h.ctx(), &api.DescribeScheduleRequest{ScheduleID: id})
	if err != nil {
		h.t.Fatalf("describe schedule %s: %v", id, err)
	}
	return resp.Info
}

// scheduledRuns lists the workflow ids of the schedule's recent actions.
func scheduledRuns(info api.ScheduleInfo) []string {
	var ids []string
	for _, a := range info.RecentActions {
		ids = append(ids, a.WorkflowID)
	}
	return ids
}

func wantIDs(t *testing.T, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
}

func TestScheduleStartsOneRunPerNominalTime(t *testing.T) {
	h := newHarness(t)
	h.createSchedule("s", everyMinute(api.OverlapAllowAll))
	info := h.schedule("s")
	if len(info.NextActionTimes) != maxNextTimes || !info.NextActionTimes[0].Equal(testStart.Add(time.Minute)) {
		t.Fatalf("next times %v", info.NextActionTimes)
	}
	h.advance(59 * time.Second)
	if n := h.schedule("s").Actions; n != 0 {
		t.Fatalf("%d actions before the first nominal time", n)
	}
	h.advance(time.Second)
	h.advance(time.Minute)
	info = h.schedule("s")
	wantIDs(t, scheduledRuns(info), "s-2026-11-29T12:01:00Z", "s-2026-11-29T12:02:00Z")
	if info.Actions != 2 || info.RecentActions[0].Trigger != api.TriggerScheduled || info.RecentActions[0].RunID == "" {
		t.Fatalf("info %+v", info)
	}
	d := h.describe("s-2026-11-29T12:01:00Z")
	if d.Info.WorkflowType != "W" || d.Info.RunID != info.RecentActions[0].RunID || !d.Info.StartTime.Equal(testStart.Add(time.Minute)) {
		t.Fatalf("run %+v", d.Info)
	}
	// Durable: after a restart the schedule goes on from where it was.
	h.reopen()
	h.advance(time.Minute)
	info = h.settledSchedule("s", 3)
	if info.Actions != 3 || info.RecentActions[2].WorkflowID != "s-2026-11-29T12:03:00Z" {
		t.Fatalf("after reopen %+v", info)
	}
	// Errors are typed.
	_, err := h.eng.CreateSchedule(h.ctx(), &api.CreateScheduleRequest{ScheduleID: "s", Schedule: everyMinute(api.OverlapSkip)})
	wantErr(t, err, api.ErrAlreadyStarted)
	_, err = h.eng.DescribeSchedule(h.ctx(), &api.DescribeScheduleRequest{ScheduleID: "nope"})
	wantErr(t, err, api.ErrNotFound)
	bad := everyMinute(api.OverlapSkip)
	bad.Spec.Cron = "61 * * * *"
	_, err = h.eng.CreateSchedule(h.ctx(), &api.CreateScheduleRequest{ScheduleID: "bad", Schedule: bad})
	wantErr(t, err, api.ErrInvalidArgument)
	bad = everyMinute(api.OverlapSkip)
	bad.Action.WorkflowType = ""
	_, err = h.eng.CreateSchedule(h.ctx(), &api.CreateScheduleRequest{ScheduleID: "bad", Schedule: bad})
	wantErr(t, err, api.ErrInvalidArgument)
	// Deleted: it fires no more; its runs stay.
	if _, err := h.eng.DeleteSchedule(h.ctx(), &api.DeleteScheduleRequest{ScheduleID: "s"}); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Minute)
	if _, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: "s-2026-11-29T12:04:00Z"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("a deleted schedule fired: %v", err)
	}
	h.reopen()
	_, err = h.eng.DescribeSchedule(h.ctx(), &api.DescribeScheduleRequest{ScheduleID: "s"})
	wantErr(t, err, api.ErrNotFound)
	h.describe("s-2026-11-29T12:01:00Z")
}

// New York falls back on 2027-11-07 (02:00 EDT → 01:00 EST) and springs
// forward on 2027-03-14 (02:00 EST → 03:00 EDT).
func TestScheduleAcrossDSTChanges(t *testing.T) {
	cases := []struct {
		name  string
		cron  string
		start time.Time
		want  []string
	}{
		{"spring forward skips the missing 02:30", "30 2 * * *", time.Date(2027, 3, 12, 12, 0, 0, 0, time.UTC),
			[]string{"x-2027-03-13T07:30:00Z", "x-2027-03-15T06:30:00Z"}},
		{"fall back fires 01:30 once", "30 1 * * *", time.Date(2027, 11, 5, 12, 0, 0, 0, time.UTC),
			[]string{"x-2027-11-06T05:30:00Z", "x-2027-11-07T05:30:00Z", "x-2027-11-08T06:30:00Z"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.clk.Set(tc.start)
			h.settle()
			s := everyMinute(api.OverlapAllowAll)
			s.Spec = api.ScheduleSpec{Cron: tc.cron, TimeZone: "America/New_York"}
			h.createSchedule("x", s)
			for i := 0; i < 3*24*4; i++ { // three days, a quarter of an hour at a time
				h.advance(15 * time.Minute)
			}
			info := h.schedule("x")
			wantIDs(t, scheduledRuns(info), tc.want...)
			for _, a := range info.RecentActions {
				if !a.ActualTime.Equal(a.NominalTime) { // no jitter: each started at its nominal time
					t.Fatalf("action %+v started late", a)
				}
			}
		})
	}
}

// TestScheduleOverlapPolicies: the first action's run is still open when
// the next ones come due.
func TestScheduleOverlapPolicies(t *testing.T) {
	const first, second, third = "s-2026-11-29T12:01:00Z", "s-2026-11-29T12:02:00Z", "s-2026-11-29T12:03:00Z"
	cases := []struct {
		policy api.OverlapPolicy
		// after two more minutes: the runs, buffered and skipped
		runs     []string
		buffered int
		skipped  int64
		// once the first run (and then every open one) is closed
		after []string
	}{
		{api.OverlapSkip, []string{first}, 0, 2, []string{first}},
		{api.OverlapBufferOne, []string{first}, 1, 1, []string{first, second}},
		{api.OverlapBufferAll, []string{first}, 2, 0, []string{first, second, third}},
		{api.OverlapCancelOther, []string{first}, 1, 1, []string{first, third}},
		{api.OverlapTerminateOther, []string{first, second, third}, 0, 0, []string{first, second, third}},
		{api.OverlapAllowAll, []string{first, second, third}, 0, 0, []string{first, second, third}},
	}
	for _, tc := range cases {
		t.Run(tc.policy.String(), func(t *testing.T) {
			h := newHarness(t)
			h.createSchedule("s", everyMinute(tc.policy))
			h.advance(time.Minute)
			h.advance(time.Minute)
			h.advance(time.Minute)
			info := h.schedule("s")
			wantIDs(t, scheduledRuns(info), tc.runs...)
			if len(info.Buffered) != tc.buffered || info.OverlapSkipped != tc.skipped {
				t.Fatalf("buffered %v skipped %d, want %d and %d", info.Buffered, info.OverlapSkipped, tc.buffered, tc.skipped)
			}
			switch tc.policy {
			case api.OverlapTerminateOther:
				if s := h.describe(first).Info.Status; s != api.StatusTerminated {
					t.Fatalf("first run %s", s)
				}
				if s := h.describe(third).Info.Status; s != api.StatusRunning {
					t.Fatalf("last run %s", s)
				}
			case api.OverlapAllowAll:
				if s := h.describe(first).Info.Status; s != api.StatusRunning {
					t.Fatalf("first run %s", s)
				}
			case api.OverlapCancelOther:
				if !h.describe(first).CancelRequested {
					t.Fatal("the open run was not asked to cancel")
				}
			}
			// Close what is open until nothing waits; buffered actions start
			// within bufferCheck of the run before them closing.
			for i := 0; i < 4; i++ {
				for _, a := range h.schedule("s").RecentActions {
					if h.describe(a.WorkflowID).Info.Status.Open() {
						h.terminate(a.WorkflowID)
					}
				}
				h.advance(bufferCheck)
			}
			info = h.schedule("s")
			// Two more minutes passed meanwhile? No: 4 s. Only the buffered ones started.
			wantIDs(t, scheduledRuns(info), tc.after...)
			if len(info.Buffered) != 0 {
				t.Fatalf("still buffered %v", info.Buffered)
			}
		})
	}
}

// TestScheduleCatchUpAfterDowntime: the server was down for an hour, the
// catch-up window is ten minutes.
func TestScheduleCatchUpAfterDowntime(t *testing.T) {
	h := newHarness(t)
	s := everyMinute(api.OverlapAllowAll)
	s.Policies.CatchupWindow = 10 * time.Minute
	h.createSchedule("s", s)
	h.advance(time.Minute) // 12:01 fires
	h.close()
	h.clk.Advance(time.Hour) // down until 13:01
	h.open()
	info := h.settledSchedule("s", 12)
	// 12:02 … 12:50 are older than the window (49 missed); 12:51 … 13:01 fire.
	if info.MissedCatchup != 49 || info.Actions != 12 {
		t.Fatalf("missed %d actions %d", info.MissedCatchup, info.Actions)
	}
	last := info.RecentActions[len(info.RecentActions)-1]
	if last.WorkflowID != "s-2026-11-29T13:01:00Z" || info.RecentActions[0].WorkflowID != "s-2026-11-29T12:52:00Z" {
		t.Fatalf("recent %v", scheduledRuns(info))
	}
	h.describe("s-2026-11-29T12:51:00Z")
	if _, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: "s-2026-11-29T12:50:00Z"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("a missed time fired: %v", err)
	}
}

// TestScheduleCrashBetweenDecidingAndRecording: the store dies around the
// start of the run and around the schedule's record; after the restart
// the nominal time has exactly one run, and the schedule records it once.
func TestScheduleCrashBetweenDecidingAndRecording(t *testing.T) {
	const wid = "s-2026-11-29T12:01:00Z"
	// One transaction (an engine serving every run): the start and the
	// record are one commit, "fireSchedule". Two (as in a cluster): the
	// start's commit, then the record's.
	cases := []struct {
		split bool
		point string
	}{{false, "fireSchedule.before"}, {false, "fireSchedule.after"},
		{true, "StartWorkflow.before"}, {true, "StartWorkflow.after"}, {true, "fireSchedule.before"}, {true, "fireSchedule.after"}}
	for _, c := range cases {
		point := c.point
		for _, closed := range []bool{false, true} {
			t.Run(fmt.Sprintf("split=%v/%s/closed=%v", c.split, point, closed), func(t *testing.T) {
				h := newHarness(t, func(o *Options) { o.splitScheduleCommits = c.split })
				h.createSchedule("s", everyMinute(api.OverlapSkip))
				var died atomic.Bool
				crashpoint.Arm(point, 1, func() { h.fault.Kill(nil); died.Store(true) })
				h.advance(time.Minute)
				crashpoint.Disarm()
				if !died.Load() {
					t.Fatalf("crash point %s not reached", point)
				}
				h.reopen()
				if closed {
					// The run closed before the schedule looked again (a
					// restart that took a while): the start is refused as a
					// duplicate, and that run is the one recorded.
					if _, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: wid}); err == nil {
						h.terminate(wid)
					}
				}
				info := h.settledSchedule("s", 1)
				if info.Actions != 1 || len(info.RecentActions) != 1 {
					t.Fatalf("after the crash: %+v", info)
				}
				d := h.describe(wid)
				if d.Info.RunID != info.RecentActions[0].RunID {
					t.Fatalf("recorded run %s, the run is %s", info.RecentActions[0].RunID, d.Info.RunID)
				}
				runs, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{WorkflowIDPrefix: "s-"})
				if err != nil || len(runs.Workflows) != 1 {
					t.Fatalf("runs %+v %v", runs, err)
				}
				h.advance(time.Minute) // and it goes on
				if n := h.schedule("s").Actions; n != 1 && n != 2 {
					t.Fatalf("%d actions", n)
				}
			})
		}
	}
}

func TestSchedulePauseTriggerBackfillUpdate(t *testing.T) {
	h := newHarness(t)
	h.createSchedule("s", everyMinute(api.OverlapAllowAll))
	patch := func(req api.PatchScheduleRequest) {
		t.Helper()
		req.ScheduleID = "s"
		if _, err := h.eng.PatchSchedule(h.ctx(), &req); err != nil {
			t.Fatalf("patch %+v: %v", req, err)
		}
	}
	patch(api.PatchScheduleRequest{Pause: true, Note: "maintenance"})
	h.advance(3 * time.Minute)
	info := h.schedule("s")
	if info.Actions != 0 || !info.Schedule.Paused || info.Schedule.Note != "maintenance" || len(info.NextActionTimes) != 0 {
		t.Fatalf("paused %+v", info)
	}
	// Trigger now works while paused.
	patch(api.PatchScheduleRequest{TriggerNow: true, TriggerOverlap: api.OverlapAllowAll})
	// Unpaused: the times that passed while paused are not caught up.
	patch(api.PatchScheduleRequest{Unpause: true, Note: "back"})
	h.advance(time.Minute)
	info = h.schedule("s")
	wantIDs(t, scheduledRuns(info), "s-2026-11-29T12:03:00Z", "s-2026-11-29T12:04:00Z")
	if info.RecentActions[0].Trigger != api.TriggerNow || info.Schedule.Paused || info.Schedule.Note != "back" {
		t.Fatalf("after unpause %+v", info)
	}
	// Backfill (start, end]: 11:57 … 11:59.
	patch(api.PatchScheduleRequest{Backfill: []api.BackfillRange{{Start: testStart.Add(-4 * time.Minute), End: testStart.Add(-time.Minute),
		Overlap: api.OverlapAllowAll}}})
	info = h.schedule("s")
	wantIDs(t, scheduledRuns(info)[2:], "s-2026-11-29T11:57:00Z", "s-2026-11-29T11:58:00Z", "s-2026-11-29T11:59:00Z")
	if info.RecentActions[4].Trigger != api.TriggerBackfill || info.Actions != 5 {
		t.Fatalf("backfill %+v", info)
	}
	// Update: an interval with an offset; the pause state is kept.
	up := everyMinute(api.OverlapAllowAll)
	up.Spec = api.ScheduleSpec{Interval: time.Hour, Offset: 30 * time.Minute}
	if _, err := h.eng.UpdateSchedule(h.ctx(), &api.UpdateScheduleRequest{ScheduleID: "s", Schedule: up}); err != nil {
		t.Fatal(err)
	}
	info = h.schedule("s")
	if !info.NextActionTimes[0].Equal(testStart.Add(30*time.Minute)) || info.Schedule.Note != "back" {
		t.Fatalf("after update %+v", info)
	}
	h.advance(26 * time.Minute) // 12:30
	if got := scheduledRuns(h.schedule("s")); got[len(got)-1] != "s-2026-11-29T12:30:00Z" {
		t.Fatalf("runs %v", got)
	}
	list, err := h.eng.ListSchedules(h.ctx(), &api.ListSchedulesRequest{})
	if err != nil || len(list.Schedules) != 1 || list.Schedules[0].ScheduleID != "s" {
		t.Fatalf("list %+v %v", list, err)
	}
	_, err = h.eng.PatchSchedule(h.ctx(), &api.PatchScheduleRequest{ScheduleID: "s", Pause: true, Unpause: true})
	wantErr(t, err, api.ErrInvalidArgument)
}

func TestScheduleJitterDelaysTheStart(t *testing.T) {
	h := newHarness(t)
	s := everyMinute(api.OverlapAllowAll)
	s.Spec.Jitter = 30 * time.Second
	h.createSchedule("j", s)
	for i := 0; i < 4*60; i++ {
		h.advance(time.Second)
	}
	for _, a := range h.schedule("j").RecentActions {
		d := a.ActualTime.Sub(a.NominalTime)
		if d < 0 || d >= 30*time.Second {
			t.Fatalf("action %+v: delay %s", a, d)
		}
	}
	if n := h.schedule("j").Actions; n < 3 {
		t.Fatalf("%d actions in 4 minutes", n)
	}
}

// settledSchedule settles the engine until the schedule has recorded at
// least want actions, and returns it. An engine serving shards (the
// Postgres harness) loads a shard's schedules when it acquires the shard,
// which may come after Open returned; so one Settle can return before the
// schedule's timer exists. It gives up after a bounded number of rounds
// (polling a condition, not waiting for time: the fake clock stands still).
func (h *harness) settledSchedule(id string, want int64) api.ScheduleInfo {
	h.t.Helper()
	var info api.ScheduleInfo
	for i := 0; i < 2000; i++ {
		h.settle()
		if info = h.schedule(id); int64(info.Actions) >= want {
			return info
		}
		time.Sleep(5 * time.Millisecond) // let the shard acquisition run; bounded at ~10 s
	}
	return info
}
