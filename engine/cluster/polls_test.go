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
// poll forwarded from another server gets a task at once; a direct one
// waits until its caller gives up (so does every poll when block is set),
// and says so on entered.
type pollingEngine struct {
	api.Service
	block   bool
	polls   atomic.Int32
	entered chan struct{}
}

func (e *pollingEngine) PollWorkflowTask(ctx context.Context, req *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	e.polls.Add(1)
	if e.block || !Forwarded(ctx) {
		if e.entered != nil {
			e.entered <- struct{}{}
		}
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
// server where no worker of its own waits, and gets its task; while one
// of its own workers' polls waits there, that server answers a forwarded
// poll at once with Covered — without touching its queue — and the first
// server stops asking it; when that worker has gone, a poll of the first
// server that was already waiting asks it again once the Covered answer
// expires (its timer), and gets its task.
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
	engA, engB := &pollingEngine{block: true}, &pollingEngine{entered: make(chan struct{}, 1)}
	ra, rb := NewRouter(a, engA), NewRouter(b, engB)
	fire, timerSet := make(chan time.Time), make(chan time.Duration, 8)
	ra.after = func(d time.Duration) (<-chan time.Time, func() bool) {
		timerSet <- d
		return fire, func() bool { return true }
	}
	toB := &forwardedTo{r: rb, answers: make(chan *api.PollWorkflowTaskResponse, 8)}
	ra.peers.svcs["b:7233"] = toB
	req := &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w1"}

	resp, err := ra.PollWorkflowTask(ctx, req)
	if err != nil || resp.Task == nil || resp.Task.WorkflowID != "on-b" || engB.polls.Load() != 1 {
		t.Fatalf("a poll on a: %+v, %v after %d polls of b's queue; want b's task through the fan-out", resp, err, engB.polls.Load())
	}
	<-toB.answers

	// A worker's own poll waits on b.
	bCtx, bLeaves := context.WithCancel(ctx)
	bDone := make(chan struct{})
	go func() {
		_, _ = rb.PollWorkflowTask(bCtx, req)
		close(bDone)
	}()
	<-engB.entered
	aDone := make(chan *api.PollWorkflowTaskResponse, 1)
	aCtx, aGivesUp := context.WithTimeout(ctx, time.Minute) // a poll that is never answered fails the test below
	defer aGivesUp()
	go func() {
		resp, _ := ra.PollWorkflowTask(aCtx, req)
		aDone <- resp
	}()
	if ans := <-toB.answers; !ans.Covered || ans.Task != nil {
		t.Fatalf("b's answer to a forwarded poll while its own worker waits there: %+v, want Covered and no task", ans)
	}
	if d := <-timerSet; d != coverTTL { // a took the answer in
		t.Fatalf("a's poll waits %s for b's Covered answer to expire, want %s", d, coverTTL)
	}
	if n := engB.polls.Load(); n != 2 {
		t.Fatalf("b's queue was polled %d times, want 2: a covered server answers forwarded polls without its queue", n)
	}
	if _, ok := ra.cover.coveredUntil("b:7233", "w\x00q", clk.Now()); !ok {
		t.Fatal("a does not remember that b is covered")
	}
	if _, ok := ra.cover.coveredUntil("b:7233", "w\x00other", clk.Now()); ok {
		t.Fatal("a takes b as covered for another queue")
	}

	// b's worker leaves; a's poll, still waiting, asks b again when b's
	// answer expires, and gets b's task.
	bLeaves()
	<-bDone
	clk.advance(coverTTL)
	fire <- clk.Now()
	if resp := <-aDone; resp == nil || resp.Task == nil || resp.Task.WorkflowID != "on-b" || engB.polls.Load() != 3 {
		t.Fatalf("a's waiting poll after b's worker left and b's answer expired: %+v after %d polls of b's queue; want b's task", resp, engB.polls.Load())
	}
	if n := len(timerSet); n != 0 {
		t.Fatalf("a's poll set %d more timers, want none", n)
	}
	if rb.cover.here("w\x00q") || len(rb.cover.direct) != 0 {
		t.Fatalf("b still counts a direct poll after its worker left: %v", rb.cover.direct)
	}
}

// TestCoverageForgetsExpiredAnswers: the Covered answers a server keeps
// are dropped once expired when there are many (sticky queues come and go
// with workers), at most once per coverTTL, and the live one is kept.
func TestCoverageForgetsExpiredAnswers(t *testing.T) {
	var c coverage
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for i := range pruneAt {
		c.markCovered("b:7233", fmt.Sprintf("w\x00sticky-%d", i), t0)
	}
	later := t0.Add(coverTTL)
	c.markCovered("b:7233", "w\x00q", later)
	if _, ok := c.coveredUntil("b:7233", "w\x00q", later); len(c.covered) != 1 || !ok {
		t.Fatalf("after expiry: %d answers kept, want the live one", len(c.covered))
	}
}
