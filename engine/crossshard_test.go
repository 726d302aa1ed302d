package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// servingRouter is a test's cluster router between two engines: a call
// about a run goes to the engine that serves it.
type servingRouter struct {
	api.Service
	engines []*Engine
}

func (r servingRouter) owner(id string) *Engine {
	for _, e := range r.engines {
		if e.Serves(id) {
			return e
		}
	}
	return r.engines[0] // it answers ErrNotOwner
}

func (r servingRouter) StartWorkflow(ctx context.Context, req *api.StartWorkflowRequest) (*api.StartWorkflowResponse, error) {
	return r.owner(req.WorkflowID).StartWorkflow(ctx, req)
}

func (r servingRouter) SignalWorkflow(ctx context.Context, req *api.SignalWorkflowRequest) (*api.SignalWorkflowResponse, error) {
	return r.owner(req.WorkflowID).SignalWorkflow(ctx, req)
}

func (r servingRouter) DescribeWorkflow(ctx context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	return r.owner(req.WorkflowID).DescribeWorkflow(ctx, req)
}

func (r servingRouter) TerminateWorkflow(ctx context.Context, req *api.TerminateWorkflowRequest) (*api.TerminateWorkflowResponse, error) {
	return r.owner(req.WorkflowID).TerminateWorkflow(ctx, req)
}

func (r servingRouter) DeleteWorkflow(ctx context.Context, req *api.DeleteWorkflowRequest) (*api.DeleteWorkflowResponse, error) {
	return r.owner(req.WorkflowID).DeleteWorkflow(ctx, req)
}

func (r servingRouter) RequestCancelWorkflow(ctx context.Context, req *api.CancelWorkflowRequest) (*api.CancelWorkflowResponse, error) {
	return r.owner(req.WorkflowID).RequestCancelWorkflow(ctx, req)
}

func (r servingRouter) NotifyChildClosed(ctx context.Context, req *api.NotifyChildClosedRequest) (*api.NotifyChildClosedResponse, error) {
	return r.owner(req.ParentWorkflowID).NotifyChildClosed(ctx, req)
}

// linkedServers is twoServers, each reaching the other's runs through a
// servingRouter (r).
func linkedServers(t *testing.T) (a, b *Engine, la, lb *leaseBook, r servingRouter) {
	t.Helper()
	a, b, la, lb = twoServers(t)
	r = servingRouter{Service: a, engines: []*Engine{a, b}}
	a.SetRemote(r)
	b.SetRemote(r)
	return a, b, la, lb, r
}

// idInOtherShard returns a workflow id with prefix whose shard is not sh.
func idInOtherShard(b *leaseBook, prefix string, sh int) string {
	for i := 0; ; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if b.Of(id) != sh {
			return id
		}
	}
}

// waitEvents polls a run's history until it holds an event of typ.
func waitEvents(t *testing.T, e *Engine, id string, typ history.EventType) []history.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		h, err := e.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, WaitNewEvents: true})
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		for _, ev := range h.Events {
			if ev.Type() == typ {
				return h.Events
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s never got a %s event: %v", id, typ, h.Events)
		}
	}
}

