package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// wftToken identifies one dispatch of a workflow task.
type wftToken struct {
	W string `msgpack:"w"`
	R string `msgpack:"r"`
	E int64  `msgpack:"e"`
}

// queryToken identifies one query waiting for its answer.
type queryToken struct {
	W string `msgpack:"w"`
	Q string `msgpack:"q"`
}

// actToken identifies one attempt of an activity under its lease.
type actToken struct {
	W string `msgpack:"w"`
	R string `msgpack:"r"`
	S int64  `msgpack:"s"`
	E int64  `msgpack:"e"`
	A int32  `msgpack:"a"`
	// H marks a Read attempt handed over before its schedule was durable
	// (txn.handOffActivities). If that transaction was lost, S may later
	// name another activity, so a stale report under such a token is only
	// refused: none of the late-completion or duplicate-effect handling,
	// which reads the activity at S, applies to it.
	H bool `msgpack:"h"`
	// L marks the dispatch of a Reconcile lookup, not of an attempt of
	// the action: once it no longer holds the lease its report proves
	// nothing about the action (it is refused, never judged).
	L bool `msgpack:"l"`
}

func encodeToken(v any) []byte {
	b, _ := api.MarshalMsgpack(v) // plain structs of strings and ints cannot fail
	return b
}

func decodeMsgpack(b []byte, v any) error { return api.UnmarshalMsgpack(b, v) }

// decodeToken reads a task token strictly (msgpack.Unmarshal, not
// api.UnmarshalMsgpack): a token of another kind — a query task's given
// where a workflow task's is expected — has another shape and must not
// read as this one. Tokens do not outlive the engine that issued them (the
// boot generation), so no token of another version's shape reaches it.
func decodeToken(b []byte, v any) error {
	if len(b) == 0 || msgpack.Unmarshal(b, v) != nil {
		return api.Errorf(api.ErrInvalidArgument, "malformed task token")
	}
	return nil
}

// PollWorkflowTask implements api.Service.
func (e *Engine) PollWorkflowTask(ctx context.Context, req *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := e.m.CheckID("task queue", req.TaskQueue, true); err != nil {
		return nil, err
	}
	defer e.pollers.begin(req.TaskQueue, req.Identity, false, e.now)()
	ctx, cancel := context.WithTimeout(ctx, e.opts.PollTimeout)
	defer cancel()
	for {
		item, ok := e.wftQ.Poll(ctx, req.TaskQueue)
		if !ok {
			return &api.PollWorkflowTaskResponse{}, nil
		}
		task, err := e.dispatchWFT(ctx, item, req.Identity)
		if errors.Is(err, api.ErrDataCorrupt) || errors.Is(err, api.ErrNotOwner) {
			continue // that run is quarantined now, or its shard moved: the poller waits for another task
		}
		if err != nil {
			return nil, err
		}
		if task != nil && ctx.Err() != nil && task.Query == nil {
			// The poller left while the task was being handed to it: give
			// the task back now rather than after its timeout.
			e.handBackWFT(task)
			return &api.PollWorkflowTaskResponse{}, nil
		}
		if task != nil {
			e.stats.wftDispatched.Add(1)
			return &api.PollWorkflowTaskResponse{Task: task}, nil
		}
	}
}

// handBackUnstarted undoes the dispatch of a workflow task its poller never
// started (FailWorkflowTask with api.CauseNotStarted). A task that is no
// longer current is left alone.
func (e *Engine) handBackUnstarted(tok wftToken) error {
	unlock := e.lock(tok.W)
	defer unlock()
	if err := e.shards.check(tok.W); err != nil {
		return err
	}
	if entry, err := e.currentWFT(tok); err == nil {
		e.rescheduleWFT(entry)
	}
	return nil
}

// handBackWFT undoes the dispatch of a workflow task nobody received.
func (e *Engine) handBackWFT(task *api.WorkflowTask) {
	var tok wftToken
	if decodeToken(task.TaskToken, &tok) != nil {
		return
	}
	unlock := e.lock(tok.W)
	defer unlock()
	if entry, err := e.currentWFT(tok); err == nil {
		e.rescheduleWFT(entry)
	}
}

