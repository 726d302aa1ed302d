package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/pgstore"
)

// pollingEngine is a server's engine as the router sees it: a workflow
// poll either waits until its caller gives up (block) or hands out a task
// at once.
type pollingEngine struct {
	api.Service
	block bool
	polls atomic.Int32
}

func (e *pollingEngine) PollWorkflowTask(ctx context.Context, req *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	e.polls.Add(1)
	if e.block {
		<-ctx.Done()
		return &api.PollWorkflowTaskResponse{}, nil
	}
	return &api.PollWorkflowTaskResponse{Task: &api.WorkflowTask{WorkflowID: "on-b"}}, nil
}

// forwardedTo is another server as a router reaches it: every call
// forwarded, every answer sent to answers.
type forwardedTo struct {
	api.Service
	r       *Router
	answers chan *api.PollWorkflowTaskResponse
}

func (f *forwardedTo) PollWorkflowTask(ctx context.Context, req *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	resp, err := f.r.PollWorkflowTask(context.WithValue(ctx, forwardedKey{}, true), req)
	if err == nil {
		f.answers <- resp
	}
	return resp, err
}

// TestPollsSkipCoveredServers: a poll on a server fans out to another
// server nobody polls directly and gets its task; once workers poll that
// server directly, it answers the forwarded poll at once with Covered —
// without touching its queue — and the first server stops asking it; when
// its workers have gone for coverTTL, the first server asks it again.
func TestPollsSkipCoveredServers(t *testing.T) {
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
	engA, engB := &pollingEngine{block: true}, &pollingEngine{}
	ra, rb := NewRouter(a, engA), NewRouter(b, engB)
	toB := &forwardedTo{r: rb, answers: make(chan *api.PollWorkflowTaskResponse, 8)}
	ra.peers.svcs["b:7233"] = toB
	req := &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w1"}

	resp, err := ra.PollWorkflowTask(ctx, req)
	if err != nil || resp.Task == nil || resp.Task.WorkflowID != "on-b" || engB.polls.Load() != 1 {
		t.Fatalf("a poll on a: %+v, %v after %d polls of b's queue; want b's task through the fan-out", resp, err, engB.polls.Load())
	}
	<-toB.answers

	if resp, err := rb.PollWorkflowTask(ctx, req); err != nil || resp.Task == nil || engB.polls.Load() != 2 {
		t.Fatalf("a direct poll on b: %+v, %v", resp, err)
	}
	pollCtx, cancel := context.WithCancel(ctx)
	done := make(chan *api.PollWorkflowTaskResponse, 1)
	go func() {
		resp, _ := ra.PollWorkflowTask(pollCtx, req)
		done <- resp
	}()
	if ans := <-toB.answers; !ans.Covered || ans.Task != nil {
		t.Fatalf("b's answer to a forwarded poll while its own workers poll it: %+v, want Covered and no task", ans)
	}
	cancel()
	if resp := <-done; resp.Task != nil {
		t.Fatalf("the poll on a: %+v, want none (a's queue is empty, b is covered)", resp)
	}
	if n := engB.polls.Load(); n != 2 {
		t.Fatalf("b's queue was polled %d times, want 2: a covered server answers forwarded polls without its queue", n)
	}
	if p := ra.uncoveredPeers("w\x00q", clk.Now()); len(p) != 0 {
		t.Fatalf("a still fans out to %v after b said it is covered", p)
	}
	if p := ra.uncoveredPeers("w\x00other", clk.Now()); len(p) != 1 {
		t.Fatalf("a fans out to %v for another queue, want b", p)
	}

	clk.advance(coverTTL)
	resp, err = ra.PollWorkflowTask(ctx, req)
	if err != nil || resp.Task == nil || engB.polls.Load() != 3 {
		t.Fatalf("a poll on a %v after b's workers left: %+v, %v after %d polls of b's queue; want b's task again", coverTTL, resp, err, engB.polls.Load())
	}
}

// TestCoverageForgetsExpiredQueues: the coverage maps drop expired queues
// once they are large (sticky queues come and go with workers), and keep
// the live ones.
func TestCoverageForgetsExpiredQueues(t *testing.T) {
	var c coverage
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for i := range pruneAt {
		c.noteDirect(fmt.Sprintf("w\x00sticky-%d", i), t0)
		c.markCovered("b:7233", fmt.Sprintf("w\x00sticky-%d", i), t0)
	}
	later := t0.Add(coverTTL)
	c.noteDirect("w\x00q", later)
	c.markCovered("b:7233", "w\x00q", later)
	if len(c.direct) != 1 || len(c.covered) != 1 || !c.here("w\x00q", later) || !c.isCovered("b:7233", "w\x00q", later) {
		t.Fatalf("after expiry: %d direct and %d covered entries, want the live one of each", len(c.direct), len(c.covered))
	}
}
