package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Runs of different shards (docs/scale-out.md, "Across shards"). A
// transition of one run may touch another: a child started, a signal
// sent, a parent told its child closed. When both runs' shards are served
// here, one transaction writes both, as on one server. When the other run
// is served by another server of the cluster (it is foreign to the
// transaction), this engine asks that server through Options.Remote (the
// cluster's router):
//
//   - a child is started there before this transaction commits, with the
//     run id its parent decided and a request id naming the parent's
//     command, so that the start sent again after a failed commit finds
//     the run it made (and an existing run of the id refuses it, as here);
//   - a signal is delivered there before this transaction commits, with a
//     request id naming the sender's event, so that one sent again is
//     delivered once (machine.RunState.SignalRequests);
//   - a child's cancel request (its parent's ChildWorkflowCancelRequested)
//     is delivered there before this transaction commits, to the run
//     named; a run asked twice records it once (RunState.CancelRequested),
//     and a child that closed meanwhile is left alone;
//   - a parent is told after this transaction commits, from a record the
//     transaction writes (the outbox: index key "x"), delivered in the
//     background until the parent's server takes it, and delivered again
//     by whichever server serves the child's shard next.

// SetRemote gives the engine the service that reaches the runs of shards
// other servers serve (the cluster's router). Needed with Options.Shards
// for children, parents and signals across shards; before any call.
func (e *Engine) SetRemote(svc api.Service) { e.remote = svc }

// ErrCrossShard: a transition needs a run another server serves and the
// engine has no way to reach it (no SetRemote).
var ErrCrossShard = fmt.Errorf("%w: the run is served by another server and this engine cannot reach it", api.ErrUnavailable)

// split partitions a transition's workflow ids: the first (the run the
// transition is about) must be served here; the others are local when
// their shard is served (or being loaded) here, else foreign.
func (s *shardSet) split(ids []string) (local, foreign []string) {
	if s == nil || len(ids) <= 1 {
		return ids, nil
	}
	local = append(local, ids[0])
	for _, id := range ids[1:] {
		if s.state[s.of.Of(id)].Load() == shardNone {
			foreign = append(foreign, id)
		} else {
			local = append(local, id)
		}
	}
	return local, foreign
}

// remoteOrErr returns the service that reaches foreign runs.
func (e *Engine) remoteOrErr() (api.Service, error) {
	if e.remote == nil {
		return nil, ErrCrossShard
	}
	return e.remote, nil
}

// probeForeign tells whether a foreign workflow id has an open run (and
// which), and the last run's state when it has none.
func (x *txn) probeForeign(ctx context.Context, workflowID string) (*api.DescribeWorkflowResponse, error) {
	svc, err := x.e.remoteOrErr()
	if err != nil {
		return nil, err
	}
	d, err := svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: workflowID})
	if errors.Is(err, api.ErrNotFound) {
		return nil, nil
	}
	return d, err
}

// foreignChildRefusal is childRefusal for a child id another server
// serves: refused while it has an open run, or when its last run's status
// and the reuse policy say no.
func (x *txn) foreignChildRefusal(ctx context.Context, c *api.StartChildWorkflowCommand) (string, error) {
	d, err := x.probeForeign(ctx, c.WorkflowID)
	if err != nil || d == nil {
		return "", err
	}
	if d.Info.Status.Open() {
		return fmt.Sprintf("workflow %q already has an open run", c.WorkflowID), nil
	}
	prev := &machine.RunState{WorkflowID: d.Info.WorkflowID, RunID: d.Info.RunID, Status: d.Info.Status}
	if err := reuseAllowed(c.ReusePolicy, prev); err != nil {
		return err.Error(), nil
	}
	return "", nil
}

// foreignSignalDelivered is probeTargets' answer for a signal to a run
// another server serves: delivered when it has an open run (the one named).
func (x *txn) foreignSignalDelivered(ctx context.Context, s *api.SignalExternalWorkflowCommand) (bool, error) {
	d, err := x.probeForeign(ctx, s.WorkflowID)
	if err != nil || d == nil {
		return false, err
	}
	return d.Info.Status.Open() && (s.RunID == "" || s.RunID == d.Info.RunID), nil
}

// childRequestID names a parent's StartChildWorkflow command.
func childRequestID(p *machine.ParentRef) string {
	return fmt.Sprintf("child:%s/%s/%d", p.WorkflowID, p.RunID, p.InitiatedEventID)
}