// dispatchWFT turns a queue item into a task, or returns nil for an item
// that went stale while queued.
func (e *Engine) dispatchWFT(ctx context.Context, item wftItem, identity string) (*api.WorkflowTask, error) {
	if item.task != nil {
		return item.task, nil
	}
	if item.query != nil {
		return e.queryTask(ctx, item)
	}
	unlock := e.lock(item.ref.WorkflowID)
	entry := e.openRun(item.ref.WorkflowID)
	if entry == nil || entry.ref != item.ref {
		unlock()
		return nil, nil
	}
	if e.shards != nil {
		// Past its lease (a server woken up, or cut off from the database)
		// the engine hands out nothing from its memory of the shard: the
		// item is dropped, and queued again by whoever loads the run next
		// (this engine, when its node acquires the shard again).
		if _, ok := e.shards.of.Lease(e.shards.shard(item.ref.WorkflowID)); !ok {
			unlock()
			return nil, nil
		}
	}
	if entry.resync {
		if err := e.resync(ctx, entry); err != nil {
			// The run cannot be read back now (the store is down): the task
			// stays queued — nothing else would queue it again — and the
			// poller hears why (a worker backs off).
			queue := entry.state.TaskQueue
			if entry.state.WFT.StickyQueue != "" {
				queue = entry.state.WFT.StickyQueue // where enqueueWFT put it
			}
			e.wftQ.Push(queue, item)
			unlock()
			return nil, err
		}
	}
	st := entry.state
	w := &st.WFT
	if !w.Scheduled || w.Started || w.Seq != item.seq {
		unlock()
		return nil, nil
	}
	first := int64(1)
	if w.OnSticky && w.SeenEventID > 0 {
		first = w.SeenEventID + 1
	}
	epoch := e.nextEpoch()
	d := e.m.WFTDispatched(st, epoch, e.now())
	e.timers.Add(d.At, timerKey{ref: entry.ref, d: d})
	task := e.workflowTask(st, epoch, first)
	evs, cached := entry.tail.get(first, task.NextEventID)
	entry.tail.dispatched(task.NextEventID)
	unlock()
	if !cached {
		// Events before NextEventID are committed and never change: read
		// them without holding the run.
		var err error
		if evs, err = e.readEvents(ctx, item.ref, st.Base, first, int(task.NextEventID-first)); err != nil {
			return nil, e.settle(damaged(item.ref, true, err))
		}
	}
	task.Events = evs
	return task, nil
}

// workflowTask is the task of run st's workflow task dispatched under
// epoch, from event first (its Events are the caller's to fill).
func (e *Engine) workflowTask(st *machine.RunState, epoch, first int64) *api.WorkflowTask {
	return &api.WorkflowTask{
		TaskToken:  encodeToken(&wftToken{W: st.WorkflowID, R: st.RunID, E: epoch}),
		WorkflowID: st.WorkflowID, RunID: st.RunID, WorkflowType: st.WorkflowType, TaskQueue: st.TaskQueue,
		Attempt: st.WFT.Attempt, FirstEventID: first, NextEventID: st.NextEventID,
		ContinueAsNewSuggested:    e.m.SuggestContinueAsNew(st),
		SuggestContinueAsNewAt:    e.m.Limits.SuggestContinueAsNewAt,
		MaxPayloadBytes:           e.m.Limits.MaxPayloadBytes,
		SuggestContinueAsNewBytes: e.m.Limits.SuggestContinueAsNewBytes,
	}
}

func (e *Engine) queryTask(ctx context.Context, item wftItem) (*api.WorkflowTask, error) {
	e.queriesMu.Lock()
	_, live := e.queries[item.query.id]
	e.queriesMu.Unlock()
	if !live {
		return nil, nil
	}
	st, _, err := e.snapshot(ctx, item.ref.WorkflowID, item.ref.RunID)
	if err != nil {
		return nil, err
	}
	evs, err := e.readRun(ctx, st, 1, int(st.NextEventID-1))
	if err != nil {
		return nil, e.settle(damaged(item.ref, true, err))
	}
	item.query.at.Store(st.NextEventID)
	q := item.query.query
	return &api.WorkflowTask{TaskToken: []byte(item.query.id), WorkflowID: st.WorkflowID, RunID: st.RunID,
		WorkflowType: st.WorkflowType, TaskQueue: st.TaskQueue, FirstEventID: 1, NextEventID: st.NextEventID, Events: evs, Query: &q}, nil
}

