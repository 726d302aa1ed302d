package machine

import (
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// WFTCompletion is a workflow task's result together with what the service
// learned about the other runs the commands touch.
type WFTCompletion struct {
	Commands    []api.Command
	StickyQueue string
	Identity    string
	// ChildRefused[i] is set when command i starts a child whose workflow
	// id cannot take a new run; the reason goes into ChildWorkflowFailed.
	ChildRefused map[int]string
	// SignalDelivered[i] says whether command i's signal found an open run.
	SignalDelivered map[int]bool
	// Declarations[i] is the declaration of command i's activity by the
	// workers of its task queue, if the engine has one (engine/declarations.go);
	// for an approval-requested marker, that of the tool it asks about
	// (ApprovalTool).
	Declarations map[int]api.ActivityDeclaration
}

// WFTDispatched marks the scheduled workflow task as handed to a worker
// with the given epoch. It returns the task-timeout deadline.
func (m *Machine) WFTDispatched(st *RunState, epoch int64, now time.Time) Deadline {
	st.WFT.Started = true
	st.WFT.Epoch = epoch
	st.WFT.StartedAt = now
	st.WFT.DispatchNext = st.NextEventID
	return Deadline{At: now.Add(st.TaskTimeout), Kind: DeadlineWFTTimeout, Epoch: epoch}
}

// WFTEnqueued records that the task was put on a queue; sticky says it went
// to the worker's sticky queue. It returns the sticky fallback deadline, if
// any.
func (m *Machine) WFTEnqueued(st *RunState, seq int64, sticky bool, now time.Time) (Deadline, bool) {
	st.WFT.Seq = seq
	st.WFT.OnSticky = sticky
	if !sticky {
		return Deadline{}, false
	}
	return Deadline{At: now.Add(m.Defaults.StickyTimeout), Kind: DeadlineStickyFallback, Epoch: seq}, true
}

// CompleteWFT applies a workflow task's commands. The caller has checked
// the task token. It returns ErrUnhandledEvents when the commands close the
// run but events arrived meanwhile (nothing is written; the task is
// rescheduled by the caller).
func (m *Machine) CompleteWFT(st *RunState, c WFTCompletion, now time.Time) (Output, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, err
	}
	if err := m.validateCommands(st, c.Commands); err != nil {
		return Output{}, err
	}
	arrived := st.NextEventID > st.WFT.DispatchNext
	if arrived && closes(c.Commands) {
		return Output{}, ErrUnhandledEvents
	}
	t := m.begin(st, now)
	seen := st.WFT.DispatchNext - 1
	attempt := st.WFT.Attempt
	st.WFT = WFTState{StickyQueue: c.StickyQueue, SeenEventID: seen}
	wtc := t.add(&history.WorkflowTaskCompleted{SeenEventID: seen, Identity: c.Identity, Attempt: attempt})
	var after []func()
	for i := range c.Commands {
		if f := t.command(i, &c.Commands[i], wtc, &c); f != nil {
			after = append(after, f)
		}
	}
	for _, f := range after {
		f()
	}
	if t.err != nil {
		return Output{}, t.err
	}
	// The history limit is checked on the events actually produced. A
	// completion that closes the run is always accepted: it ends the
	// history, and refusing it would leave the run unable ever to finish.
	if !t.out.Closed {
		if err := m.checkGrowth(st, 0); err != nil {
			return Output{}, err
		}
	}
	if arrived {
		t.needWFT()
	}
	return t.out, nil
}

func closes(cmds []api.Command) bool {
	for _, c := range cmds {
		switch c.Type {
		case api.CommandCompleteWorkflow, api.CommandFailWorkflow, api.CommandCancelWorkflow, api.CommandContinueAsNew:
			return true
		}
	}
	return false
}

