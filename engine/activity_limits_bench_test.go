package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/clock"
)

// BenchmarkActivityDispatchLimits: the cost of handing a queued Read
// activity to a poller (PollActivityTask: the gate, the lease in memory),
// without limits, under a limit on its type, and with 64 keys under a
// family limit with a rate (the limits never full: what is measured is
// their bookkeeping). Activities are scheduled 20 at a time and their
// runs terminated outside the timer.
func BenchmarkActivityDispatchLimits(b *testing.B) {
	for _, c := range []struct {
		name   string
		keys   int
		limits []api.ActivityLimit
	}{
		{"off", 1, nil},
		{"type-limit", 1, []api.ActivityLimit{{TaskQueue: "q", ActivityType: "llm", MaxInFlight: 1 << 30}}},
		{"64-keys-family-and-rate", 64, []api.ActivityLimit{{TaskQueue: "q", LimitKey: "tenant/*", MaxInFlight: 1 << 30},
			{TaskQueue: "q", ActivityType: "llm", RatePerSecond: 1e6, Burst: 1e6}}},
	} {
		b.Run(c.name, func(b *testing.B) { benchDispatchLimits(b, c.keys, c.limits) })
	}
}

func benchDispatchLimits(b *testing.B, keys int, limits []api.ActivityLimit) {
	be := openBenchEngine(b)
	eng := be.eng
	ctx := context.Background()
	for _, l := range limits {
		if _, err := eng.SetActivityLimit(ctx, &api.SetActivityLimitRequest{Limit: l}); err != nil {
			b.Fatal(err)
		}
	}
	const batch = 20
	run := 0
	schedule := func() string {
		run++
		id := fmt.Sprint("lim-", run)
		if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q"}); err != nil {
			b.Fatal(err)
		}
		resp, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q"})
		if err != nil || resp.Task == nil {
			b.Fatal(resp, err)
		}
		cmds := make([]api.Command, batch)
		for i := range cmds {
			key := ""
			if keys > 1 {
				key = fmt.Sprint("openai/gpt-4o,tenant/", i%keys)
			}
			cmds[i] = schedule(fmt.Sprint(i), "llm", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour, LimitKey: key})
		}
		if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: resp.Task.TaskToken, Commands: cmds}); err != nil {
			b.Fatal(err)
		}
		return id
	}
	var id string
	left := 0
	b.ResetTimer()
	for range b.N {
		if left == 0 {
			b.StopTimer()
			if id != "" {
				if _, err := eng.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: id, Reason: "bench"}); err != nil {
					b.Fatal(err)
				}
			}
			id, left = schedule(), batch
			b.StartTimer()
		}
		resp, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q", Identity: "bench"})
		if err != nil || resp.Task == nil {
			b.Fatal(resp, err)
		}
		left--
	}
}

// BenchmarkLimiterAdmitRelease: the limiter's bookkeeping for one attempt
// under a type limit and a family limit with a rate: admit, bind, and the
// check of its run's state that frees the slot once the attempt ended.
func BenchmarkLimiterAdmitRelease(b *testing.B) {
	lm := newLimiter(clock.Real())
	lm.kick = func(string) {}
	lm.set(api.ActivityLimit{TaskQueue: "q", ActivityType: "llm", MaxInFlight: 1 << 30}, false)
	lm.set(api.ActivityLimit{TaskQueue: "q", LimitKey: "tenant/*", MaxInFlight: 1 << 30, RatePerSecond: 1e9, Burst: 1e6}, false)
	ref := history.RunRef{WorkflowID: "w", RunID: "r"}
	st := &machine.RunState{Status: api.StatusRunning, Activities: map[int64]*machine.ActivityInfo{}}
	i := 0
	for b.Loop() {
		i++
		it := actItem{ref: ref, schedID: int64(i), attempt: 1, activityType: "llm", key: "openai/gpt-4o,tenant/" + string(rune('a'+i%64))}
		if !lm.admit("q", it) {
			b.Fatal("refused")
		}
		lm.bind(it, int64(i))
		lm.sync(ref, st) // the attempt is not in st: it ended
	}
	if lm.held.Load() != 0 {
		b.Fatal("slots left")
	}
}