// CompleteWorkflowTask implements api.Service.
func (e *Engine) CompleteWorkflowTask(ctx context.Context, req *api.CompleteWorkflowTaskRequest) (*api.CompleteWorkflowTaskResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	var tok wftToken
	if err := decodeToken(req.TaskToken, &tok); err != nil {
		return nil, err
	}
	if err := e.m.CheckID("sticky queue", req.StickyQueue, false); err != nil {
		return nil, err
	}
	ids := append([]string{tok.W}, commandTargets(req.Commands)...)
	if p := e.parentOf(tok.W); p != nil {
		ids = append(ids, p.WorkflowID)
	}
	var unhandled bool
	var refused error
	err := e.transact(ctx, ids, func(x *txn) error {
		entry, err := e.currentWFT(tok)
		if err != nil {
			return err
		}
		if entry.parent != nil && !x.held[entry.parent.WorkflowID] && !x.foreign[entry.parent.WorkflowID] {
			return fmt.Errorf("%w: parent lock missing", api.ErrInternal)
		}
		tr := x.edit(entry)
		wc := machine.WFTCompletion{Commands: req.Commands, StickyQueue: req.StickyQueue, Identity: req.Identity,
			Declarations: e.approvalDeclarations(tr.st, req.Commands, e.scheduleDeclarations(tr.st, req.Commands))}
		if wc.ChildRefused, wc.SignalDelivered, err = x.probeTargets(ctx, req.Commands); err != nil {
			return err
		}
		out, err := e.m.CompleteWFT(tr.st, wc, x.now)
		if errors.Is(err, machine.ErrUnhandledEvents) {
			unhandled = true
			e.rescheduleWFT(entry)
			x.runs, x.byRef = nil, map[history.RunRef]*txnRun{}
			return nil
		}
		if machine.IsRefusal(err) {
			// The same history through the same code makes the same
			// commands: refusing them into a timeout would loop. The task
			// fails with the refusal as its cause, durably.
			refused = err
			x.runs, x.byRef = nil, map[history.RunRef]*txnRun{}
			tr = x.edit(entry)
			out, err = e.m.RefuseWFT(tr.st, refused, req.Identity, x.now)
		}
		if err != nil {
			return err
		}
		return x.apply(ctx, tr, out)
	})
	if err != nil && refused == nil && !unhandled && errors.Is(err, api.ErrInvalidArgument) {
		// Refused while the batch was built: a payload extends a chunk
		// that is not stored. The same code would send the same commands
		// again: fail the task durably, as for any malformed command.
		refused = err
		err = e.refuseWFT(ctx, ids, tok, refused, req.Identity)
	}
	if err != nil {
		return nil, err
	}
	if refused != nil {
		return nil, fmt.Errorf("%w (recorded as a failed workflow task)", refused)
	}
	if unhandled {
		return nil, api.Errorf(api.ErrStaleTask, "new events arrived while the task ran; the workflow task was rescheduled")
	}
	return &api.CompleteWorkflowTaskResponse{}, nil
}

// refuseWFT records, in a transaction of its own, that the engine refused
// the commands of the workflow task tok names (RefuseWFT).
func (e *Engine) refuseWFT(ctx context.Context, ids []string, tok wftToken, refusal error, identity string) error {
	return e.transact(ctx, ids, func(x *txn) error {
		entry, err := e.currentWFT(tok)
		if err != nil {
			return err
		}
		tr := x.edit(entry)
		out, err := e.m.RefuseWFT(tr.st, refusal, identity, x.now)
		if err != nil {
			return err
		}
		return x.apply(ctx, tr, out)
	})
}

// currentWFT returns the open run whose started workflow task the token
// names. Call with the run's lock held.
func (e *Engine) currentWFT(tok wftToken) (*runEntry, error) {
	if c := e.corrupt.lookup(tok.W, tok.R); c != nil {
		return nil, c.err()
	}
	entry := e.openRun(tok.W)
	if entry == nil || entry.ref.RunID != tok.R {
		return nil, api.Errorf(api.ErrStaleTask, "workflow %q run %q has no open workflow task", tok.W, tok.R)
	}
	if w := entry.state.WFT; !w.Started || w.Epoch != tok.E {
		return nil, api.Errorf(api.ErrStaleTask, "workflow %q run %q: task %d is not the current workflow task", tok.W, tok.R, tok.E)
	}
	return entry, nil
}

