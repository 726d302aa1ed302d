package sdk

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// fakeEngine is a miniature engine for scenario tests: it keeps a run's
// history, turns the commands an Execution returns into the events the real
// engine records (one per command, after a WorkflowTaskCompleted), and
// offers the outside world's moves (complete an activity, fire a timer,
// signal …) as methods. Tasks go to a sticky Execution, as a worker with a
// cache would see them.
type fakeEngine struct {
	t      testing.TB
	reg    *Registry
	opts   ExecutionOptions
	wfType string
	events []history.Event
	clock  time.Time
	exec   *Execution
	seen   int64 // the last event handed to exec

	decisions []decision
	acts      map[string]int64 // activity id → ActivityScheduled event id
	timers    map[string]int64 // timer id → TimerStarted event id
	children  map[string]int64 // child workflow id → ChildWorkflowStarted event id
	updates   map[string]int64 // update id → WorkflowUpdateAccepted event id
	closed    bool
}

// decision is one live decision: what the code had seen, what it decided.
type decision struct {
	seen int64
	cmds []api.Command
}

var epoch = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func newFake(t testing.TB, reg *Registry, wf any, input any) *fakeEngine {
	t.Helper()
	f := &fakeEngine{
		t: t, reg: reg, wfType: reg.nameOf(wf), clock: epoch,
		opts:   ExecutionOptions{DeadlockTimeout: 5 * time.Second},
		acts:   map[string]int64{},
		timers: map[string]int64{}, children: map[string]int64{},
	}
	f.add(&history.WorkflowStarted{WorkflowType: f.wfType, TaskQueue: "agents", Input: f.payload(input), Attempt: 1})
	t.Cleanup(func() {
		if f.exec != nil {
			f.exec.Close()
		}
	})
	return f
}

func (f *fakeEngine) payload(v any) history.Payload {
	f.t.Helper()
	p, err := DefaultConverter().ToPayload(v)
	if err != nil {
		f.t.Fatalf("encode %v: %v", v, err)
	}
	return p
}

// add appends an event one second after the previous one.
func (f *fakeEngine) add(a history.Attributes) int64 {
	f.clock = f.clock.Add(time.Second)
	id := int64(len(f.events) + 1)
	f.events = append(f.events, history.Event{ID: id, Time: f.clock, Attrs: a})
	return id
}

func (f *fakeEngine) newTask(first int64) *api.WorkflowTask {
	return &api.WorkflowTask{
		WorkflowID: "wf-1", RunID: "run-1", WorkflowType: f.wfType, TaskQueue: "agents", Attempt: 1,
		FirstEventID: first, Events: slices.Clone(f.events[first-1:]), NextEventID: int64(len(f.events) + 1),
	}
}

// task runs a workflow task and records its decision.
func (f *fakeEngine) task() []api.Command {
	f.t.Helper()
	return f.taskWith(nil)
}

// taskWith runs a workflow task; during runs between dispatch and
// completion (its events arrive while the task is in flight).
func (f *fakeEngine) taskWith(during func()) []api.Command {
	f.t.Helper()
	cmds, err := f.tryTask(during)
	if err != nil {
		f.t.Fatalf("workflow task: %v", err)
	}
	return cmds
}

func (f *fakeEngine) tryTask(during func()) ([]api.Command, error) {
	f.t.Helper()
	if f.closed {
		f.t.Fatalf("task on a closed run")
	}
	if f.exec == nil {
		exec, err := NewExecution(f.reg, f.newTask(1), f.opts)
		if err != nil {
			return nil, err
		}
		f.exec, f.seen = exec, 0
	}
	dispatched := int64(len(f.events))
	cmds, err := f.exec.ProcessTask(f.newTask(f.seen + 1))
	if err != nil {
		return nil, err
	}
	f.seen = dispatched
	if during != nil {
		during()
	}
	f.complete(dispatched, cmds)
	return cmds, nil
}