// RefuseWFT records that the engine refused a workflow task's completion
// because its commands break a limit or are malformed (refusal, an
// api.ErrLimitExceeded or api.ErrInvalidArgument): the task fails with that
// cause in history (FailWFT), and the run is terminated once such failures
// reach Limits.MaxWorkflowTaskRefusals in a row — at once for the history
// limit, which no retry can get past. Nothing of the refused commands is
// written.
func (m *Machine) RefuseWFT(st *RunState, refusal error, identity string, now time.Time) (Output, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, err
	}
	var full *historyFullError
	if errors.As(refusal, &full) {
		return m.terminateForLimit(st, "workflow task refused: "+refusal.Error(), now), nil
	}
	cause, typ := api.CauseLimitExceeded, "LimitExceeded"
	if errors.Is(refusal, api.ErrInvalidArgument) {
		cause, typ = api.CauseBadCommands, "BadCommands"
	}
	return m.FailWFT(st, cause, history.Failure{Type: typ, Message: "the engine refused the workflow task's commands: " + refusal.Error(),
		NonRetryable: true}, identity, now)
}

// IsRefusal reports whether err is the engine refusing a workflow task's
// commands (as opposed to the task being stale or the run closed).
func IsRefusal(err error) bool {
	return errors.Is(err, api.ErrLimitExceeded) || errors.Is(err, api.ErrInvalidArgument)
}

// terminateForLimit closes the run because a limit stops it for good.
func (m *Machine) terminateForLimit(st *RunState, reason string, now time.Time) Output {
	t := m.begin(st, now)
	t.add(&history.WorkflowTerminated{Reason: reason, Identity: "cairn-engine"})
	t.close(api.StatusTerminated, history.Payload{}, &history.Failure{Type: "LimitExceeded", Message: reason, NonRetryable: true})
	return t.out
}

// FailWFT records a failed workflow task (the first failure of a streak
// only) and schedules a retry, with backoff after the third attempt. A
// failure whose cause is a refusal (api.CauseLimitExceeded,
// api.CauseBadCommands) would happen again on every retry: the run is
// terminated at Limits.MaxWorkflowTaskRefusals of them in a row.
func (m *Machine) FailWFT(st *RunState, cause string, f history.Failure, identity string, now time.Time) (Output, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, err
	}
	w := &st.WFT
	if cause == api.CauseLimitExceeded || cause == api.CauseBadCommands {
		w.Refusals++
		if n := m.Limits.MaxWorkflowTaskRefusals; n > 0 && int(w.Refusals) >= n {
			return m.terminateForLimit(st, fmt.Sprintf("%d workflow tasks in a row failed (%s): %s", w.Refusals, cause, f.Message), now), nil
		}
	} else {
		w.Refusals = 0
	}
	t := m.begin(st, now)
	if w.Attempt <= 1 {
		if err := m.checkGrowth(st, 1); err == nil {
			t.add(&history.WorkflowTaskFailed{Cause: cause, Failure: f, Identity: identity, Attempt: w.Attempt})
		}
	}
	failure := f
	w.LastFailure = &failure
	w.Started, w.Scheduled, w.OnSticky = false, false, false
	w.StickyQueue, w.SeenEventID = "", 0
	w.Attempt++
	if w.Attempt > 3 {
		d := time.Second << min(w.Attempt-4, 20)
		w.BackoffUntil = now.Add(min(d, m.Defaults.WorkflowTaskMaxBackoff))
	}
	t.needWFT()
	return t.out, nil
}

