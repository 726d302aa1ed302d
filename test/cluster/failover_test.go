//go:build unix

package cluster_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

// TestFailoverFigure measures failover with the default lease (10 s): from
// the SIGKILL of a server that owns shards to the first workflow task of
// one of its shards dispatched by another server. Before each kill it
// starts runs whose workflow ids fall in the victim's shards (history.ShardOf
// over the cluster's shard count) on a task queue nobody polls, so their
// first workflow tasks wait in the victim's memory; right after the kill
// the test polls that queue through a surviving server (the poll fans out
// to every live server) and times the first task of those runs, and the
// last. Then the victim is restarted and the shards rebalance before the
// next trial. Not part of the suite (it takes minutes):
//
//	CAIRN_CLUSTER_FAILOVER=1 go test ./test/cluster -run TestFailoverFigure -timeout 1h -v
//
// CAIRN_CLUSTER_FAILOVER_TRIALS=N sets the number of trials (default 20).
func TestFailoverFigure(t *testing.T) {
	if os.Getenv("CAIRN_CLUSTER_FAILOVER") == "" {
		t.Skip("a measurement, not a test: CAIRN_CLUSTER_FAILOVER=1 runs it")
	}
	trials := 20
	if s := os.Getenv("CAIRN_CLUSTER_FAILOVER_TRIALS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("CAIRN_CLUSTER_FAILOVER_TRIALS=%q", s)
		}
		trials = n
	}
	cl := newCluster(t, clusterOptions{servers: 3}) // the default lease
	ctx := t.Context()
	var first, last []time.Duration
	for trial := range trials {
		victim := trial % len(cl.addrs)
		f, l := failoverTrial(ctx, t, cl, trial, victim)
		t.Logf("trial %d: server %d killed; first task of its shards dispatched by another server after %s, the last after %s",
			trial+1, victim+1, f.Round(time.Millisecond), l.Round(time.Millisecond))
		first, last = append(first, f), append(last, l)
	}
	t.Logf("failover over %d trials, lease %s: first task p50 %s p99 %s max %s; last of %d runs p50 %s p99 %s",
		trials, "10s (default)", pct(first, 50), pct(first, 99), pct(first, 100), failoverRuns, pct(last, 50), pct(last, 99))
	if p99 := pct(first, 99); p99 > 12*time.Second {
		t.Errorf("failover p99 %s is above the 12 s goal", p99)
	}
}

// failoverRuns is how many runs a trial starts in the victim's shards.
const failoverRuns = 8

// failoverTrial kills server victim and returns how long until another
// server dispatched the first, and the last, workflow task of the runs in
// its shards.
func failoverTrial(ctx context.Context, t *testing.T, cl *clusterEnv, trial, victim int) (first, last time.Duration) {
	t.Helper()
	// The victim serves its share of the shards (after the restart of an
	// earlier trial, the others hand shards back a few at a time).
	var d *api.DescribeClusterResponse
	wait, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		var err error
		if err = cl.settledOwnership(wait, 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		if d, err = cl.describe(wait, victim); err == nil && balanced(d) {
			break
		}
		if !pause(wait, 200*time.Millisecond) {
			t.Fatalf("the shards did not rebalance onto server %d: %v", victim+1, err)
		}
	}
	mine := map[int]bool{}
	for _, o := range d.ShardOwners {
		if o.Held && o.Owner == d.Self {
			mine[o.Shard] = true
		}
	}
	// Runs in distinct shards of the victim, waiting on a queue of their own.
	queue := fmt.Sprintf("failover-%d", trial)
	want := map[string]bool{}
	used := map[int]bool{}
	for n := 0; len(want) < failoverRuns; n++ {
		id := fmt.Sprintf("fo-%d-%d", trial, n)
		sh := history.ShardOf(id, d.Shards)
		if !mine[sh] || used[sh] {
			continue
		}
		used[sh] = true
		if _, err := cl.c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: queue}, "Idle", nil); err != nil {
			t.Fatalf("start %s: %v", id, err)
		}
		want[id] = true
	}
	survivor := (victim + 1) % len(cl.addrs)
	killed := time.Now()
	cl.server(victim).Kill()
	for len(want) > 0 {
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		resp, err := cl.direct[survivor].PollWorkflowTask(pctx, &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "failover-probe"})
		cancel()
		if err != nil {
			if time.Since(killed) > 2*time.Minute {
				t.Fatalf("polling server %d after the kill: %v", survivor+1, err)
			}
			continue
		}
		if resp.Task == nil || !want[resp.Task.WorkflowID] {
			continue
		}
		at := time.Since(killed)
		if first == 0 {
			first = at
		}
		last = at
		delete(want, resp.Task.WorkflowID)
	}
	cl.startServer(victim)
	return first, last
}

// balanced reports whether every live server holds about its share.
func balanced(d *api.DescribeClusterResponse) bool {
	held := heldBy(d)
	alive := 0
	for _, s := range d.Servers {
		if s.Alive {
			alive++
		}
	}
	if alive == 0 {
		return false
	}
	for _, s := range d.Servers {
		if s.Alive && held[s.ID] < d.Shards/alive-2 {
			return false
		}
	}
	return true
}

// pct is the p-th percentile of ds (nearest rank).
func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}