// complete records a decision the way the engine does.
func (f *fakeEngine) complete(seen int64, cmds []api.Command) {
	f.decisions = append(f.decisions, decision{seen: seen, cmds: cmds})
	wtc := f.add(&history.WorkflowTaskCompleted{SeenEventID: seen, Attempt: 1})
	for _, c := range cmds {
		switch c.Type {
		case api.CommandScheduleActivity:
			s := c.ScheduleActivity
			f.acts[s.ActivityID] = f.add(&history.ActivityScheduled{ActivityID: s.ActivityID, ActivityType: s.ActivityType,
				Input: s.Input, Options: s.Options, Effect: s.Effect, HasReconcile: s.HasReconcile, WorkflowTaskCompletedEventID: wtc})
		case api.CommandRequestCancelActivity:
			f.add(&history.ActivityCancelRequested{ScheduledEventID: c.RequestCancelActivity.ScheduledEventID, WorkflowTaskCompletedEventID: wtc})
		case api.CommandStartTimer:
			s := c.StartTimer
			f.timers[s.TimerID] = f.add(&history.TimerStarted{TimerID: s.TimerID, Duration: s.Duration, FireAt: f.clock.Add(s.Duration),
				WorkflowTaskCompletedEventID: wtc})
		case api.CommandCancelTimer:
			f.add(&history.TimerCanceled{TimerID: c.CancelTimer.TimerID, StartedEventID: f.timers[c.CancelTimer.TimerID], WorkflowTaskCompletedEventID: wtc})
		case api.CommandRecordMarker:
			m := c.RecordMarker
			f.add(&history.MarkerRecorded{Name: m.Name, ID: m.ID, Data: m.Data, WorkflowTaskCompletedEventID: wtc})
		case api.CommandStartChildWorkflow:
			s := c.StartChildWorkflow
			f.children[s.WorkflowID] = f.add(&history.ChildWorkflowStarted{WorkflowID: s.WorkflowID, RunID: "run-of-" + s.WorkflowID,
				WorkflowType: s.WorkflowType, TaskQueue: s.TaskQueue, Input: s.Input, WorkflowTaskCompletedEventID: wtc})
		case api.CommandSignalExternalWorkflow:
			s := c.SignalExternalWorkflow
			f.add(&history.SignalExternalSent{WorkflowID: s.WorkflowID, RunID: s.RunID, Name: s.SignalName, Input: s.Input,
				Delivered: s.WorkflowID != "nobody", WorkflowTaskCompletedEventID: wtc})
		case api.CommandCompleteWorkflow:
			f.add(&history.WorkflowCompleted{Result: c.CompleteWorkflow.Result, WorkflowTaskCompletedEventID: wtc})
			f.closed = true
		case api.CommandFailWorkflow:
			f.add(&history.WorkflowFailed{Failure: c.FailWorkflow.Failure, WorkflowTaskCompletedEventID: wtc})
			f.closed = true
		case api.CommandCancelWorkflow:
			f.add(&history.WorkflowCanceled{Details: c.CancelWorkflow.Details, WorkflowTaskCompletedEventID: wtc})
			f.closed = true
		case api.CommandContinueAsNew:
			s := c.ContinueAsNew
			f.add(&history.WorkflowContinuedAsNew{NewRunID: "run-2", WorkflowType: s.WorkflowType, Input: s.Input, WorkflowTaskCompletedEventID: wtc})
			f.closed = true
		case api.CommandCompleteUpdate:
			u := c.CompleteUpdate
			f.add(&history.WorkflowUpdateCompleted{UpdateID: u.UpdateID, AcceptedEventID: f.updates[u.UpdateID], Result: u.Result,
				Failure: u.Failure, WorkflowTaskCompletedEventID: wtc})
		default:
			f.t.Fatalf("unknown command %v", c.Type)
		}
	}
}

func (f *fakeEngine) sched(activityID string) int64 {
	f.t.Helper()
	id, ok := f.acts[activityID]
	if !ok {
		f.t.Fatalf("no activity %q scheduled", activityID)
	}
	return id
}

// completeActivity records a start and a completion, as a worker's
// successful attempt produces.
func (f *fakeEngine) completeActivity(activityID string, result any) {
	se := f.sched(activityID)
	st := f.add(&history.ActivityStarted{ScheduledEventID: se, Attempt: 1, LeaseEpoch: 1})
	f.add(&history.ActivityCompleted{ScheduledEventID: se, StartedEventID: st, Result: f.payload(result)})
}

// failActivity records the activity's final failure.
func (f *fakeEngine) failActivity(activityID string, err error, attempt int32) {
	se := f.sched(activityID)
	st := f.add(&history.ActivityStarted{ScheduledEventID: se, Attempt: attempt, LeaseEpoch: int64(attempt)})
	f.add(&history.ActivityFailed{ScheduledEventID: se, StartedEventID: st, Failure: ErrorToFailure(err), Attempt: attempt})
}

func (f *fakeEngine) activityCanceled(activityID string) {
	f.add(&history.ActivityCanceled{ScheduledEventID: f.sched(activityID)})
}

func (f *fakeEngine) fireTimer(timerID string) {
	f.t.Helper()
	st, ok := f.timers[timerID]
	if !ok {
		f.t.Fatalf("no timer %q", timerID)
	}
	f.add(&history.TimerFired{TimerID: timerID, StartedEventID: st})
}

func (f *fakeEngine) signal(name string, v any) {
	f.add(&history.SignalReceived{Name: name, Input: f.payload(v)})
}

// update records an accepted update.
func (f *fakeEngine) update(id, name string, v any) {
	if f.updates == nil {
		f.updates = map[string]int64{}
	}
	f.updates[id] = f.add(&history.WorkflowUpdateAccepted{UpdateID: id, Name: name, Input: f.payload(v)})
}

func (f *fakeEngine) requestCancel() { f.add(&history.WorkflowCancelRequested{Reason: "test"}) }