func (m *Machine) validateCommands(st *RunState, cmds []api.Command) error {
	acts, timers, children := len(st.Activities), len(st.Timers), len(st.Children)
	running := map[string]bool{} // timer ids started (true) or canceled (false) by these commands
	var updated map[string]bool  // update ids these commands complete
	for i := range cmds {
		c := &cmds[i]
		if i < len(cmds)-1 && closes(cmds[i:i+1]) {
			return api.Errorf(api.ErrInvalidArgument, "command %d (%s) closes the run but is not the last command", i, c.Type)
		}
		if err := m.validateCommand(i, c); err != nil {
			return err
		}
		switch c.Type {
		case api.CommandScheduleActivity:
			acts++
			if acts > m.Limits.MaxPendingActivities {
				return api.Errorf(api.ErrLimitExceeded, "more than %d pending activities", m.Limits.MaxPendingActivities)
			}
		case api.CommandStartTimer:
			id := c.StartTimer.TimerID
			if on, seen := running[id]; on || (!seen && st.Timers[id] != nil) {
				return api.Errorf(api.ErrInvalidArgument, "command %d (%s): timer %q is already running", i, c.Type, id)
			}
			running[id] = true
			timers++
			if timers > m.Limits.MaxPendingTimers {
				return api.Errorf(api.ErrLimitExceeded, "more than %d pending timers", m.Limits.MaxPendingTimers)
			}
		case api.CommandCancelTimer:
			running[c.CancelTimer.TimerID] = false
		case api.CommandRequestCancelChildWorkflow:
			// The command names the child as its ChildWorkflowStarted did;
			// an open child must be that one (the service locks the id).
			r := c.RequestCancelChildWorkflow
			if ch := st.Children[r.InitiatedEventID]; ch != nil && (ch.WorkflowID != r.WorkflowID || (r.RunID != "" && ch.RunID != r.RunID)) {
				return api.Errorf(api.ErrInvalidArgument, "command %d (%s): the child started at event %d is %q run %q, not %q run %q",
					i, c.Type, r.InitiatedEventID, ch.WorkflowID, ch.RunID, r.WorkflowID, r.RunID)
			}
		case api.CommandCompleteUpdate:
			id := c.CompleteUpdate.UpdateID
			if u := st.Update(id); u == nil || u.CompletedEventID != 0 || updated[id] {
				return api.Errorf(api.ErrInvalidArgument, "command %d (%s): update %q is not accepted, or already completed", i, c.Type, id)
			}
			if updated == nil {
				updated = map[string]bool{}
			}
			updated[id] = true
		case api.CommandStartChildWorkflow:
			children++
			if children > m.Limits.MaxPendingChildren {
				return api.Errorf(api.ErrLimitExceeded, "more than %d pending child workflows", m.Limits.MaxPendingChildren)
			}
		}
	}
	return nil
}

