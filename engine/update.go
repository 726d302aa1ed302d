package engine

import (
	"context"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// maxUpdateValidations bounds how many times UpdateWorkflow has an update
// validated when the run keeps changing between the validation and the
// acceptance (see acceptUpdate).
const maxUpdateValidations = 5

// UpdateWorkflow implements api.Service. An update is validated by a
// worker — a query task (api.WorkflowQuery.Update) answered against the
// run's current state, which writes nothing — then accepted in one
// transaction (history.WorkflowUpdateAccepted, a workflow task), provided
// the run has not changed since the state the worker validated; its
// handler's completion arrives as a workflow task command
// (history.WorkflowUpdateCompleted), which the call waits for like
// GetResult.
func (e *Engine) UpdateWorkflow(ctx context.Context, req *api.UpdateWorkflowRequest) (*api.UpdateWorkflowResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	r := *req
	if r.UpdateID == "" {
		r.UpdateID = randomID()
	}
	if err := firstErr(e.m.CheckID("workflow id", r.WorkflowID, r.Start == nil), e.m.CheckID("update name", r.Name, true),
		e.m.CheckID("update id", r.UpdateID, true), e.m.CheckPayload("update", r.Input)); err != nil {
		return nil, err
	}
	if r.WaitStage > api.UpdateStageAccepted {
		return nil, api.Errorf(api.ErrInvalidArgument, "unknown update wait stage %d", r.WaitStage)
	}
	started := false
	if r.Start != nil {
		resp, err := e.startForUpdate(ctx, &r)
		if err != nil {
			return nil, err
		}
		r.RunID, started = resp.RunID, resp.Started
	}
	ref, err := e.acceptUpdate(ctx, &r)
	if err != nil {
		return nil, err
	}
	resp, err := e.awaitUpdate(ctx, ref, r.UpdateID, r.WaitStage)
	if err != nil {
		return nil, err
	}
	resp.Started = started
	return resp, nil
}

// startForUpdate starts the run of an update-with-start, or finds the
// open one: its run id is the run the update goes to.
func (e *Engine) startForUpdate(ctx context.Context, r *api.UpdateWorkflowRequest) (*api.StartWorkflowResponse, error) {
	start := *r.Start
	if start.WorkflowID == "" {
		start.WorkflowID = r.WorkflowID
	}
	if r.WorkflowID == "" {
		r.WorkflowID = start.WorkflowID
	}
	if start.WorkflowID != r.WorkflowID {
		return nil, api.Errorf(api.ErrInvalidArgument, "update-with-start names workflow %q and starts %q", r.WorkflowID, start.WorkflowID)
	}
	if r.RunID != "" {
		return nil, api.Errorf(api.ErrInvalidArgument, "update-with-start updates the open (or started) run: leave the run id empty")
	}
	start.ConflictPolicy = api.ConflictUseExisting
	if err := e.m.ValidateStart(&start); err != nil {
		return nil, err
	}
	var resp *api.StartWorkflowResponse
	err := e.transact(ctx, []string{start.WorkflowID}, func(x *txn) error {
		var err error
		resp, err = x.start(ctx, &start)
		return err
	})
	return resp, err
}

// acceptUpdate has the update validated and records it, unless the run
// accepted it already (the same update id). It returns the run.
//
// The worker validates against the run as it was when the validation
// task was dispatched (pendingQuery.at). The acceptance is recorded only
// if the run has not changed since, so that an accepted update was
// accepted by the state it follows in history; otherwise it is validated
// again, at most maxUpdateValidations times (then ErrUnavailable: the
// caller sends it again, with the same id).
func (e *Engine) acceptUpdate(ctx context.Context, r *api.UpdateWorkflowRequest) (history.RunRef, error) {
	for range maxUpdateValidations {
		st, _, err := e.snapshot(ctx, r.WorkflowID, r.RunID)
		if err != nil {
			return history.RunRef{}, err
		}
		if st.Update(r.UpdateID) != nil {
			return st.Ref(), nil // accepted already: the caller gets its outcome
		}
		if err := e.m.CanAcceptUpdate(st); err != nil {
			return history.RunRef{}, err
		}
		answer, at, err := e.askWorker(ctx, st, api.WorkflowQuery{QueryType: r.Name, Args: r.Input, Update: true})
		if err != nil {
			return history.RunRef{}, err
		}
		if answer.Failure != nil {
			if answer.Rejected {
				return history.RunRef{}, api.Errorf(api.ErrUpdateRejected, "update %q (%s) of workflow %q: %s", r.UpdateID, r.Name, st.WorkflowID, answer.Failure.Message)
			}
			return history.RunRef{}, api.Errorf(api.ErrQueryFailed, "the update %q (%s) could not be validated: %s", r.UpdateID, r.Name, answer.Failure.Error())
		}
		stale := false
		err = e.onOpenRun(ctx, st.WorkflowID, st.RunID, false, func(x *txn, tr *txnRun) (machine.Output, error) {
			if tr.st.Update(r.UpdateID) != nil {
				return machine.Output{}, nil // accepted meanwhile by a call with the same id
			}
			if tr.st.NextEventID != at {
				stale = true
				return machine.Output{}, nil
			}
			return e.m.AcceptUpdate(tr.st, r.UpdateID, r.Name, r.Input, r.Identity, x.now)
		})
		if err != nil {
			return history.RunRef{}, err
		}
		if !stale {
			return st.Ref(), nil
		}
	}
	return history.RunRef{}, api.Errorf(api.ErrUnavailable, "workflow %q changed during each of %d validations of update %q; send it again",
		r.WorkflowID, maxUpdateValidations, r.UpdateID)
}

// awaitUpdate waits, at most the poll timeout, for the accepted update id
// of run ref to reach stage, and returns how far it got.
func (e *Engine) awaitUpdate(ctx context.Context, ref history.RunRef, id string, stage api.UpdateStage) (*api.UpdateWorkflowResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.PollTimeout)
	defer cancel()
	for {
		st, changed, err := e.snapshot(ctx, ref.WorkflowID, ref.RunID)
		if err != nil {
			return nil, err
		}
		u := st.Update(id)
		if u == nil {
			return nil, api.Errorf(api.ErrNotFound, "workflow %q run %q has no update %q", ref.WorkflowID, ref.RunID, id)
		}
		resp := &api.UpdateWorkflowResponse{RunID: st.RunID, UpdateID: id, Stage: api.UpdateStageAccepted, AcceptedEventID: u.AcceptedEventID}
		if u.CompletedEventID != 0 {
			return e.updateOutcome(ctx, st, u, resp)
		}
		if stage == api.UpdateStageAccepted {
			return resp, nil
		}
		if !st.Status.Open() {
			return nil, api.Errorf(api.ErrWorkflowClosed, "workflow %q run %q closed (%s) before its update %q completed",
				ref.WorkflowID, ref.RunID, st.Status, id)
		}
		if !waitChange(ctx, changed, e.stop) {
			return resp, nil // not completed yet: the caller asks again
		}
	}
}