func (f *fakeEngine) completeChild(workflowID string, result any) {
	f.add(&history.ChildWorkflowCompleted{InitiatedEventID: f.children[workflowID], WorkflowID: workflowID,
		RunID: "run-of-" + workflowID, Result: f.payload(result)})
}

func (f *fakeEngine) failChild(workflowID string, err error) {
	f.add(&history.ChildWorkflowFailed{InitiatedEventID: f.children[workflowID], WorkflowID: workflowID,
		RunID: "run-of-" + workflowID, Failure: ErrorToFailure(err)})
}

// last returns the last event's attributes.
func (f *fakeEngine) last() history.Attributes { return f.events[len(f.events)-1].Attrs }

// result decodes the run's result into v; the run must have completed.
func (f *fakeEngine) result(v any) {
	f.t.Helper()
	c, ok := f.last().(*history.WorkflowCompleted)
	if !ok {
		f.t.Fatalf("run did not complete: last event is %s", f.events[len(f.events)-1].Type())
	}
	if err := DefaultConverter().FromPayload(c.Result, v); err != nil {
		f.t.Fatal(err)
	}
}

// replayAll replays the whole history through a fresh Execution using reg
// (f.reg when nil) and returns the live decision's commands.
func (f *fakeEngine) replayAll(reg *Registry) ([]api.Command, *Execution, error) {
	if reg == nil {
		reg = f.reg
	}
	exec, err := NewExecution(reg, f.newTask(1), f.opts)
	if err != nil {
		return nil, nil, err
	}
	f.t.Cleanup(exec.Close)
	cmds, err := exec.ProcessTask(f.newTask(1))
	return cmds, exec, err
}

// checkReplay verifies determinism twice over: the whole history replays
// without error, and for every recorded decision a fresh Execution given
// exactly the events that decision saw returns identical commands.
func (f *fakeEngine) checkReplay() {
	f.t.Helper()
	cmds, exec, err := f.replayAll(nil)
	if err != nil {
		f.t.Fatalf("full replay: %v", err)
	}
	if f.closed && len(cmds) != 0 {
		f.t.Fatalf("full replay of a closed run returned commands %v", cmds)
	}
	if st := exec.Stats(); len(f.decisions) > 0 && st.ReplayedFromStart != 1 {
		f.t.Fatalf("ReplayedFromStart = %d after a full replay", st.ReplayedFromStart)
	}
	for i, d := range f.decisions {
		exec, err := NewExecution(f.reg, f.newTask(1), f.opts)
		if err != nil {
			f.t.Fatal(err)
		}
		task := f.newTask(1)
		task.Events = task.Events[:d.seen]
		got, err := exec.ProcessTask(task)
		exec.Close()
		if err != nil {
			f.t.Fatalf("replay up to decision %d (seen %d): %v", i+1, d.seen, err)
		}
		if !reflect.DeepEqual(got, d.cmds) {
			f.t.Fatalf("replay of decision %d (seen %d) produced\n%s\nlive produced\n%s", i+1, d.seen, cmdsString(got), cmdsString(d.cmds))
		}
	}
}

func cmdsString(cmds []api.Command) string {
	s := ""
	for _, c := range cmds {
		s += "  " + describeCommand(&c) + "\n"
	}
	return s
}

// cmdTypes lists the commands' types.
func cmdTypes(cmds []api.Command) []api.CommandType {
	var ts []api.CommandType
	for _, c := range cmds {
		ts = append(ts, c.Type)
	}
	return ts
}

func wantTypes(t testing.TB, cmds []api.Command, want ...api.CommandType) {
	t.Helper()
	if got := cmdTypes(cmds); !slices.Equal(got, want) {
		t.Fatalf("commands = %v, want %v\n%s", got, want, cmdsString(cmds))
	}
}

// settleGoroutines waits, without sleeping, until the goroutine count
// (not counting the coroutine pool's idle goroutines) is back to at most n
// and no workflow coroutine's goroutine is left.
func settleGoroutines(t testing.TB, n int) {
	t.Helper()
	for i := 0; i < 100_000; i++ {
		if runtime.NumGoroutine()-coroutines.Idle() <= n && coroutineGoroutines() == 0 {
			return
		}
		runtime.Gosched()
	}
	buf := make([]byte, 1<<20)
	t.Fatalf("goroutines: %d, want <= %d; %d coroutines left\n%s", runtime.NumGoroutine(), n, coroutineGoroutines(), buf[:runtime.Stack(buf, true)])
}

// coroutineGoroutines counts the goroutines running a workflow coroutine.
func coroutineGoroutines() int {
	buf := make([]byte, 1<<20)
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "sdk.(*coroutine).main(")
}

func mustRegister(t testing.TB, reg *Registry, workflows []any, activities ...any) {
	t.Helper()
	for _, w := range workflows {
		if err := reg.RegisterWorkflow(w); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range activities {
		if err := reg.RegisterActivity(a); err != nil {
			t.Fatal(err)
		}
	}
}