// startForeignChild starts a child run on the server that serves it. A
// start that finds the run it made before (the parent's commit failed and
// its task ran again) succeeds; any other refusal fails the transition,
// which is tried again (the probe then says it is refused).
func (x *txn) startForeignChild(ctx context.Context, cs machine.ChildStart) error {
	svc, err := x.e.remoteOrErr()
	if err != nil {
		return err
	}
	p := cs.Params.Parent
	req := cs.Params.Request
	req.RequestID = childRequestID(p)
	req.Child = &api.ChildOf{RunID: cs.Params.RunID, ParentWorkflowID: p.WorkflowID, ParentRunID: p.RunID,
		InitiatedEventID: p.InitiatedEventID, ParentClosePolicy: p.ParentClosePolicy}
	resp, err := svc.StartWorkflow(ctx, &req)
	if err != nil {
		return fmt.Errorf("start child %q on the server that serves it: %w", req.WorkflowID, err)
	}
	if resp.RunID != cs.Params.RunID {
		return api.Errorf(api.ErrUnavailable, "child %q started as run %q, not %q: try again", req.WorkflowID, resp.RunID, cs.Params.RunID)
	}
	return nil
}

// signalRequestID names a signal by its sender's event.
func signalRequestID(from history.RunRef, so machine.SignalOut) string {
	return fmt.Sprintf("signal:%s/%s/%d", from.WorkflowID, from.RunID, so.SentEventID)
}

// signalForeign delivers a signal to a run another server serves.
func (x *txn) signalForeign(ctx context.Context, from history.RunRef, so machine.SignalOut) error {
	svc, err := x.e.remoteOrErr()
	if err != nil {
		return err
	}
	_, err = svc.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: so.WorkflowID, RunID: so.RunID, SignalName: so.Name,
		Input: so.Input, Identity: so.Identity, RequestID: signalRequestID(from, so)})
	if err != nil {
		return fmt.Errorf("signal %q on the server that serves it: %w", so.WorkflowID, err)
	}
	return nil
}

// cancelForeignChild asks a child run another server serves to cancel.
// A child that closed meanwhile (or is gone) needs nothing; any other
// failure fails the transition, which is tried again.
func (x *txn) cancelForeignChild(ctx context.Context, cc machine.ChildCancel) error {
	svc, err := x.e.remoteOrErr()
	if err != nil {
		return err
	}
	_, err = svc.RequestCancelWorkflow(ctx, &api.CancelWorkflowRequest{WorkflowID: cc.WorkflowID, RunID: cc.RunID, Reason: cc.Reason,
		Identity: cc.Identity})
	if err != nil && !errors.Is(err, api.ErrWorkflowClosed) && !errors.Is(err, api.ErrNotFound) {
		return fmt.Errorf("cancel child %q on the server that serves it: %w", cc.WorkflowID, err)
	}
	return nil
}

// parentNotice is an outbox record: a closed child's parent, served by
// another server, is to be told.
type parentNotice struct {
	ParentWorkflowID, ParentRunID string
	InitiatedEventID              int64
}

func outboxKey(child history.RunRef) []byte {
	return history.Key().Str("x").Str(child.WorkflowID).Str(child.RunID).Bytes()
}

// noteForeignParent writes, with the child's close, the record that tells
// its parent (served by another server) once this transaction commits.
func (x *txn) noteForeignParent(child *machine.RunState) error {
	p := child.Parent
	b, err := api.MarshalMsgpack(&parentNotice{ParentWorkflowID: p.WorkflowID, ParentRunID: p.RunID, InitiatedEventID: p.InitiatedEventID})
	if err != nil {
		return fmt.Errorf("%w: encode the parent notice: %w", api.ErrInternal, err)
	}
	x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceIndex, Key: outboxKey(child.Ref()), Value: b})
	x.notices = append(x.notices, child.Ref())
	return nil
}

// deliverNoticesLater tells the foreign parents of the children this
// transaction closed, in the background.
func (e *Engine) deliverNoticesLater(refs []history.RunRef) {
	for _, ref := range refs {
		e.background(func() { e.deliverNotice(ref, 0) })
	}
}

// noticeRetry is how long a parent notice that could not be delivered
// waits before it is sent again (doubling up to a minute).
const noticeRetry = time.Second

// deliverNotice tells a closed child's parent, then deletes the notice. A
// failure is retried with backoff while this engine serves the child.
func (e *Engine) deliverNotice(child history.RunRef, attempt int) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := e.tryNotice(ctx, child)
	if err == nil || errors.Is(err, api.ErrNotOwner) || e.closed.Load() {
		return // delivered, or now another server's to deliver
	}
	delay := min(noticeRetry<<min(attempt, 6), time.Minute)
	e.log.Warn().Err(err).Str("workflow", child.WorkflowID).Str("run", child.RunID).Dur("retry_in", delay).
		Msg("the parent of a closed child (on another server) could not be told yet")
	t := time.AfterFunc(delay, func() {
		if !e.closed.Load() {
			e.background(func() { e.deliverNotice(child, attempt+1) })
		}
	})
	go func() { <-e.stop; t.Stop() }()
}