// rescheduleWFT hands a workflow task whose completion was refused back to
// the run's task queue with the full history.
func (e *Engine) rescheduleWFT(entry *runEntry) {
	w := &entry.state.WFT
	w.Started, w.StickyQueue, w.SeenEventID = false, "", 0
	e.enqueueWFT(entry, entry.state)
}

// commandTargets lists the other workflow ids the commands touch.
func commandTargets(cmds []api.Command) []string {
	var ids []string
	for _, c := range cmds {
		switch {
		case c.StartChildWorkflow != nil:
			ids = append(ids, c.StartChildWorkflow.WorkflowID)
		case c.SignalExternalWorkflow != nil:
			ids = append(ids, c.SignalExternalWorkflow.WorkflowID)
		case c.RequestCancelChildWorkflow != nil:
			ids = append(ids, c.RequestCancelChildWorkflow.WorkflowID)
		}
	}
	return ids
}

// probeTargets decides, before the commands are applied, which child starts
// are refused and which signals find an open run.
func (x *txn) probeTargets(ctx context.Context, cmds []api.Command) (map[int]string, map[int]bool, error) {
	refused, delivered := map[int]string{}, map[int]bool{}
	starting := map[string]bool{}
	for i, c := range cmds {
		switch {
		case c.Type == api.CommandStartChildWorkflow && c.StartChildWorkflow != nil:
			id := c.StartChildWorkflow.WorkflowID
			r := ""
			if x.foreign[id] && !starting[id] {
				var err error
				if r, err = x.foreignChildRefusal(ctx, c.StartChildWorkflow); err != nil {
					return nil, nil, err
				}
			} else {
				r = x.childRefusal(ctx, c.StartChildWorkflow, starting[id])
			}
			if r != "" {
				refused[i] = r
			} else {
				starting[id] = true
			}
		case c.Type == api.CommandSignalExternalWorkflow && c.SignalExternalWorkflow != nil && x.foreign[c.SignalExternalWorkflow.WorkflowID]:
			ok, err := x.foreignSignalDelivered(ctx, c.SignalExternalWorkflow)
			if err != nil {
				return nil, nil, err
			}
			delivered[i] = ok || starting[c.SignalExternalWorkflow.WorkflowID]
		case c.Type == api.CommandSignalExternalWorkflow && c.SignalExternalWorkflow != nil:
			s := c.SignalExternalWorkflow
			open := x.e.openRun(s.WorkflowID)
			// A target that cannot take the signal (its history or signal
			// count is at its limit) does not get it: recorded as not
			// delivered rather than failing this run's task.
			delivered[i] = (open != nil && (s.RunID == "" || s.RunID == open.ref.RunID) && x.e.m.CanSignal(open.state) == nil) ||
				starting[s.WorkflowID]
		}
	}
	return refused, delivered, nil
}

func (x *txn) childRefusal(ctx context.Context, c *api.StartChildWorkflowCommand, startingHere bool) string {
	if startingHere || x.e.openRun(c.WorkflowID) != nil {
		return fmt.Sprintf("workflow %q already has an open run", c.WorkflowID)
	}
	prev, _, err := x.e.loadState(ctx, c.WorkflowID, "")
	if err != nil {
		if errors.Is(err, api.ErrNotFound) {
			return ""
		}
		return err.Error()
	}
	if err := reuseAllowed(c.ReusePolicy, prev); err != nil {
		return err.Error()
	}
	return ""
}

// FailWorkflowTask implements api.Service.
func (e *Engine) FailWorkflowTask(ctx context.Context, req *api.FailWorkflowTaskRequest) (*api.FailWorkflowTaskResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	var tok wftToken
	if err := decodeToken(req.TaskToken, &tok); err != nil {
		return nil, err
	}
	if req.Cause == api.CauseNotStarted {
		return &api.FailWorkflowTaskResponse{}, e.handBackUnstarted(tok)
	}
	err := e.transact(ctx, []string{tok.W}, func(x *txn) error {
		entry, err := e.currentWFT(tok)
		if err != nil {
			return err
		}
		tr := x.edit(entry)
		out, err := e.m.FailWFT(tr.st, req.Cause, req.Failure, req.Identity, x.now)
		if err != nil {
			return err
		}
		return x.apply(ctx, tr, out)
	})
	if err != nil {
		return nil, err
	}
	return &api.FailWorkflowTaskResponse{}, nil
}

