package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/pgstore"
)

// limitEngine is a server's engine that records the limits set on it and
// describes a queue with one limit in use.
type limitEngine struct {
	api.Service
	set      []api.SetActivityLimitRequest
	inFlight int
}

func (e *limitEngine) SetActivityLimit(_ context.Context, req *api.SetActivityLimitRequest) (*api.SetActivityLimitResponse, error) {
	e.set = append(e.set, *req)
	return &api.SetActivityLimitResponse{Limits: []api.ActivityLimit{req.Limit}}, nil
}

func (e *limitEngine) DescribeTaskQueue(_ context.Context, req *api.DescribeTaskQueueRequest) (*api.DescribeTaskQueueResponse, error) {
	l := api.ActivityLimit{TaskQueue: req.TaskQueue, LimitKey: "tenant/*", MaxInFlight: 2}
	return &api.DescribeTaskQueueResponse{Queue: api.TaskQueueInfo{Name: req.TaskQueue,
		ActivityLimits: []api.ActivityLimitInfo{{Limit: l, InFlight: e.inFlight, Keys: []api.LimitKeyInfo{{Key: "tenant/a", InFlight: e.inFlight}}}},
		ActivityKeys:   []api.LimitKeyInfo{{Key: "tenant/a", InFlight: e.inFlight}}}}, nil
}

// forwardAll is another server as a router reaches it: every call marked
// forwarded.
type forwardAll struct {
	api.Service
	r *Router
}

func (f *forwardAll) SetActivityLimit(ctx context.Context, req *api.SetActivityLimitRequest) (*api.SetActivityLimitResponse, error) {
	return f.r.SetActivityLimit(context.WithValue(ctx, forwardedKey{}, true), req)
}

func (f *forwardAll) DescribeTaskQueue(ctx context.Context, req *api.DescribeTaskQueueRequest) (*api.DescribeTaskQueueResponse, error) {
	return f.r.DescribeTaskQueue(context.WithValue(ctx, forwardedKey{}, true), req)
}

// A limit set on one server reaches every live server once (each
// enforces it for its shards); describe adds up their use.
func TestActivityLimitReachesEveryServer(t *testing.T) {
	ctx := context.Background()
	clk := &fakeClock{t: time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)}
	st := newFakeStore(4, clk)
	a, _ := testNode(t, st, clk, "a")
	b, _ := testNode(t, st, clk, "b")
	for _, id := range []string{"a", "b"} {
		if err := st.RegisterServer(ctx, pgstore.ServerInfo{ID: id, Address: id + ":7233", TTL: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	a.round(ctx)
	engA, engB := &limitEngine{inFlight: 1}, &limitEngine{inFlight: 2}
	ra, rb := NewRouter(a, engA), NewRouter(b, engB)
	ra.peers.svcs["b:7233"] = &forwardAll{r: rb}
	req := &api.SetActivityLimitRequest{Limit: api.ActivityLimit{TaskQueue: "q", LimitKey: "tenant/*", MaxInFlight: 2}}
	if _, err := ra.SetActivityLimit(ctx, req); err != nil {
		t.Fatal(err)
	}
	if len(engA.set) != 1 || len(engB.set) != 1 || engB.set[0] != *req {
		t.Fatalf("set on a: %d, on b: %d; want once each", len(engA.set), len(engB.set))
	}
	resp, err := ra.DescribeTaskQueue(ctx, &api.DescribeTaskQueueRequest{TaskQueue: "q"})
	if err != nil {
		t.Fatal(err)
	}
	q := resp.Queue
	if len(q.ActivityLimits) != 1 || q.ActivityLimits[0].InFlight != 3 || q.ActivityLimits[0].Keys[0].InFlight != 3 ||
		len(q.ActivityKeys) != 1 || q.ActivityKeys[0].InFlight != 3 {
		t.Fatalf("merged describe: %+v", q)
	}
}
