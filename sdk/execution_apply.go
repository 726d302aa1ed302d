package sdk

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// applyInbox delivers the buffered events with ids up to upTo.
func (e *Execution) applyInbox(upTo int64) {
	n := 0
	for n < len(e.inbox) && e.inbox[n].ID <= upTo && e.fatal == nil {
		e.apply(&e.inbox[n])
		n++
	}
	if e.opts.OnDecision != nil {
		e.delivered = append(e.delivered[:0], e.inbox[:n]...)
	}
	rest := copy(e.inbox, e.inbox[n:])
	clear(e.inbox[rest:])
	e.inbox = e.inbox[:rest]
}

// apply delivers one event to the workflow state.
func (e *Execution) apply(ev *history.Event) {
	switch a := ev.Attrs.(type) {
	case *history.WorkflowStarted:
		e.start(ev, a)
	case *history.ActivityCompleted:
		if act := e.activityFor(ev, a.ScheduledEventID); act != nil {
			act.complete(a.Result, a.ResultOmitted)
		}
	case *history.ActivityDeduplicated:
		if act := e.activityFor(ev, a.ScheduledEventID); act != nil {
			act.complete(a.Result, a.ResultOmitted)
		}
	case *history.ActivityFailed:
		if act := e.activityFor(ev, a.ScheduledEventID); act != nil {
			act.fail(retryStateOf(a.Failure, a.Attempt, act.retry), FailureToError(a.Failure))
		}
	case *history.ActivityTimedOut:
		if act := e.activityFor(ev, a.ScheduledEventID); act != nil {
			var last error
			if a.LastFailure.Type != "" || a.LastFailure.Message != "" {
				last = FailureToError(a.LastFailure)
			}
			act.fail(RetryStateTimeout, &TimeoutError{TimeoutType: a.Timeout, Cause: last})
		}
	case *history.ActivityCanceled:
		if act := e.activityFor(ev, a.ScheduledEventID); act != nil {
			act.fail(RetryStateCancelRequested, &CanceledError{Message: "activity canceled", Details: a.Details})
		}
	case *history.ActivityResolved:
		switch a.Resolution {
		case history.ResolvedHappened:
			if act := e.activityFor(ev, a.ScheduledEventID); act != nil {
				act.complete(a.Result, a.ResultOmitted)
			}
		case history.ResolvedFailed:
			if act := e.activityFor(ev, a.ScheduledEventID); act != nil {
				f := history.Failure{Type: "ResolvedFailed", Message: "resolved as failed by " + a.By + ": " + a.Reason, NonRetryable: true}
				if a.Failure != nil {
					f = *a.Failure
				}
				act.fail(RetryStateResolved, FailureToError(f))
			}
		}
	case *history.TimerFired:
		t, ok := e.timers[a.TimerID]
		if !ok {
			e.setFatal(&NondeterminismError{EventID: ev.ID, Recorded: describeEvent(ev), Produced: "no timer with that id"})
			return
		}
		if t != nil {
			e.timers[a.TimerID] = nil
			t.fut.setValue(nil, nil)
		}
	case *history.SignalReceived:
		ch := e.signalChannel(a.Name)
		ch.buf = append(ch.buf, a.Input)
	case *history.WorkflowUpdateAccepted:
		e.startUpdate(a)
	case *history.WorkflowCancelRequested:
		e.cancelRequested = true
		e.rootScope.cancel()
	case *history.ChildWorkflowCompleted:
		if ch := e.childFor(ev, a.InitiatedEventID); ch != nil {
			ch.fut.resolve(a.Result, nil)
		}
	case *history.ChildWorkflowFailed:
		if ch := e.childFor(ev, a.InitiatedEventID); ch != nil {
			ch.runID = a.RunID
			ch.fail(FailureToError(a.Failure))
		}
	case *history.WorkflowTerminated, *history.WorkflowTimedOut:
		e.workflowClosed = true
	}
}

