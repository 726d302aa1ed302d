package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/clock"
)

// TestScheduleInACluster: a schedule is served by the owner of its id's
// shard, which starts each run on the server of the run's own shard (two
// commits: the start there, the record here); when the shard moves, the
// new owner loads the schedule and goes on from its record, without
// firing a recorded nominal time again.
func TestScheduleInACluster(t *testing.T) {
	a, b, la, lb, _ := linkedServers(t)
	ctx := context.Background()
	first := testStart.Add(time.Minute)
	var id string
	for i := 0; ; i++ { // a schedule whose first run's shard is not its own
		id = fmt.Sprintf("sch%d", i)
		if la.Of(id) != la.Of(ScheduledWorkflowID(id, first)) {
			break
		}
	}
	sh, runShard := la.Of(id), la.Of(ScheduledWorkflowID(id, first))
	la.take(t, sh)
	must(t, a.Acquire(ctx, []int{sh}))
	lb.take(t, runShard)
	must(t, b.Acquire(ctx, []int{runShard}))
	s := everyMinute(api.OverlapAllowAll)
	if _, err := b.CreateSchedule(ctx, &api.CreateScheduleRequest{ScheduleID: id, Schedule: s}); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("create on a server that does not serve the schedule: %v", err)
	}
	must2(t)(a.CreateSchedule(ctx, &api.CreateScheduleRequest{ScheduleID: id, Schedule: s}))
	a.clk.(*clock.Fake).Advance(time.Minute)
	a.Settle()
	d, err := b.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: ScheduledWorkflowID(id, first)})
	if err != nil {
		t.Fatalf("the first run on its server: %v", err)
	}
	info, err := a.DescribeSchedule(ctx, &api.DescribeScheduleRequest{ScheduleID: id})
	if err != nil || info.Info.Actions != 1 || info.Info.RecentActions[0].RunID != d.Info.RunID {
		t.Fatalf("the schedule after its first action: %+v %v", info, err)
	}

	// The schedule's shard moves to b, which then serves every shard.
	a.Release([]int{sh})
	la.giveUp(t, sh)
	var all []int
	for i := 0; i < lb.Count(); i++ {
		if i != runShard {
			lb.take(t, i)
			all = append(all, i)
		}
	}
	must(t, b.Acquire(ctx, all))
	if _, err := a.DescribeSchedule(ctx, &api.DescribeScheduleRequest{ScheduleID: id}); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("the old owner still answers for the schedule: %v", err)
	}
	b.clk.(*clock.Fake).Advance(2 * time.Minute) // b's clock reaches 12:02
	b.Settle()
	info, err = b.DescribeSchedule(ctx, &api.DescribeScheduleRequest{ScheduleID: id})
	if err != nil || info.Info.Actions != 2 || info.Info.RecentActions[1].WorkflowID != ScheduledWorkflowID(id, first.Add(time.Minute)) {
		t.Fatalf("the schedule on its new owner: %+v %v", info, err)
	}
	runs, err := b.ListWorkflows(ctx, &api.ListWorkflowsRequest{WorkflowIDPrefix: id + "-"})
	if err != nil || len(runs.Workflows) != 2 {
		t.Fatalf("runs %+v %v", runs, err)
	}
}

func must2(t *testing.T) func(any, error) {
	return func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
}
