package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/internal/clock"
	"github.com/cairnflow/cairn/internal/pgtest"
)

// leaseBook is a test's Shards: the leases one engine holds in a shared
// Postgres store, taken and given up by the test.
type leaseBook struct {
	st     *pgstore.Store
	owner  string
	mu     sync.Mutex
	held   map[int]pgstore.Lease
	fenced []int
}

func (b *leaseBook) Count() int       { return b.st.Shards() }
func (b *leaseBook) Of(id string) int { return history.ShardOf(id, b.st.Shards()) }
func (b *leaseBook) Fenced(sh int, _ int64) {
	b.mu.Lock()
	b.fenced = append(b.fenced, sh)
	b.mu.Unlock()
}
func (b *leaseBook) Lease(sh int) (history.Fence, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	l, ok := b.held[sh]
	return l.Fence(), ok
}

func (b *leaseBook) take(t *testing.T, shard int) {
	t.Helper()
	l, err := b.st.AcquireShard(context.Background(), shard, b.owner, time.Hour)
	if err != nil {
		t.Fatalf("%s acquires shard %d: %v", b.owner, shard, err)
	}
	b.mu.Lock()
	b.held[shard] = l
	b.mu.Unlock()
}

// giveUp expires the lease in the database, as a lease that ran out, but
// leaves the book believing it holds it: a server frozen past its lease.
func (b *leaseBook) giveUp(t *testing.T, shard int) {
	t.Helper()
	b.mu.Lock()
	l := b.held[shard]
	b.mu.Unlock()
	if err := b.st.ReleaseLeases(context.Background(), b.owner, []pgstore.Lease{l}); err != nil {
		t.Fatal(err)
	}
}

// twoServers opens two engines over one Postgres store, as two servers of
// a cluster; neither serves a shard yet.
func twoServers(t *testing.T) (a, b *Engine, la, lb *leaseBook) {
	t.Helper()
	url, schema := pgtest.URL(t)
	open := func(name string) (*Engine, *leaseBook) {
		st, err := pgstore.Open(context.Background(), pgstore.Options{URL: url, Schema: schema, Shards: 8})
		if err != nil {
			t.Fatal(err)
		}
		book := &leaseBook{st: st, owner: name, held: map[int]pgstore.Lease{}}
		var n int
		eng, err := Open(Options{Store: st, Shards: book, Clock: clock.NewFake(testStart), PollTimeout: time.Second,
			NewRunID: func() string { n++; return fmt.Sprintf("%s-run-%d", name, n) }})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = eng.Close(); _ = st.Close() })
		return eng, book
	}
	a, la = open("server-a")
	b, lb = open("server-b")
	return a, b, la, lb
}

// TestShardsFenceAStaleOwner: an engine serves only the shards it acquired;
// one whose lease was taken over can write nothing (its commit is fenced:
// ErrNotOwner, and it is told), and the new owner loads the run and goes on.
func TestShardsFenceAStaleOwner(t *testing.T) {
	a, b, la, lb := twoServers(t)
	ctx := context.Background()
	if a.bootGen == b.bootGen {
		t.Fatalf("two engines on one store took the same boot generation %d: their epochs would collide", a.bootGen)
	}
	sh := la.Of("wf")
	start := &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}
	if _, err := a.StartWorkflow(ctx, start); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("start before acquiring the shard: %v, want ErrNotOwner", err)
	}
	la.take(t, sh)
	if err := a.Acquire(ctx, []int{sh}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartWorkflow(ctx, start); err != nil {
		t.Fatal(err)
	}
	if _, err := b.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "wf"}); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("describe on a server that does not serve the shard: %v, want ErrNotOwner", err)
	}

	// A's lease runs out while it is frozen; B takes the shard over.
	la.giveUp(t, sh)
	lb.take(t, sh)
	if err := b.Acquire(ctx, []int{sh}); err != nil {
		t.Fatal(err)
	}
	// A wakes up and writes: fenced, nothing written, and A is told.
	_, err := a.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "stale"})
	if !errors.Is(err, api.ErrNotOwner) || !errors.Is(err, history.ErrFenced) {
		t.Fatalf("a stale owner's signal: %v, want ErrNotOwner wrapping history.ErrFenced", err)
	}
	la.mu.Lock()
	fenced := append([]int(nil), la.fenced...)
	la.mu.Unlock()
	if len(fenced) != 1 || fenced[0] != sh {
		t.Fatalf("the stale owner was told of fenced shards %v, want [%d]", fenced, sh)
	}
	// B serves the run: the stale signal is not in its history, B's is.
	if _, err := b.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "fresh"}); err != nil {
		t.Fatal(err)
	}
	h, err := b.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ev := range h.Events {
		if s, ok := ev.Attrs.(*history.SignalReceived); ok {
			names = append(names, s.Name)
		}
	}
	if len(names) != 1 || names[0] != "fresh" {
		t.Fatalf("signals in the history: %v, want only the new owner's", names)
	}
	task, err := b.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || task.Task == nil || task.Task.WorkflowID != "wf" {
		t.Fatalf("the new owner dispatches the run's task: %+v %v", task, err)
	}
	// Released, a shard is not served any more.
	b.Release([]int{sh})
	if _, err := b.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "wf"}); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("describe after release: %v, want ErrNotOwner", err)
	}
}