func (m *Machine) validateCommand(i int, c *api.Command) error {
	bad := func(what string) error {
		return api.Errorf(api.ErrInvalidArgument, "command %d (%s): %s", i, c.Type, what)
	}
	switch c.Type {
	case api.CommandScheduleActivity:
		a := c.ScheduleActivity
		if a == nil {
			return bad("missing attributes")
		}
		if err := firstErr(m.CheckID("activity type", a.ActivityType, true), m.CheckID("activity id", a.ActivityID, true),
			m.CheckID("task queue", a.Options.TaskQueue, false), m.CheckPayload("activity input", a.Input)); err != nil {
			return err
		}
		if a.Effect > history.SideEffect {
			return bad("unknown effect class")
		}
		o := a.Options
		if o.StartToCloseTimeout < 0 || o.ScheduleToCloseTimeout < 0 || o.ScheduleToStartTimeout < 0 || o.HeartbeatTimeout < 0 {
			return bad("timeouts must not be negative")
		}
	case api.CommandRequestCancelActivity:
		if c.RequestCancelActivity == nil {
			return bad("missing attributes")
		}
	case api.CommandRequestCancelChildWorkflow:
		if c.RequestCancelChildWorkflow == nil {
			return bad("missing attributes")
		}
	case api.CommandStartTimer:
		if c.StartTimer == nil {
			return bad("missing attributes")
		}
		if c.StartTimer.Duration < 0 {
			return bad("negative duration")
		}
		return m.CheckID("timer id", c.StartTimer.TimerID, true)
	case api.CommandCancelTimer:
		if c.CancelTimer == nil {
			return bad("missing attributes")
		}
	case api.CommandRecordMarker:
		if c.RecordMarker == nil {
			return bad("missing attributes")
		}
		return firstErr(m.CheckID("marker name", c.RecordMarker.Name, true), m.CheckPayload("marker", c.RecordMarker.Data))
	case api.CommandStartChildWorkflow:
		s := c.StartChildWorkflow
		if s == nil {
			return bad("missing attributes")
		}
		return firstErr(m.CheckID("child workflow id", s.WorkflowID, true), m.CheckID("child workflow type", s.WorkflowType, true),
			m.CheckPayload("child input", s.Input))
	case api.CommandSignalExternalWorkflow:
		s := c.SignalExternalWorkflow
		if s == nil {
			return bad("missing attributes")
		}
		return firstErr(m.CheckID("workflow id", s.WorkflowID, true), m.CheckID("signal name", s.SignalName, true),
			m.CheckPayload("signal", s.Input))
	case api.CommandCompleteWorkflow:
		if c.CompleteWorkflow == nil {
			return bad("missing attributes")
		}
		return m.CheckPayload("result", c.CompleteWorkflow.Result)
	case api.CommandFailWorkflow:
		if c.FailWorkflow == nil {
			return bad("missing attributes")
		}
	case api.CommandCancelWorkflow:
		if c.CancelWorkflow == nil {
			return bad("missing attributes")
		}
	case api.CommandContinueAsNew:
		if c.ContinueAsNew == nil {
			return bad("missing attributes")
		}
		return m.CheckPayload("continue-as-new input", c.ContinueAsNew.Input)
	case api.CommandSetBudget:
		if c.SetBudget == nil {
			return bad("missing attributes")
		}
		if b := c.SetBudget.Budget; b.MaxTokens < 0 || b.MaxTurns < 0 || b.MaxCostUSD < 0 {
			return bad("a budget must not be negative")
		}
	case api.CommandCompleteUpdate:
		u := c.CompleteUpdate
		if u == nil {
			return bad("missing attributes")
		}
		return firstErr(m.CheckID("update id", u.UpdateID, true), m.CheckPayload("update result", u.Result))
	default:
		return bad("unknown command type")
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// command applies one validated command; it may return a consequence to run
// after all command events are written (so that each command's event sits
// at its position and engine-made events follow).
func (t *transition) command(i int, c *api.Command, wtc int64, wc *WFTCompletion) func() {
	switch c.Type {
	case api.CommandScheduleActivity:
		d, declared := wc.Declarations[i]
		if !declared {
			return t.scheduleActivity(c.ScheduleActivity, wtc, nil)
		}
		return t.scheduleActivity(c.ScheduleActivity, wtc, &d)
	case api.CommandRequestCancelActivity:
		return t.cancelActivity(c.RequestCancelActivity.ScheduledEventID, wtc)
	case api.CommandRequestCancelChildWorkflow:
		t.cancelChild(c.RequestCancelChildWorkflow, wtc, wc.Identity)
	case api.CommandStartTimer:
		t.startTimer(c.StartTimer, wtc)
	case api.CommandCancelTimer:
		t.cancelTimer(c.CancelTimer.TimerID, wtc)
	case api.CommandRecordMarker:
		r := c.RecordMarker
		id := t.add(&history.MarkerRecorded{Name: r.Name, ID: r.ID, Data: r.Data, WorkflowTaskCompletedEventID: wtc})
		var decl *api.ActivityDeclaration
		if d, ok := wc.Declarations[i]; ok {
			decl = &d
		}
		t.approvalMarker(r, id, decl)
	case api.CommandStartChildWorkflow:
		return t.startChild(c.StartChildWorkflow, wtc, wc.ChildRefused[i])
	case api.CommandSignalExternalWorkflow:
		t.signalExternal(c.SignalExternalWorkflow, wtc, wc.SignalDelivered[i], wc.Identity)
	case api.CommandCompleteWorkflow:
		t.add(&history.WorkflowCompleted{Result: c.CompleteWorkflow.Result, WorkflowTaskCompletedEventID: wtc})
		t.close(api.StatusCompleted, c.CompleteWorkflow.Result, nil)
	case api.CommandFailWorkflow:
		f := c.FailWorkflow.Failure
		t.add(&history.WorkflowFailed{Failure: f, WorkflowTaskCompletedEventID: wtc})
		t.close(api.StatusFailed, history.Payload{}, &f)
	case api.CommandCancelWorkflow:
		t.add(&history.WorkflowCanceled{Details: c.CancelWorkflow.Details, WorkflowTaskCompletedEventID: wtc})
		// The details travel with the failure: a parent that asked its
		// child to cancel gets them in ChildWorkflowFailed.
		t.close(api.StatusCanceled, history.Payload{}, &history.Failure{Type: "Canceled", Message: "workflow canceled", NonRetryable: true,
			Details: c.CancelWorkflow.Details})
	case api.CommandContinueAsNew:
		t.continueAsNew(c.ContinueAsNew, wtc)
	case api.CommandSetBudget:
		t.setBudget(c.SetBudget, wtc)
	case api.CommandCompleteUpdate:
		t.completeUpdate(c.CompleteUpdate, wtc)
	}
	return nil
}

func (t *transition) startTimer(c *api.StartTimerCommand, wtc int64) {
	fireAt := t.now.Add(c.Duration)
	id := t.add(&history.TimerStarted{TimerID: c.TimerID, Duration: c.Duration, FireAt: fireAt, WorkflowTaskCompletedEventID: wtc})
	if t.st.Timers == nil {
		t.st.Timers = map[string]*TimerInfo{}
	}
	t.st.Timers[c.TimerID] = &TimerInfo{TimerID: c.TimerID, StartedEventID: id, FireAt: fireAt}
	t.deadline(Deadline{At: fireAt, Kind: DeadlineUserTimer, Name: c.TimerID, Epoch: id})
}

func (t *transition) cancelTimer(timerID string, wtc int64) {
	var started int64
	if ti, ok := t.st.Timers[timerID]; ok {
		started = ti.StartedEventID
		delete(t.st.Timers, timerID)
	}
	t.add(&history.TimerCanceled{TimerID: timerID, StartedEventID: started, WorkflowTaskCompletedEventID: wtc})
}

func (t *transition) startChild(c *api.StartChildWorkflowCommand, wtc int64, refused string) func() {
	st := t.st
	queue := c.TaskQueue
	if queue == "" {
		queue = st.TaskQueue
	}
	runID := ""
	if refused == "" {
		runID = t.m.NewRunID()
	}
	ev := &history.ChildWorkflowStarted{WorkflowID: c.WorkflowID, RunID: runID, WorkflowType: c.WorkflowType, TaskQueue: queue,
		Input: c.Input, ParentClosePolicy: c.ParentClosePolicy, WorkflowTaskCompletedEventID: wtc}
	id := t.add(ev)
	if refused != "" {
		return func() {
			t.add(&history.ChildWorkflowFailed{InitiatedEventID: id, WorkflowID: c.WorkflowID,
				Failure: history.Failure{Type: "ChildWorkflowStartRefused", Message: refused, NonRetryable: true}})
			t.needWFT()
		}
	}
	if st.Children == nil {
		st.Children = map[int64]*ChildInfo{}
	}
	st.Children[id] = &ChildInfo{InitiatedEventID: id, WorkflowID: c.WorkflowID, RunID: runID, WorkflowType: c.WorkflowType,
		ParentClosePolicy: c.ParentClosePolicy}
	t.out.ChildStarts = append(t.out.ChildStarts, ChildStart{Params: StartParams{
		Request: api.StartWorkflowRequest{WorkflowID: c.WorkflowID, WorkflowType: c.WorkflowType, TaskQueue: queue,
			Input: c.Input, ExecutionTimeout: c.ExecutionTimeout, RunTimeout: c.RunTimeout, TaskTimeout: c.TaskTimeout,
			ReusePolicy: c.ReusePolicy, TraceParent: childTraceParent(st, c), TraceState: st.TraceState},
		RunID:  runID,
		Parent: &ParentRef{WorkflowID: st.WorkflowID, RunID: st.RunID, InitiatedEventID: id, ParentClosePolicy: c.ParentClosePolicy},
		ForkOf: childFork(st),
	}})
	return nil
}

// childTraceParent is the trace context a child run is traced under: the
// workflow task that started it, else its parent run's.
func childTraceParent(st *RunState, c *api.StartChildWorkflowCommand) string {
	if c.TraceParent != "" {
		return bounded(c.TraceParent, maxTraceParent)
	}
	return st.TraceParent
}

// cancelChild records the parent's request to cancel a child and, when the
// child is still open and was not asked before, sends the child run a
// cancel request (Output.CancelChildren). A child that closed already (its
// outcome is in the parent's history, or on its way) is left alone: the
// request is recorded and the outcome stands.
func (t *transition) cancelChild(c *api.RequestCancelChildWorkflowCommand, wtc int64, identity string) {
	ev := &history.ChildWorkflowCancelRequested{InitiatedEventID: c.InitiatedEventID, WorkflowID: c.WorkflowID, RunID: c.RunID,
		WorkflowTaskCompletedEventID: wtc}
	ch := t.st.Children[c.InitiatedEventID]
	if ch != nil {
		ev.WorkflowID, ev.RunID = ch.WorkflowID, ch.RunID
	}
	id := t.add(ev)
	if ch == nil || ch.CancelRequested {
		return
	}
	ch.CancelRequested = true
	if identity == "" {
		identity = "parent"
	}
	t.out.CancelChildren = append(t.out.CancelChildren, ChildCancel{WorkflowID: ch.WorkflowID, RunID: ch.RunID, Identity: identity,
		Reason: fmt.Sprintf("parent workflow %q run %q requested cancellation (event %d)", t.st.WorkflowID, t.st.RunID, id)})
}

// childFork is the fork origin of a child the run starts: a fork's
// child is a fork's too, with no base ledger to answer it (its base child,
// if any, has another workflow id) — its effects are held, or sent to the
// fork's sandbox.
func childFork(st *RunState) *ForkOrigin {
	if f := st.Fork(); f != nil {
		return &ForkOrigin{SandboxQueue: f.SandboxQueue}
	}
	return nil
}

func (t *transition) signalExternal(c *api.SignalExternalWorkflowCommand, wtc int64, delivered bool, identity string) {
	id := t.add(&history.SignalExternalSent{WorkflowID: c.WorkflowID, RunID: c.RunID, Name: c.SignalName, Input: c.Input,
		Delivered: delivered, WorkflowTaskCompletedEventID: wtc})
	if delivered {
		t.out.SignalsOut = append(t.out.SignalsOut, SignalOut{WorkflowID: c.WorkflowID, RunID: c.RunID, Name: c.SignalName,
			Input: c.Input, Identity: identity, SentEventID: id})
	}
}

func (t *transition) continueAsNew(c *api.ContinueAsNewCommand, wtc int64) {
	st := t.st
	next := StartParams{
		Request: api.StartWorkflowRequest{WorkflowID: st.WorkflowID, WorkflowType: c.WorkflowType, TaskQueue: c.TaskQueue,
			Input: c.Input, ExecutionTimeout: st.ExecutionTimeout, RunTimeout: c.RunTimeout, TaskTimeout: c.TaskTimeout,
			TraceParent: st.TraceParent, TraceState: st.TraceState,
			Retention: st.Retention},
		RunID:             t.m.NewRunID(),
		FirstRunID:        st.FirstRunID,
		Parent:            st.Parent,
		ContinuedFrom:     st.RunID,
		ExecutionDeadline: st.ExecutionDeadline,
		ForkOf:            st.Fork(),
	}
	r := &next.Request
	if r.WorkflowType == "" {
		r.WorkflowType = st.WorkflowType
	}
	if r.TaskQueue == "" {
		r.TaskQueue = st.TaskQueue
	}
	if r.RunTimeout == 0 {
		r.RunTimeout = st.RunTimeout
	}
	if r.TaskTimeout == 0 {
		r.TaskTimeout = st.TaskTimeout
	}
	t.add(&history.WorkflowContinuedAsNew{NewRunID: next.RunID, WorkflowType: r.WorkflowType, TaskQueue: r.TaskQueue,
		Input: r.Input, RunTimeout: r.RunTimeout, TaskTimeout: r.TaskTimeout, WorkflowTaskCompletedEventID: wtc})
	st.ContinuedAsNewRunID = next.RunID
	// The run closes: its open children get their parent-close policy now
	// (as in Temporal). The next run does not adopt them (their ParentRef
	// names this run), so nothing would apply it later.
	t.close(api.StatusContinuedAsNew, history.Payload{}, nil)
	t.out.ContinueAsNew = &next
}

// ChildClosed delivers a child's outcome to its parent.
func (m *Machine) ChildClosed(st *RunState, initiatedID int64, child *RunState, now time.Time) (Output, error) {
	t := m.begin(st, now)
	c, ok := st.Children[initiatedID]
	if !ok || !st.Status.Open() {
		return t.out, nil
	}
	delete(st.Children, initiatedID)
	if child.Status == api.StatusCompleted {
		t.add(&history.ChildWorkflowCompleted{InitiatedEventID: initiatedID, WorkflowID: c.WorkflowID, RunID: child.RunID, Result: child.Result})
	} else {
		f := history.Failure{Type: child.Status.String(), Message: "child workflow " + child.Status.String(), NonRetryable: true}
		if child.Failure != nil {
			f = *child.Failure
		}
		t.add(&history.ChildWorkflowFailed{InitiatedEventID: initiatedID, WorkflowID: c.WorkflowID, RunID: child.RunID, Failure: f})
	}
	t.needWFT()
	return t.out, nil
}