// PollActivityTask implements api.Service.
func (e *Engine) PollActivityTask(ctx context.Context, req *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := e.m.CheckID("task queue", req.TaskQueue, true); err != nil {
		return nil, err
	}
	defer e.pollers.begin(req.TaskQueue, req.Identity, true, e.now)()
	e.declare(ctx, req.TaskQueue, req.Activities)
	ctx, cancel := context.WithTimeout(ctx, e.opts.PollTimeout)
	defer cancel()
	for {
		item, ok := e.actQ.PollTagged(ctx, req.TaskQueue, req.Identity)
		if !ok {
			return &api.PollActivityTaskResponse{}, nil
		}
		task, err := e.dispatchActivity(ctx, item, req.Identity, req.Activities)
		switch {
		case task == nil && item.task == nil && err != nil:
			e.limits.release(item) // not dispatched: its slot, if it took one, is free again
		case task == nil && item.task == nil:
			// A stale item: the slot it reserved is freed unless the attempt
			// it names runs under it (a twin item dispatched it).
			e.syncSlots(item.ref)
		case item.task == nil:
			e.limits.bind(item, task.LeaseEpoch)
		}
		if errors.Is(err, api.ErrDataCorrupt) || errors.Is(err, api.ErrNotOwner) {
			continue // that run is quarantined now, or its shard moved: the poller waits for another task
		}
		if err != nil {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, api.ErrUnavailable) {
				// The intent was not recorded: the attempt goes back on its queue.
				e.requeueActivity(item)
			}
			return nil, err
		}
		if task != nil && ctx.Err() != nil && (task.Effect == history.Read && !task.Reconcile || task.KeyTask) {
			// The poller left while a Read attempt (or a key task) was being
			// handed to it: nothing was recorded, so it goes straight back on its
			// queue. (An attempt whose intent was recorded is left to its
			// lease, which decides by its effect class.)
			e.handBackActivity(item, task.LeaseEpoch)
			return &api.PollActivityTaskResponse{}, nil
		}
		if task != nil {
			e.stats.actDispatched.Add(1)
			return &api.PollActivityTaskResponse{Task: task}, nil
		}
	}
}

// handBackActivity returns a Read attempt nobody received to its queue.
func (e *Engine) handBackActivity(item actItem, epoch int64) {
	unlock := e.lock(item.ref.WorkflowID)
	defer unlock()
	entry := e.openRun(item.ref.WorkflowID)
	if entry == nil || entry.ref != item.ref {
		return
	}
	if a, ok := entry.state.Activities[item.schedID]; ok && a.State == api.ActivityStateStarted && a.LeaseEpoch == epoch {
		a.State, a.LeaseEpoch, a.LeaseDeadline = api.ActivityStateScheduled, 0, time.Time{}
		e.limits.sync(entry.ref, entry.state) // its slot is free until it is dispatched again
		it := newActItem(item.ref, item.schedID, a)
		it.recon = false
		e.actQ.Push(a.Options.TaskQueue, it)
	}
}

func (e *Engine) requeueActivity(item actItem) {
	unlock := e.lock(item.ref.WorkflowID)
	defer unlock()
	if entry := e.openRun(item.ref.WorkflowID); entry != nil && entry.ref == item.ref {
		if a, ok := entry.state.Activities[item.schedID]; ok && a.State == api.ActivityStateScheduled && a.Attempt == item.attempt {
			e.actQ.Push(a.Options.TaskQueue, item)
		}
	}
}

// dispatchActivity leases an attempt to the polling worker. For Idempotent
// and SideEffect activities the intent (ActivityStarted and the ledger entry)
// is committed durably before the task is returned.
func (e *Engine) dispatchActivity(ctx context.Context, item actItem, identity string, decls []api.ActivityDeclaration) (*api.ActivityTask, error) {
	if item.task != nil {
		return item.task, nil
	}
	var task *api.ActivityTask
	err := e.transact(ctx, []string{item.ref.WorkflowID}, func(x *txn) error {
		entry := e.openRun(item.ref.WorkflowID)
		if entry == nil || entry.ref != item.ref {
			return nil
		}
		a, ok := entry.state.Activities[item.schedID]
		if !ok || a.State != api.ActivityStateScheduled || a.Attempt != item.attempt {
			return nil
		}
		epoch := e.nextEpoch()
		st := entry.state.Clone()
		out, err := e.m.DispatchDeclared(st, item.schedID, epoch, identity, pollerDeclaration(decls, a.ActivityType), x.now)
		if err != nil {
			return err
		}
		if task, err = e.activityTask(ctx, st, st.Activities[item.schedID], false); err != nil {
			return damaged(item.ref, true, err)
		}
		if len(out.Events) == 0 {
			// A Read attempt: the lease lives in memory; a restart simply
			// dispatches the attempt again.
			tr := &txnRun{st: st, entry: entry, outs: []machine.Output{out}}
			e.installRun(tr)
			return nil
		}
		tr := x.run(entry, entry.state, st)
		return x.apply(ctx, tr, out)
	})
	if err != nil {
		return nil, err
	}
	return task, nil
}