// TestAcrossShards: a parent served by one engine starts a child another
// serves, signals it, hears that it closed, and terminates a child left
// open when it closes — each through the other engine, as two servers of
// a cluster do; a signal sent again with its request id is delivered once.
func TestAcrossShards(t *testing.T) {
	a, b, la, lb, r := linkedServers(t)
	ctx := context.Background()
	parent := "parent"
	pshard := la.Of(parent)
	child, other := idInOtherShard(la, "child", pshard), idInOtherShard(la, "open-child", pshard)
	la.take(t, pshard)
	must(t, a.Acquire(ctx, []int{pshard}))
	for _, id := range []string{child, other} {
		if sh := lb.Of(id); !b.Serves(id) {
			lb.take(t, sh)
			must(t, b.Acquire(ctx, []int{sh}))
		}
	}
	if _, err := a.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: parent, WorkflowType: "P", TaskQueue: "pq"}); err != nil {
		t.Fatal(err)
	}
	task := pollOn(t, a, "pq")
	completeOn(t, a, task,
		api.Command{Type: api.CommandStartChildWorkflow, StartChildWorkflow: &api.StartChildWorkflowCommand{WorkflowID: child, WorkflowType: "C", TaskQueue: "cq"}},
		api.Command{Type: api.CommandStartChildWorkflow, StartChildWorkflow: &api.StartChildWorkflowCommand{WorkflowID: other, WorkflowType: "C", TaskQueue: "cq",
			ParentClosePolicy: history.ParentCloseTerminate}})
	d, err := b.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: child})
	if err != nil || d.Info.ParentWorkflowID != parent || !d.Info.Status.Open() {
		t.Fatalf("the child on the other server: %+v %v", d, err)
	}
	waitEvents(t, a, parent, history.TypeChildWorkflowStarted)

	// A signal from the parent to its open child, across the shards; the
	// same signal sent again (its request id) is delivered once.
	wake(t, a, parent)
	task = pollOn(t, a, "pq")
	completeOn(t, a, task, api.Command{Type: api.CommandSignalExternalWorkflow, SignalExternalWorkflow: &api.SignalExternalWorkflowCommand{
		WorkflowID: other, SignalName: "hello"}})
	evs := waitEvents(t, b, other, history.TypeSignalReceived)
	sent := waitEvents(t, a, parent, history.TypeSignalExternalSent)
	var sentID int64
	for _, ev := range sent {
		if s, ok := ev.Attrs.(*history.SignalExternalSent); ok {
			if !s.Delivered {
				t.Fatalf("the signal across shards is recorded as not delivered: %+v", s)
			}
			sentID = ev.ID
		}
	}
	again := &api.SignalWorkflowRequest{WorkflowID: other, SignalName: "hello",
		RequestID: fmt.Sprintf("signal:%s/%s/%d", parent, task.RunID, sentID)}
	if _, err := r.SignalWorkflow(ctx, again); err != nil {
		t.Fatal(err)
	}
	if n := countType(waitEvents(t, b, other, history.TypeSignalReceived), history.TypeSignalReceived); n != 1 || countType(evs, history.TypeSignalReceived) != 1 {
		t.Fatalf("the signal sent again with its request id was delivered %d times, want once", n)
	}

	// The child completes on its server: the parent hears it.
	ct := pollOn(t, b, "cq")
	for ct.WorkflowID != child {
		ct = pollOn(t, b, "cq")
	}
	completeOn(t, b, ct, completeWF(`"done"`))
	waitEvents(t, a, parent, history.TypeChildWorkflowCompleted)

	// The parent completes: its open child is terminated on its server.
	task = pollOn(t, a, "pq")
	completeOn(t, a, task, completeWF(`"ok"`))
	if d, err := a.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: parent}); err != nil || d.Info.Status != api.StatusCompleted {
		t.Fatalf("the parent: %+v %v", d, err)
	}
	waitEvents(t, b, other, history.TypeWorkflowTerminated)
}