// updateOutcome fills resp with the completion of update u.
func (e *Engine) updateOutcome(ctx context.Context, st *machine.RunState, u *machine.UpdateRecord, resp *api.UpdateWorkflowResponse) (*api.UpdateWorkflowResponse, error) {
	ref := st.Ref()
	evs, err := e.readRun(ctx, st, u.CompletedEventID, 1) // a branched run's may be its base's
	if err != nil {
		return nil, e.settle(err)
	}
	var done *history.WorkflowUpdateCompleted
	if len(evs) == 1 {
		done, _ = evs[0].Attrs.(*history.WorkflowUpdateCompleted)
	}
	if done == nil || done.UpdateID != u.ID {
		return nil, fmt.Errorf("%w: event %d of workflow %q run %q is not the completion of update %q", api.ErrInternal,
			u.CompletedEventID, ref.WorkflowID, ref.RunID, u.ID)
	}
	result, err := e.resolve(ctx, done.Result)
	if err != nil {
		return nil, err
	}
	resp.Stage, resp.Result, resp.Failure = api.UpdateStageCompleted, result, done.Failure
	return resp, nil
}

// askWorker has a worker answer q against run st's current state (a query
// task) and returns its answer and the run's NextEventID at the state it
// answered from.
func (e *Engine) askWorker(ctx context.Context, st *machine.RunState, q api.WorkflowQuery) (*api.RespondQueryTaskRequest, int64, error) {
	// The query's id is its task token: it names the workflow id, so that a
	// router sends the answer to the server the query waits on.
	id := string(encodeToken(queryToken{W: st.WorkflowID, Q: randomID()}))
	p := &pendingQuery{id: id, query: q, done: make(chan *api.RespondQueryTaskRequest, 1)}
	p.query.QueryID = id
	e.queriesMu.Lock()
	e.queries[id] = p
	e.queriesMu.Unlock()
	defer func() {
		e.queriesMu.Lock()
		delete(e.queries, id)
		e.queriesMu.Unlock()
	}()
	e.wftQ.Push(st.TaskQueue, wftItem{ref: st.Ref(), query: p})
	ctx, cancel := context.WithTimeout(ctx, e.opts.PollTimeout)
	defer cancel()
	select {
	case r := <-p.done:
		return r, p.at.Load(), nil
	case <-ctx.Done():
		what := "query"
		if q.Update {
			what = "update's validation"
		}
		return nil, 0, fmt.Errorf("%w: no worker answered the %s: %w", api.ErrUnavailable, what, ctx.Err())
	case <-e.stop:
		return nil, 0, ErrClosed
	}
}