// activityTask is the task of a's current attempt; handedOff marks its
// token (see actToken.H).
func (e *Engine) activityTask(ctx context.Context, st *machine.RunState, a *machine.ActivityInfo, handedOff bool) (*api.ActivityTask, error) {
	input := a.Input
	if input == nil {
		sched, err := e.scheduledEvent(ctx, st, a.ScheduledEventID)
		if err != nil {
			return nil, err
		}
		input = &sched.Input
	}
	return &api.ActivityTask{
		TaskToken: encodeToken(&actToken{W: st.WorkflowID, R: st.RunID, S: a.ScheduledEventID, E: a.LeaseEpoch, A: a.Attempt, H: handedOff,
			L: a.Reconciling}),
		WorkflowID: st.WorkflowID, RunID: st.RunID, WorkflowType: st.WorkflowType, ActivityID: a.ActivityID,
		ActivityType: a.ActivityType, ScheduledEventID: a.ScheduledEventID, Input: clonePayload(*input), Attempt: a.Attempt,
		LeaseEpoch: a.LeaseEpoch, Effect: a.Effect, IdempotencyKey: a.IdempotencyKey, Reconcile: a.Reconciling,
		ScheduledTime: a.ScheduledTime, StartedTime: a.StartedTime, Deadline: a.LeaseDeadline,
		StartToCloseTimeout: a.Options.StartToCloseTimeout, HeartbeatTimeout: a.Options.HeartbeatTimeout,
		HeartbeatDetails: a.HeartbeatDetails, MaxResultBytes: e.m.Limits.MaxPayloadBytes, HardDeadline: a.HardDeadline(),
		Metered: a.Metered,
		KeyTask: a.KeyPending,
	}, nil
}

// clonePayload copies p's data, so that what one caller is handed is never
// shared with the engine's memory or another caller.
func clonePayload(p history.Payload) history.Payload {
	return history.Payload{Encoding: p.Encoding, Data: bytes.Clone(p.Data), Ref: bytes.Clone(p.Ref)}
}

// RecordActivityHeartbeat implements api.Service. Heartbeats extend the
// lease in memory and are not written to history.
func (e *Engine) RecordActivityHeartbeat(ctx context.Context, req *api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	tok, err := e.activityToken(req.TaskToken, req.WorkflowID, req.RunID, req.ActivityID)
	if err != nil {
		return nil, err
	}
	unlock := e.lock(tok.W)
	defer unlock()
	// An engine that does not serve the run's shard (any more) knows
	// nothing of the attempt: it says so (the router asks the owner)
	// rather than call the attempt stale, or extend a lease its memory
	// still holds after the shard moved on.
	if err := e.shards.check(tok.W); err != nil {
		return nil, err
	}
	if c := e.corrupt.lookup(tok.W, tok.R); c != nil {
		return nil, c.err()
	}
	entry := e.openRun(tok.W)
	if entry == nil || entry.ref.RunID != tok.R {
		return nil, api.Errorf(api.ErrStaleAttempt, "workflow %q run %q is not open", tok.W, tok.R)
	}
	deadline, cancel, err := e.m.Heartbeat(entry.state, tok.S, tok.E, req.Details, e.now())
	if err != nil {
		return nil, err
	}
	return &api.HeartbeatResponse{CancelRequested: cancel, Deadline: deadline}, nil
}