// tryNotice delivers one notice: it reads the record and the child's final
// state, tells the parent's server, and deletes the record.
func (e *Engine) tryNotice(ctx context.Context, child history.RunRef) error {
	if err := e.shards.wait(ctx, []string{child.WorkflowID}); err != nil {
		return err
	}
	if err := e.shards.check(child.WorkflowID); err != nil {
		return err
	}
	b, err := e.store.Get(ctx, history.SpaceIndex, outboxKey(child))
	if errors.Is(err, history.ErrNotFound) {
		return nil // delivered already
	}
	if err != nil {
		return storeErr(err)
	}
	var n parentNotice
	if err := api.UnmarshalMsgpack(b, &n); err != nil {
		return fmt.Errorf("%w: %w: parent notice of %q/%q: %w", api.ErrInternal, history.ErrCorrupt, child.WorkflowID, child.RunID, err)
	}
	st, _, err := e.loadState(ctx, child.WorkflowID, child.RunID)
	if err != nil {
		return err
	}
	svc, err := e.remoteOrErr()
	if err != nil {
		return err
	}
	if _, err := svc.NotifyChildClosed(ctx, &api.NotifyChildClosedRequest{ParentWorkflowID: n.ParentWorkflowID, ParentRunID: n.ParentRunID,
		InitiatedEventID: n.InitiatedEventID, ChildWorkflowID: child.WorkflowID, ChildRunID: child.RunID, Status: st.Status,
		Result: st.Result, Failure: st.Failure}); err != nil {
		return err
	}
	return e.transact(ctx, []string{child.WorkflowID}, func(x *txn) error {
		x.batch.Deletes = append(x.batch.Deletes, history.RecordKey{Space: history.SpaceIndex, Key: outboxKey(child)})
		return nil
	})
}

// deliverPendingNotices sends the notices of the runs of newly acquired
// shards that a server before this one could not deliver.
func (e *Engine) deliverPendingNotices(ctx context.Context, shards map[int]bool) error {
	var refs []history.RunRef
	err := e.scanIndex(ctx, history.Key().Str("x").Bytes(), func(r history.Record, _ error) error {
		if !isOutbox(r) {
			return nil // a duplicate-index record (ledger.go) shares the family
		}
		kr := history.ReadKey(r.Key)
		_ = kr.Str()
		ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
		if kr.Err() == nil && shards[e.shards.shard(ref.WorkflowID)] {
			refs = append(refs, ref)
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.deliverNoticesLater(refs)
	return nil
}

// NotifyChildClosed implements api.Service: the child of one of this
// server's runs closed on another server.
func (e *Engine) NotifyChildClosed(ctx context.Context, req *api.NotifyChildClosedRequest) (*api.NotifyChildClosedResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	child := &machine.RunState{WorkflowID: req.ChildWorkflowID, RunID: req.ChildRunID, Status: req.Status, Result: req.Result, Failure: req.Failure}
	if child.Status.Open() {
		return nil, api.Errorf(api.ErrInvalidArgument, "child %q run %q is %s, not closed", req.ChildWorkflowID, req.ChildRunID, req.Status)
	}
	err := e.transact(ctx, []string{req.ParentWorkflowID}, func(x *txn) error {
		pe := e.openRun(req.ParentWorkflowID)
		if pe == nil || pe.ref.RunID != req.ParentRunID {
			return nil // the parent closed: nothing waits for the child
		}
		tr := x.edit(pe)
		out, err := e.m.ChildClosed(tr.st, req.InitiatedEventID, child, x.now)
		if err != nil {
			return err
		}
		return x.apply(ctx, tr, out)
	})
	if err != nil {
		return nil, err
	}
	return &api.NotifyChildClosedResponse{}, nil
}

// foreignChildOpen reports whether a child another server serves is still
// open as parent's child (not closed, and its id not now another run's).
func (e *Engine) foreignChildOpen(ctx context.Context, parent *machine.RunState, c machine.ChildInfo) bool {
	d, err := e.remote.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: c.WorkflowID})
	return err == nil && d.Info.Status.Open() && d.Info.ParentWorkflowID == parent.WorkflowID && d.Info.ParentRunID == parent.RunID
}