// activityFor returns the pending activity scheduled at id; nil when it has
// already resolved (the event is ignored) or is unknown (a fatal error).
func (e *Execution) activityFor(ev *history.Event, id int64) *activityState {
	act, ok := e.activities[id]
	if !ok {
		e.setFatal(&NondeterminismError{EventID: ev.ID, Recorded: describeEvent(ev), Produced: fmt.Sprintf("no activity scheduled at event %d", id)})
		return nil
	}
	if act == nil || act.fut.ready {
		return nil
	}
	e.activities[id] = nil
	return act
}

func (e *Execution) childFor(ev *history.Event, id int64) *childState {
	ch, ok := e.children[id]
	if !ok {
		e.setFatal(&NondeterminismError{EventID: ev.ID, Recorded: describeEvent(ev), Produced: fmt.Sprintf("no child workflow started at event %d", id)})
		return nil
	}
	if ch == nil || ch.fut.ready {
		return nil
	}
	e.children[id] = nil
	return ch
}

func (e *Execution) signalChannel(name string) *signalChannel {
	ch := e.signals[name]
	if ch == nil {
		ch = &signalChannel{name: name}
		e.signals[name] = ch
	}
	return ch
}

// start records the run's attributes and creates the root coroutine.
func (e *Execution) start(ev *history.Event, a *history.WorkflowStarted) {
	i := &e.info
	if a.WorkflowType != "" {
		i.WorkflowType = a.WorkflowType
	}
	if a.TaskQueue != "" && i.TaskQueue == "" {
		// The task's queue is the run's: a fork's (on a new build's queue)
		// differs from the WorkflowStarted it took from its base.
		i.TaskQueue = a.TaskQueue
	}
	i.StartTime = ev.Time
	i.ExecutionTimeout, i.RunTimeout, i.TaskTimeout = a.ExecutionTimeout, a.RunTimeout, a.TaskTimeout
	i.FirstRunID, i.ContinuedFromRunID = a.FirstRunID, a.ContinuedFromRunID
	i.ParentWorkflowID, i.ParentRunID = a.ParentWorkflowID, a.ParentRunID
	ctx := &wfContext{e: e, scope: e.rootScope}
	input := a.Input
	e.spawn("root", func() { e.runRoot(ctx, input) })
}

func (e *Execution) runRoot(ctx *wfContext, input history.Payload) {
	args := []reflect.Value{reflect.ValueOf(ctx)}
	if e.def.inType != nil {
		in := reflect.New(e.def.inType)
		if err := e.conv.FromPayload(input, in.Interface()); err != nil {
			e.rootDone(nil, NewNonRetryableError(fmt.Sprintf("workflow %s: %v", e.def.name, err), "InvalidInput"))
			return
		}
		args = append(args, in.Elem())
	}
	out := e.def.fn.Call(args)
	var result any
	if e.def.outType != nil {
		result = out[0].Interface()
	}
	err, _ := out[len(out)-1].Interface().(error)
	e.rootDone(result, err)
}

// rootDone turns the workflow function's return into the closing command.
func (e *Execution) rootDone(result any, err error) {
	if e.closing.Load() {
		return // unwinding, or an abandoned root that came unstuck: decide nothing
	}
	var cmd api.Command
	var can *ContinueAsNewError
	var canceled *CanceledError
	switch {
	case err == nil:
		p, encErr := e.conv.ToPayload(result)
		if encErr != nil {
			cmd = api.Command{Type: api.CommandFailWorkflow, FailWorkflow: &api.FailWorkflowCommand{Failure: ErrorToFailure(encErr)}}
			break
		}
		cmd = api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: p}}
	case errors.As(err, &can):
		cmd = api.Command{Type: api.CommandContinueAsNew, ContinueAsNew: &api.ContinueAsNewCommand{
			WorkflowType: can.WorkflowType, TaskQueue: can.TaskQueue, Input: can.Input, RunTimeout: can.RunTimeout, TaskTimeout: can.TaskTimeout}}
	case e.cancelRequested && errors.As(err, &canceled):
		cmd = api.Command{Type: api.CommandCancelWorkflow, CancelWorkflow: &api.CancelWorkflowCommand{Details: canceled.Details}}
	default:
		cmd = api.Command{Type: api.CommandFailWorkflow, FailWorkflow: &api.FailWorkflowCommand{Failure: ErrorToFailure(err)}}
	}
	e.addCommand(cmd, closeOwner{e})
	e.rootReturned = true
}
