package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/pgstore"
)

// updatedEngine records the updates that reach a server's engine.
type updatedEngine struct {
	api.Service
	got []string
}

func (e *updatedEngine) UpdateWorkflow(_ context.Context, req *api.UpdateWorkflowRequest) (*api.UpdateWorkflowResponse, error) {
	id := req.WorkflowID
	if id == "" {
		id = req.Start.WorkflowID
	}
	e.got = append(e.got, id)
	return &api.UpdateWorkflowResponse{UpdateID: req.UpdateID}, nil
}

// TestUpdateGoesToTheOwner: an update sent to a server that does not
// serve the run's shard is forwarded to the one that does — an
// update-with-start by the workflow id it starts.
func TestUpdateGoesToTheOwner(t *testing.T) {
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
	a.round(ctx) // a takes every shard
	b.round(ctx) // b reads who serves what
	engA, engB := &updatedEngine{}, &updatedEngine{}
	rb := NewRouter(b, engB)
	rb.peers.svcs["a:7233"] = engA
	// Two workflow ids whose shards a serves.
	var onA []string
	for i := 0; len(onA) < 2 && i < 100; i++ {
		id := fmt.Sprintf("wf-%d", i)
		if _, local, err := rb.target(b.Of(id)); err == nil && !local {
			onA = append(onA, id)
		}
	}
	if len(onA) < 2 {
		t.Fatal("a serves no shard")
	}
	for _, req := range []*api.UpdateWorkflowRequest{
		{WorkflowID: onA[0], UpdateID: "u1", Name: "decide"},
		{UpdateID: "u2", Name: "decide", Start: &api.StartWorkflowRequest{WorkflowID: onA[1]}},
	} {
		if resp, err := rb.UpdateWorkflow(ctx, req); err != nil || resp.UpdateID != req.UpdateID {
			t.Fatalf("update %s through b: %+v, %v", req.UpdateID, resp, err)
		}
	}
	if len(engA.got) != 2 || engA.got[0] != onA[0] || engA.got[1] != onA[1] || len(engB.got) != 0 {
		t.Fatalf("a's engine got %v, b's %v; want both updates (%v) on a", engA.got, engB.got, onA)
	}
}