// TestCancelChildAcrossShards: a parent served by one engine cancels a
// child another serves: the child's run gets WorkflowCancelRequested
// through the other engine before the parent's task commits, the child
// closes as canceled, and the parent hears it (the outbox) as a
// ChildWorkflowFailed with a canceled failure. A request sent again (a
// parent's task retried after a failed commit) is recorded once.
func TestCancelChildAcrossShards(t *testing.T) {
	a, b, la, lb, r := linkedServers(t)
	ctx := context.Background()
	parent := "parent"
	pshard := la.Of(parent)
	child := idInOtherShard(la, "child", pshard)
	la.take(t, pshard)
	must(t, a.Acquire(ctx, []int{pshard}))
	lb.take(t, lb.Of(child))
	must(t, b.Acquire(ctx, []int{lb.Of(child)}))
	if _, err := a.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: parent, WorkflowType: "P", TaskQueue: "pq"}); err != nil {
		t.Fatal(err)
	}
	completeOn(t, a, pollOn(t, a, "pq"),
		api.Command{Type: api.CommandStartChildWorkflow, StartChildWorkflow: &api.StartChildWorkflowCommand{WorkflowID: child, WorkflowType: "C", TaskQueue: "cq"}})
	var initiated int64
	var runID string
	for _, ev := range waitEvents(t, a, parent, history.TypeChildWorkflowStarted) {
		if s, ok := ev.Attrs.(*history.ChildWorkflowStarted); ok {
			initiated, runID = ev.ID, s.RunID
		}
	}
	ct := pollOn(t, b, "cq") // the child's first task: it waits
	completeOn(t, b, ct)

	wake(t, a, parent)
	completeOn(t, a, pollOn(t, a, "pq"), api.Command{Type: api.CommandRequestCancelChildWorkflow,
		RequestCancelChildWorkflow: &api.RequestCancelChildWorkflowCommand{InitiatedEventID: initiated, WorkflowID: child, RunID: runID}})
	// Delivered before the parent's task committed: the child has it now.
	h, err := b.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: child})
	if err != nil || countType(h.Events, history.TypeWorkflowCancelRequested) != 1 {
		t.Fatalf("the child's history: %v %v", h, err)
	}
	if d, err := a.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: parent}); err != nil || len(d.PendingChildren) != 1 ||
		!d.PendingChildren[0].CancelRequested {
		t.Fatalf("the parent's pending children: %+v %v", d, err)
	}
	if _, err := r.RequestCancelWorkflow(ctx, &api.CancelWorkflowRequest{WorkflowID: child, RunID: runID, Identity: "w"}); err != nil {
		t.Fatal(err)
	}
	ct = pollOn(t, b, "cq")
	completeOn(t, b, ct, api.Command{Type: api.CommandCancelWorkflow, CancelWorkflow: &api.CancelWorkflowCommand{Details: jsonPayload(`"cleaned up"`)}})
	if n := countType(waitEvents(t, b, child, history.TypeWorkflowCanceled), history.TypeWorkflowCancelRequested); n != 1 {
		t.Fatalf("the child recorded %d cancel requests, want 1", n)
	}
	evs := waitEvents(t, a, parent, history.TypeChildWorkflowFailed)
	if countType(evs, history.TypeChildWorkflowCancelRequested) != 1 {
		t.Fatalf("the parent's history: %v", evs)
	}
	for _, ev := range evs {
		if f, ok := ev.Attrs.(*history.ChildWorkflowFailed); ok && (f.Failure.Type != "Canceled" || string(f.Failure.Details.Data) != `"cleaned up"`) {
			t.Fatalf("ChildWorkflowFailed %+v", f)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func pollOn(t *testing.T, e *Engine, queue string) *api.WorkflowTask {
	t.Helper()
	for range 20 {
		resp, err := e.PollWorkflowTask(context.Background(), &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Task != nil {
			return resp.Task
		}
	}
	t.Fatalf("no workflow task on %s", queue)
	return nil
}

func completeOn(t *testing.T, e *Engine, task *api.WorkflowTask, cmds ...api.Command) {
	t.Helper()
	if _, err := e.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, Identity: "w",
		Commands: cmds}); err != nil {
		t.Fatalf("complete %s's task: %v", task.WorkflowID, err)
	}
}

func countType(evs []history.Event, typ history.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

// wake signals a run so that it gets a workflow task.
func wake(t *testing.T, e *Engine, id string) {
	t.Helper()
	if _, err := e.SignalWorkflow(context.Background(), &api.SignalWorkflowRequest{WorkflowID: id, SignalName: "wake"}); err != nil {
		t.Fatal(err)
	}
}