// CompleteActivity implements api.Service.
func (e *Engine) CompleteActivity(ctx context.Context, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	tok, err := e.activityToken(req.TaskToken, req.WorkflowID, req.RunID, req.ActivityID)
	if err != nil {
		return nil, err
	}
	err = e.report(ctx, tok, machine.AttemptReport{Kind: machine.ReportCompleted, Result: req.Result, ResultOmitted: req.ResultOmitted,
		Identity: req.Identity, Usage: req.Usage, HeartbeatDetails: req.HeartbeatDetails, KeyMaterial: req.KeyMaterial})
	if err != nil {
		return nil, err
	}
	e.stats.actCompleted.Add(1)
	return &api.CompleteActivityResponse{}, nil
}

// errRunNotOpen marks an activity report for a run that has closed.
var errRunNotOpen = errors.New("engine: run not open")

// readEvents reads the events [first, first+n) of a run that its state
// says exist. The store knows a history only by its events; the run state,
// committed with them, says where it must end, so a history that comes back
// short (a lost event) is reported as corrupt here instead of reaching a
// worker as a shorter history. base is the run's BaseRef (nil for most
// runs): a reset's or a fork's events before base.AtEventID are its
// base's, read where they are stored (readLinked).
func (e *Engine) readEvents(ctx context.Context, ref history.RunRef, base *machine.BaseRef, first int64, n int) ([]history.Event, error) {
	if base != nil {
		return readLinked(ctx, e.store, ref, base, first, n)
	}
	return readStored(ctx, e.store, ref, first, n, 0)
}

// readRun is readEvents for the run st.
func (e *Engine) readRun(ctx context.Context, st *machine.RunState, first int64, n int) ([]history.Event, error) {
	return e.readEvents(ctx, st.Ref(), st.Base, first, n)
}

// readStored reads the stored events [first, first+n) of a run, numbered
// offset less than their ids in the run's history, and returns them under
// those ids.
func readStored(ctx context.Context, store history.Store, ref history.RunRef, first int64, n int, offset int64) ([]history.Event, error) {
	if n <= 0 {
		return nil, nil
	}
	evs, err := store.ReadEvents(ctx, ref, first-offset, n)
	if err != nil {
		return nil, storeErr(err)
	}
	for i := range evs {
		if evs[i].ID != first-offset+int64(i) {
			return nil, lostEvent(ref, first-offset+int64(i))
		}
		evs[i].ID += offset
	}
	if len(evs) != n {
		return nil, lostEvent(ref, first-offset+int64(len(evs)))
	}
	return evs, nil
}