// TestTokenWorkflowID: every kind of task token names its workflow id.
func TestTokenWorkflowID(t *testing.T) {
	for name, tok := range map[string][]byte{
		"workflow task": encodeToken(wftToken{W: "wf-1", R: "r", E: 7}),
		"activity":      encodeToken(actToken{W: "wf-1", R: "r", S: 5, E: 9, A: 2}),
		"query":         encodeToken(queryToken{W: "wf-1", Q: "q"}),
	} {
		if id, err := TokenWorkflowID(tok); err != nil || id != "wf-1" {
			t.Errorf("%s token: %q %v", name, id, err)
		}
	}
	for _, bad := range [][]byte{nil, {0x90}, []byte("x"), encodeToken(wftToken{})} {
		if _, err := TokenWorkflowID(bad); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("token %x: %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// TestHeartbeatOnAServerThatDoesNotServeTheRun: a heartbeat that reaches an
// engine not serving the run's shard — forwarded by a server whose routing
// table is a moment old, or answered by an owner that gave the shard up —
// is refused with ErrNotOwner (the router then asks the owner), never with
// ErrStaleAttempt: that would make the worker abandon an attempt whose
// lease the owner still holds.
func TestHeartbeatOnAServerThatDoesNotServeTheRun(t *testing.T) {
	a, b, la, lb := twoServers(t)
	ctx := context.Background()
	sh := la.Of("wf")
	la.take(t, sh)
	if err := a.Acquire(ctx, []int{sh}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wft, err := a.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	opts := history.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: 10 * time.Second}
	if _, err := a.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken,
		Commands: []api.Command{schedule("pay", "Pay", history.SideEffect, opts)}}); err != nil {
		t.Fatal(err)
	}
	act, err := a.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || act.Task == nil {
		t.Fatalf("poll activity: %+v %v", act, err)
	}
	hb := &api.HeartbeatRequest{TaskToken: act.Task.TaskToken}
	if _, err := a.RecordActivityHeartbeat(ctx, hb); err != nil {
		t.Fatalf("heartbeat on the owner: %v", err)
	}
	// B has never served the shard.
	if _, err := b.RecordActivityHeartbeat(ctx, hb); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("heartbeat on a server that never served the shard: %v, want ErrNotOwner", err)
	}
	// A gives the shard up (rebalancing) and B takes it over.
	a.Release([]int{sh})
	if err := la.st.ReleaseLeases(ctx, la.owner, []pgstore.Lease{la.held[sh]}); err != nil {
		t.Fatal(err)
	}
	lb.take(t, sh)
	if err := b.Acquire(ctx, []int{sh}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RecordActivityHeartbeat(ctx, hb); !errors.Is(err, api.ErrNotOwner) || errors.Is(err, api.ErrStaleAttempt) {
		t.Fatalf("heartbeat on the former owner: %v, want ErrNotOwner", err)
	}
	// The owner holds the attempt's lease.
	if _, err := b.RecordActivityHeartbeat(ctx, hb); err != nil {
		t.Fatalf("heartbeat on the new owner: %v", err)
	}
}

// TestLapsedLeaseAnswersNothing: once the cluster says the engine's lease
// of a shard may have run out (Shards.Lease: the server could not renew
// it, or was frozen and has just woken up), the engine answers nothing
// from its memory of the shard's runs — not a describe, not a heartbeat —
// before anything tells it to release the shard: another server may be
// moving them on. When the lease is held again, it serves them again.
func TestLapsedLeaseAnswersNothing(t *testing.T) {
	a, _, la, _ := twoServers(t)
	ctx := context.Background()
	sh := la.Of("wf")
	la.take(t, sh)
	if err := a.Acquire(ctx, []int{sh}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	la.mu.Lock()
	l := la.held[sh]
	delete(la.held, sh) // the lease lapsed; nobody released the shard yet
	la.mu.Unlock()
	if _, err := a.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "wf"}); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("describe with a lapsed lease: %v, want ErrNotOwner", err)
	}
	if _, err := a.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "s"}); !errors.Is(err, api.ErrNotOwner) {
		t.Fatalf("signal with a lapsed lease: %v, want ErrNotOwner", err)
	}
	// The run's first workflow task waits in memory: not handed out.
	if resp, err := a.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"}); err != nil || resp.Task != nil {
		t.Fatalf("poll with a lapsed lease: %+v %v, want no task", resp, err)
	}
	// The node acquires the shard again: the engine loads it afresh.
	la.mu.Lock()
	la.held[sh] = l
	la.mu.Unlock()
	a.Release([]int{sh})
	if err := a.Acquire(ctx, []int{sh}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "wf"}); err != nil {
		t.Fatalf("describe with the lease held again: %v", err)
	}
	if resp, err := a.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"}); err != nil || resp.Task == nil {
		t.Fatalf("poll with the lease held again: %+v %v, want the run's task", resp, err)
	}
}
