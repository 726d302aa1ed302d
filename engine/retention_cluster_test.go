package engine

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// unreachableParents is a servingRouter whose NotifyChildClosed fails while
// down is set: the parents' server cannot be reached.
type unreachableParents struct {
	servingRouter
	down *atomic.Bool
}

func (r unreachableParents) NotifyChildClosed(ctx context.Context, req *api.NotifyChildClosedRequest) (*api.NotifyChildClosedResponse, error) {
	if r.down.Load() {
		return nil, api.Errorf(api.ErrUnavailable, "the parent's server cannot be reached")
	}
	return r.servingRouter.NotifyChildClosed(ctx, req)
}

// TestDeleteKeepsChildUntilParentTold: in a cluster a child that closed
// tells its parent on another server from its outbox record, reading its
// outcome from its run state. While that notice is not delivered (the
// parent's server unreachable), deleting the child (retention, or by
// hand) would lose the outcome: the parent would wait for its child for
// ever. The delete is refused until the parent has been told.
func TestDeleteKeepsChildUntilParentTold(t *testing.T) {
	a, b, la, lb, r := linkedServers(t)
	down := &atomic.Bool{}
	ur := unreachableParents{servingRouter: r, down: down}
	a.SetRemote(ur)
	b.SetRemote(ur)
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
	completeOn(t, a, pollOn(t, a, "pq"), api.Command{Type: api.CommandStartChildWorkflow,
		StartChildWorkflow: &api.StartChildWorkflowCommand{WorkflowID: child, WorkflowType: "C", TaskQueue: "cq"}})
	waitEvents(t, a, parent, history.TypeChildWorkflowStarted)

	down.Store(true)
	ct := pollOn(t, b, "cq")
	completeOn(t, b, ct, completeWF(`"done"`))
	_, err := b.DeleteWorkflow(ctx, &api.DeleteWorkflowRequest{WorkflowID: child})
	wantErr(t, err, api.ErrFailedPrecondition)

	down.Store(false)
	if err := b.tryNotice(ctx, history.RunRef{WorkflowID: child, RunID: ct.RunID}); err != nil {
		t.Fatalf("the parent notice, once its server is back: %v", err)
	}
	waitEvents(t, a, parent, history.TypeChildWorkflowCompleted)
	if _, err := b.DeleteWorkflow(ctx, &api.DeleteWorkflowRequest{WorkflowID: child}); err != nil {
		t.Fatalf("delete once the parent was told: %v", err)
	}
}