// readLinked reads the events [first, first+n) of a reset's or a fork's
// run: those before base.AtEventID from the runs its history refers to
// (base.Sources), the others from its own stored events, which are
// numbered from 1 at base.AtEventID.
func readLinked(ctx context.Context, store history.Store, ref history.RunRef, base *machine.BaseRef, first int64, n int) ([]history.Event, error) {
	out := make([]history.Event, 0, n)
	end := first + int64(n)
	for _, src := range base.Sources {
		lo, hi := max(first, src.From), min(end, src.To)
		if lo >= hi {
			continue
		}
		evs, err := readStored(ctx, store, src.Ref(), lo, int(hi-lo), src.From-src.Stored)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	if lo := max(first, base.AtEventID); lo < end {
		evs, err := readStored(ctx, store, ref, lo, int(end-lo), base.AtEventID-1)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

func lostEvent(ref history.RunRef, id int64) error {
	return fmt.Errorf("%w: %w", api.ErrInternal, &history.CorruptError{Run: ref, EventID: id,
		Reason: "the run's state records this event but the history does not hold it"})
}

// scheduledEvent reads an activity's ActivityScheduled event.
func (e *Engine) scheduledEvent(ctx context.Context, st *machine.RunState, schedID int64) (*history.ActivityScheduled, error) {
	ref := st.Ref()
	evs, err := e.readRun(ctx, st, schedID, 1)
	if err != nil {
		return nil, err
	}
	s, ok := evs[0].Attrs.(*history.ActivityScheduled)
	if !ok {
		return nil, fmt.Errorf("%w: event %d of %q is %s, not ActivityScheduled", api.ErrInternal, schedID, ref.WorkflowID, evs[0].Type())
	}
	return s, nil
}

// report applies an attempt's report (engine/machine, report.go) in one
// transaction: the current attempt's outcome, or a late report judged
// against the attempt records — from the run's state while the activity is
// pending, from the action's effects-ledger entry once it has closed, and
// after the run has closed through closedRunReport.
func (e *Engine) report(ctx context.Context, tok actToken, r machine.AttemptReport) error {
	r.ScheduledEventID, r.Epoch, r.Attempt, r.Lookup = tok.S, tok.E, tok.A, tok.L
	var ack machine.ReportAck
	err := e.transact(ctx, []string{tok.W}, func(x *txn) error {
		if c := e.corrupt.lookup(tok.W, tok.R); c != nil {
			return c.err()
		}
		entry := e.openRun(tok.W)
		if entry == nil || entry.ref.RunID != tok.R {
			return fmt.Errorf("%w: %w", errRunNotOpen, api.Errorf(api.ErrStaleAttempt, "workflow %q run %q is not open", tok.W, tok.R))
		}
		tr := x.edit(entry)
		a, pending := tr.st.Activities[tok.S]
		if tok.H && (!pending || a.LeaseEpoch != tok.E) {
			// A Read attempt handed over before its schedule was durable:
			// S may name another activity now. Only its own lease counts.
			return r.StaleError(tr.st)
		}
		var (
			key string
			le  *machine.LedgerEntry
		)
		if !pending {
			sched, err := e.tokenActivity(ctx, tr.st, tok)
			if err != nil {
				return err
			}
			if key = sched.IdempotencyKey; key != "" {
				if le, err = e.ledgerEntry(ctx, tok.W, key); err != nil {
					return damaged(tr.st.Ref(), true, err)
				}
			}
		}
		if pending && a.ShareResult {
			r.Result = sharedResult(r.Result)
		}
		out, a2, err := e.m.Report(tr.st, r, key, le, x.now)
		if err != nil {
			return err
		}
		ack = a2
		return x.apply(ctx, tr, out)
	})
	if errors.Is(err, errRunNotOpen) && !tok.H {
		ack, err = e.closedRunReport(ctx, tok, r)
	}
	if err == nil && ack == machine.AckStale {
		err = api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: lease %d (attempt %d) is not current; its report was recorded",
			tok.S, tok.W, tok.E, tok.A)
	}
	return err
}

// tokenActivity returns the ActivityScheduled event an activity token
// names, refusing a token that names no activity of the run as an invalid
// argument (a client's mistake, not damage to the store).
func (e *Engine) tokenActivity(ctx context.Context, st *machine.RunState, tok actToken) (*history.ActivityScheduled, error) {
	if tok.S < 1 || tok.S >= st.NextEventID {
		return nil, api.Errorf(api.ErrInvalidArgument, "task token names event %d of workflow %q run %q, which has %d events",
			tok.S, tok.W, tok.R, st.NextEventID-1)
	}
	evs, err := e.readRun(ctx, st, tok.S, 1)
	if err != nil {
		return nil, damaged(st.Ref(), st.Status.Open(), err)
	}
	s, ok := evs[0].Attrs.(*history.ActivityScheduled)
	if !ok {
		return nil, api.Errorf(api.ErrInvalidArgument, "task token names event %d of workflow %q run %q, which is %s, not an activity",
			tok.S, tok.W, tok.R, evs[0].Type())
	}
	return s, nil
}

// FailActivity implements api.Service.
func (e *Engine) FailActivity(ctx context.Context, req *api.FailActivityRequest) (*api.FailActivityResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	tok, err := e.activityToken(req.TaskToken, req.WorkflowID, req.RunID, req.ActivityID)
	if err != nil {
		return nil, err
	}
	if err := e.m.CheckPayload("failure details", req.Failure.Details); err != nil {
		// Refusing the report would leave the attempt to its lease: record
		// the failure without its details.
		req.Failure.Details = history.Payload{}
		req.Failure.Message += fmt.Sprintf(" (failure details dropped: over the limit of %d bytes)", e.m.Limits.MaxPayloadBytes)
	}
	kind := machine.ReportFailed
	switch {
	case req.NotStarted:
		kind = machine.ReportNotStarted
	case req.Canceled:
		kind = machine.ReportCanceled
	case req.NotHappened:
		kind = machine.ReportNotHappened
	case req.OutcomeUnknown:
		kind = machine.ReportUnknown
	}
	if err := e.report(ctx, tok, machine.AttemptReport{Kind: kind, Failure: req.Failure, Identity: req.Identity, Usage: req.Usage,
		RetryAfter: req.RetryAfter, HeartbeatDetails: req.HeartbeatDetails}); err != nil {
		return nil, err
	}
	return &api.FailActivityResponse{}, nil
}
