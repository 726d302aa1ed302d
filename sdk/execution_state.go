package sdk

import (
	"slices"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

type eventTime struct {
	id int64
	t  time.Time
	// size is the history's size up to and including event id
	// (WorkflowInfo.HistorySize).
	size int64
}

// commandEntry is a command of the current (or last live) decision.
type commandEntry struct {
	cmd     api.Command
	dropped bool // canceled before it was sent: it produces no event
	sent    bool // returned to the engine by a live decision
	matched bool // its event is known
	owner   commandOwner
}

// commandOwner learns the event recorded for its command.
type commandOwner interface{ onCommandMatched(ev *history.Event) }

// droppable: the command can still be withdrawn (cancel before send).
func (c *commandEntry) droppable() bool { return !c.sent && !c.matched && !c.dropped }

// activityState is a scheduled activity. It lives in one allocation with
// its future, its command and the command's entry (see activityFuture).
type activityState struct {
	e               *Execution
	typ, id         string
	scheduledID     int64
	fut             *futureState
	entry           commandEntry
	cmd             api.ScheduleActivityCommand
	retry           *RetryPolicy
	scope           *cancelScope
	cancelKey       uint64
	cancelRequested bool
}

func (a *activityState) onCommandMatched(ev *history.Event) {
	a.scheduledID = ev.ID
	a.e.activities[ev.ID] = a
}

func (a *activityState) onScopeCanceled() { a.e.cancelActivity(a) }

func (a *activityState) onFutureReady() { a.scope.removeListener(a.cancelKey) }

type timerState struct {
	e         *Execution
	id        string
	fut       *futureState
	entry     commandEntry
	cmd       api.StartTimerCommand
	scope     *cancelScope
	cancelKey uint64
}

func (t *timerState) onCommandMatched(*history.Event) {}

func (t *timerState) onScopeCanceled() { t.e.cancelTimer(t) }

func (t *timerState) onFutureReady() { t.scope.removeListener(t.cancelKey) }

type childState struct {
	e           *Execution
	typ, id     string
	runID       string
	initiatedID int64
	fut         *futureState
	started     *futureState
	entry       commandEntry
	cmd         api.StartChildWorkflowCommand
	scope       *cancelScope
	cancelKey   uint64
	// cancelRequested: the context was canceled and the engine asked to
	// cancel the child (once).
	cancelRequested bool
}

func (ch *childState) onCommandMatched(ev *history.Event) {
	a := ev.Attrs.(*history.ChildWorkflowStarted)
	ch.initiatedID, ch.runID = ev.ID, a.RunID
	ch.e.children[ev.ID] = ch
	if a.RunID != "" {
		ch.started.setValue(WorkflowExecution{ID: a.WorkflowID, RunID: a.RunID}, nil)
	}
}

// onScopeCanceled withdraws a child that was not sent yet, or asks the
// engine to cancel the started child (→ ChildWorkflowCancelRequested).
// The future resolves with the child's outcome: a *ChildWorkflowError
// wrapping a *CanceledError when the child honours the request, its
// result when it completes anyway.
func (ch *childState) onScopeCanceled() {
	if ch.fut.ready || ch.cancelRequested {
		return
	}
	ch.cancelRequested = true
	if ch.entry.droppable() {
		ch.entry.dropped = true
		ch.fail(&CanceledError{Message: "child workflow canceled before it started"})
		return
	}
	ch.e.addCommand(api.Command{Type: api.CommandRequestCancelChildWorkflow, RequestCancelChildWorkflow: &api.RequestCancelChildWorkflowCommand{
		InitiatedEventID: ch.initiatedID, WorkflowID: ch.id, RunID: ch.runID}}, nil)
}

func (ch *childState) onFutureReady() { ch.scope.removeListener(ch.cancelKey) }

func (ch *childState) fail(cause error) {
	err := &ChildWorkflowError{WorkflowID: ch.id, RunID: ch.runID, WorkflowType: ch.typ, InitiatedEventID: ch.initiatedID, Cause: cause}
	ch.started.setValue(nil, err)
	ch.fut.setValue(nil, err)
}

// complete resolves the activity with its result — or, when the result was
// too large to record (omitted says why), fails it with a non-retryable
// ResultTooLarge error: the activity did complete (its effect happened),
// but there is no value to hand the workflow.
func (a *activityState) complete(result history.Payload, omitted string) {
	if omitted != "" {
		a.fail(RetryStateNonRetryableFailure, NewNonRetryableError("the activity completed but its result was not recorded: "+omitted,
			FailureTypeResultTooLarge))
		return
	}
	a.fut.resolve(result, nil)
}

func (a *activityState) fail(rs RetryState, cause error) {
	a.fut.setValue(nil, &ActivityError{ActivityType: a.typ, ActivityID: a.id, ScheduledEventID: a.scheduledID, RetryState: rs, Cause: cause})
}

func retryStateOf(f history.Failure, attempt int32, rp *RetryPolicy) RetryState {
	if f.NonRetryable || (rp != nil && slices.Contains(rp.NonRetryableErrorTypes, f.Type)) {
		return RetryStateNonRetryableFailure
	}
	if rp != nil && rp.MaximumAttempts > 0 && attempt >= rp.MaximumAttempts {
		return RetryStateMaximumAttemptsReached
	}
	return RetryStateUnspecified
}

// closeOwner marks the run closed when its closing command is recorded.
type closeOwner struct{ e *Execution }

func (o closeOwner) onCommandMatched(*history.Event) { o.e.workflowClosed = true }
