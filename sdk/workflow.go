package sdk

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/converter"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Marker names written by SideEffect, MutableSideEffect and GetVersion.
const (
	MarkerSideEffect        = "SideEffect"
	MarkerMutableSideEffect = "MutableSideEffect"
	MarkerVersion           = "Version"
)

// QueryTypeStackTrace is the built-in query that returns every workflow
// coroutine's stack (as a string).
const QueryTypeStackTrace = "__stack_trace"

// WorkflowInfo describes the run and the decision being made.
type WorkflowInfo struct {
	WorkflowID   string
	RunID        string
	WorkflowType string
	TaskQueue    string
	// Attempt is the workflow task's attempt (1 for the first; during
	// replay, the attempt recorded with the decision).
	Attempt int32
	// HistoryLength is the id of the last event the decision has seen.
	HistoryLength int64
	// ContinueAsNewSuggested is set when the history this decision has seen
	// is at least as long as the engine's suggestion threshold (see
	// api.WorkflowTask.SuggestContinueAsNewAt), or at least as large as
	// its size threshold (SuggestContinueAsNewBytes), so it replays
	// exactly. The thresholds are a fifth of the history limit (10,240 of
	// 51,200 events) and 8 MiB by default: well before a limit.
	ContinueAsNewSuggested bool
	StartTime              time.Time
	ExecutionTimeout       time.Duration
	RunTimeout             time.Duration
	TaskTimeout            time.Duration
	FirstRunID             string
	ContinuedFromRunID     string
	ParentWorkflowID       string
	ParentRunID            string
	// HistorySize is the size in bytes of the events the decision has
	// seen: the sum of their encoded envelopes as the code receives them
	// (payloads it decodes — results, signals — resolved; payloads the
	// runtime only compares — activity inputs, a transcript passed by
	// reference — as their 32-byte references). The SDK measures it from
	// the events themselves, so it is the same on every replay.
	HistorySize int64
}

// GetInfo returns the run's info as of the decision being made.
func GetInfo(ctx Context) WorkflowInfo {
	e := mustCtx(ctx).e
	i := e.info
	i.Attempt = e.decisionAttempt
	i.HistoryLength = e.historyLen
	i.HistorySize = e.historySeenSize
	if e.suggestCANAt > 0 {
		i.ContinueAsNewSuggested = e.historyLen >= e.suggestCANAt || e.suggestCANBytes > 0 && e.historySeenSize >= e.suggestCANBytes
	} else {
		i.ContinueAsNewSuggested = !e.replaying && e.taskSuggestCAN // an engine that does not send the threshold
	}
	return i
}

// ContinueAsNewSuggested reports whether the history the decision has seen
// has grown past the engine's suggestion thresholds (its length or its
// size: see WorkflowInfo.ContinueAsNewSuggested): a long-lived workflow
// should then continue as new, carrying its state. Replay-safe.
func ContinueAsNewSuggested(ctx Context) bool { return GetInfo(ctx).ContinueAsNewSuggested }

// GetLogger returns the run's logger (fields workflow_id, run_id,
// workflow_type). It is silent while the code replays recorded decisions,
// so each line is logged once.
func GetLogger(ctx Context) *zerolog.Logger { return mustCtx(ctx).e.getLogger() }

// IsReplaying reports whether the code is re-running a decision already
// recorded in history.
func IsReplaying(ctx Context) bool { return mustCtx(ctx).e.replaying }

// Now returns the workflow's clock: the time of the last event the current
// decision has seen. It is the same on every replay.
func Now(ctx Context) time.Time { return mustCtx(ctx).e.now }

// Go starts fn in a new workflow coroutine. It runs after the current
// coroutine blocks, in creation order; use it instead of the go statement.
func Go(ctx Context, fn func(ctx Context)) { GoNamed(ctx, "", fn) }

// GoNamed is Go with a name shown in stack traces and deadlock errors.
func GoNamed(ctx Context, name string, fn func(ctx Context)) {
	c, e := mutating(ctx)
	e.seqCoroutine++
	if name == "" {
		name = "go-" + strconv.FormatInt(e.seqCoroutine, 10)
	}
	e.spawn(name, func() { fn(c) })
}

// Await blocks until cond returns true or ctx is canceled (then it returns a
// *CanceledError). cond is re-evaluated whenever workflow state may have
// changed, by the scheduler between coroutine steps: it must only read
// workflow state, quickly, and never block.
func Await(ctx Context, cond func() bool) error {
	c := mustCtx(ctx)
	if cond() {
		return nil
	}
	if c.scope.canceled {
		return c.Err()
	}
	c.e.block(func() bool { return c.scope.canceled || cond() })
	if cond() {
		return nil
	}
	return c.Err()
}

// AwaitWithTimeout is Await bounded by a durable timer: it reports false
// when the timeout elapsed first. The timer is canceled when cond wins.
func AwaitWithTimeout(ctx Context, timeout time.Duration, cond func() bool) (bool, error) {
	c := mustCtx(ctx)
	if cond() {
		return true, nil
	}
	if c.scope.canceled {
		return false, c.Err()
	}
	tctx, cancel := WithCancel(ctx)
	t := NewTimer(tctx, timeout)
	c.e.block(func() bool { return c.scope.canceled || t.IsReady() || cond() })
	ok := cond()
	cancel()
	switch {
	case ok:
		return true, nil
	case c.scope.canceled:
		return false, c.Err()
	}
	return false, nil
}

// NewTimer starts a durable timer. The future resolves when it fires, or
// with a *CanceledError as soon as ctx is canceled (the timer is canceled
// too). A zero duration resolves at once; a negative one is an error.
func NewTimer(ctx Context, d time.Duration) Future[struct{}] {
	c, e := mutating(ctx)
	switch {
	case d < 0:
		return readyFuture[struct{}](e, fmt.Errorf("sdk: negative timer duration %s", d))
	case d == 0:
		return readyFuture[struct{}](e, nil)
	case c.scope.canceled:
		return readyFuture[struct{}](e, &CanceledError{Message: "context canceled before the timer started"})
	}
	e.seqTimer++
	id := strconv.FormatInt(e.seqTimer, 10)
	f := &timerFuture{future: future[struct{}]{e: e}}
	t := &f.timer
	t.e, t.id, t.fut, t.scope = e, id, &f.st, c.scope
	t.cmd = api.StartTimerCommand{TimerID: id, Duration: d}
	t.entry = commandEntry{cmd: api.Command{Type: api.CommandStartTimer, StartTimer: &t.cmd}, owner: t}
	e.timers[id] = t
	e.addEntry(&t.entry)
	t.cancelKey = c.scope.onCancel(t)
	f.st.owner = t
	return f
}

// timerFuture is a timer's future and state in one allocation.
type timerFuture struct {
	future[struct{}]
	timer timerState
}

func (e *Execution) cancelTimer(t *timerState) {
	if t.fut.ready {
		return
	}
	if t.entry.droppable() {
		t.entry.dropped = true
	} else {
		e.addCommand(api.Command{Type: api.CommandCancelTimer, CancelTimer: &api.CancelTimerCommand{TimerID: t.id}}, nil)
	}
	e.timers[t.id] = nil
	t.fut.setValue(nil, &CanceledError{Message: "timer canceled"})
}

// Sleep blocks for d on a durable timer; it returns a *CanceledError when
// ctx is canceled first.
func Sleep(ctx Context, d time.Duration) error {
	_, err := NewTimer(ctx, d).Get(ctx)
	return err
}

// ExecuteActivity schedules the activity fn with input in and returns its
// future. The activity type is the name fn was registered under, else the
// function's name without its package ("SendPayment"). Options come from
// WithActivityOptions.
func ExecuteActivity[I, O any](ctx Context, fn func(context.Context, I) (O, error), in I) Future[O] {
	c, e := mutating(ctx)
	return executeActivity[O](c, e.funcName(fn), in)
}

// ExecuteActivityByName schedules the activity registered as name. in may
// be nil for an activity without input; use struct{} as O for one without
// result.
func ExecuteActivityByName[O any](ctx Context, name string, in any) Future[O] {
	c, _ := mutating(ctx)
	return executeActivity[O](c, name, in)
}

func executeActivity[O any](c *wfContext, name string, in any) Future[O] {
	e := c.e
	e.seqActivity++
	var opts ActivityOptions
	if c.actOpts != nil {
		opts = *c.actOpts
	}
	id := opts.ActivityID
	if id == "" {
		id = strconv.FormatInt(e.seqActivity, 10)
	}
	f := &activityFuture[O]{future: future[O]{e: e}}
	act := &f.act
	act.e, act.typ, act.id, act.retry, act.fut, act.scope = e, name, id, opts.RetryPolicy, &f.st, c.scope
	if c.scope.canceled {
		act.fail(RetryStateCancelRequested, &CanceledError{Message: "context canceled before the activity was scheduled"})
		return f
	}
	input, err := toPayload(e.conv, in)
	if err != nil {
		f.st.setValue(nil, err)
		return f
	}
	queue := opts.TaskQueue
	if queue == "" {
		queue = e.info.TaskQueue
	}
	cmd := &act.cmd
	*cmd = api.ScheduleActivityCommand{
		ActivityID:   id,
		ActivityType: name,
		Input:        input,
		Options: history.ActivityOptions{
			TaskQueue:              queue,
			ScheduleToStartTimeout: opts.ScheduleToStartTimeout,
			StartToCloseTimeout:    opts.StartToCloseTimeout,
			ScheduleToCloseTimeout: opts.ScheduleToCloseTimeout,
			HeartbeatTimeout:       opts.HeartbeatTimeout,
			RetryPolicy:            opts.RetryPolicy,
			LimitKey:               opts.LimitKey,
		},
		ShareResult: opts.ShareResult,
	}
	if def := e.activityDef(name); def != nil {
		cmd.Effect, cmd.HasReconcile, cmd.Metered, cmd.BusinessKey = def.Effect(), def.HasReconcile(), def.opts.Metered, def.key != nil
		if cmd.KeyMaterial, err = e.keyMaterial(def, in, input); err != nil {
			f.st.setValue(nil, err)
			return f
		}
	}
	act.entry = commandEntry{cmd: api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: cmd}, owner: act}
	e.addEntry(&act.entry)
	act.cancelKey = c.scope.onCancel(act)
	f.st.owner = act
	return f
}

// toPayload encodes an activity's input; a history.Payload is sent as it
// is (it may extend a stored chunk: see history.Payload.Ref).
func toPayload(conv Converter, in any) (history.Payload, error) {
	if p, ok := in.(history.Payload); ok {
		return p, nil
	}
	return conv.ToPayload(in)
}

// activityFuture is an activity's future, state and command in one
// allocation.
type activityFuture[O any] struct {
	future[O]
	act activityState
}

// funcName returns the registered (or derived) name of a workflow or
// activity function, caching it for the Execution's life.
func (e *Execution) funcName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return e.reg.nameOf(fn)
	}
	pc := v.Pointer()
	name, ok := e.fnNames[pc]
	if !ok {
		name = e.reg.nameOf(fn)
		e.fnNames[pc] = name
	}
	return name
}

// activityDef looks an activity up, caching the answer (misses too) for
// the Execution's life.
func (e *Execution) activityDef(name string) *ActivityDefinition {
	def, ok := e.actDefs[name]
	if !ok {
		def, _ = e.reg.Activity(name)
		e.actDefs[name] = def
	}
	return def
}

// keyMaterial identifies the logical action of a side-effecting activity:
// its declared business key, else the canonical encoding of its input (nil
// when that is the input payload itself). Read activities need none.
func (e *Execution) keyMaterial(def *ActivityDefinition, in any, input history.Payload) ([]byte, error) {
	if def.key != nil {
		k, err := def.key(in)
		if err != nil {
			return nil, err
		}
		return []byte(k), nil
	}
	if def.Effect() == history.Read {
		return nil, nil
	}
	if input.ByRef() {
		return input.StoredRef(), nil // names the whole bytes, however they are chunked
	}
	if converter.IsCanonical(e.conv) {
		return nil, nil // the engine uses Input.Data, which is canonical
	}
	return CanonicalEncoding(in)
}

// cancelActivity withdraws an activity that was not sent yet, or asks the
// engine to cancel it; its future resolves when ActivityCanceled (or its
// result) arrives.
func (e *Execution) cancelActivity(act *activityState) {
	if act.fut.ready || act.cancelRequested {
		return
	}
	act.cancelRequested = true
	if act.entry.droppable() {
		act.entry.dropped = true
		act.fail(RetryStateCancelRequested, &CanceledError{Message: "activity canceled before it was scheduled"})
		return
	}
	e.addCommand(api.Command{Type: api.CommandRequestCancelActivity,
		RequestCancelActivity: &api.RequestCancelActivityCommand{ScheduledEventID: act.scheduledID}}, nil)
}

// WorkflowExecution names a run.
type WorkflowExecution struct {
	ID    string
	RunID string
}

// ChildWorkflowFuture is the future of a child workflow's result.
type ChildWorkflowFuture[T any] interface {
	Future[T]
	// GetChildWorkflowExecution resolves when the child has started (or
	// failed to start).
	GetChildWorkflowExecution() Future[WorkflowExecution]
}

// childFuture is a child workflow's futures and state in one allocation.
type childFuture[T any] struct {
	future[T]
	started future[WorkflowExecution]
	child   childState
}

func (f *childFuture[T]) GetChildWorkflowExecution() Future[WorkflowExecution] { return &f.started }

// ExecuteChildWorkflow starts the child workflow wf with input in. Options
// come from WithChildWorkflowOptions. Canceling ctx withdraws a child whose
// start was not sent yet (no event; the future fails at once with a
// *ChildWorkflowError wrapping a *CanceledError), and asks a started child
// to cancel (ChildWorkflowCancelRequested; the child sees its context
// canceled): the future then resolves with the child's outcome — a
// *ChildWorkflowError wrapping a *CanceledError (errors.Is(err,
// ErrCanceled)) when the child returns its context's error, its result
// when it completes anyway. A child that closed already is not touched.
func ExecuteChildWorkflow[I, O any](ctx Context, wf func(Context, I) (O, error), in I) ChildWorkflowFuture[O] {
	c, e := mutating(ctx)
	return executeChild[O](c, e.funcName(wf), in)
}

// ExecuteChildWorkflowByName starts the child workflow registered as name.
func ExecuteChildWorkflowByName[O any](ctx Context, name string, in any) ChildWorkflowFuture[O] {
	c, _ := mutating(ctx)
	return executeChild[O](c, name, in)
}

func executeChild[O any](c *wfContext, name string, in any) ChildWorkflowFuture[O] {
	e := c.e
	e.seqChild++
	var opts ChildWorkflowOptions
	if c.childOpts != nil {
		opts = *c.childOpts
	}
	if opts.WorkflowID == "" {
		opts.WorkflowID = fmt.Sprintf("%s/%s/%d", e.info.WorkflowID, e.info.RunID, e.seqChild)
	}
	f := &childFuture[O]{future: future[O]{e: e}, started: future[WorkflowExecution]{e: e}}
	ch := &f.child
	ch.e, ch.typ, ch.id, ch.fut, ch.started, ch.scope = e, name, opts.WorkflowID, &f.st, &f.started.st, c.scope
	if c.scope.canceled {
		ch.fail(&CanceledError{Message: "context canceled before the child workflow started"})
		return f
	}
	input, err := e.conv.ToPayload(in)
	if err != nil {
		ch.fail(err)
		return f
	}
	ch.cmd = api.StartChildWorkflowCommand{
		WorkflowID: opts.WorkflowID, WorkflowType: name, TaskQueue: opts.TaskQueue, Input: input,
		ExecutionTimeout: opts.ExecutionTimeout, RunTimeout: opts.RunTimeout, TaskTimeout: opts.TaskTimeout,
		ParentClosePolicy: opts.ParentClosePolicy, ReusePolicy: opts.ReusePolicy,
	}
	ch.entry = commandEntry{cmd: api.Command{Type: api.CommandStartChildWorkflow, StartChildWorkflow: &ch.cmd}, owner: ch}
	e.addEntry(&ch.entry)
	ch.cancelKey = c.scope.onCancel(ch)
	f.st.owner = ch
	return f
}

// SignalExternalWorkflow sends a signal to another run (runID empty: its
// current run). The future resolves once the signal is recorded, with
// ErrSignalNotDelivered when no open run had that workflow id.
func SignalExternalWorkflow(ctx Context, workflowID, runID, signalName string, arg any) Future[struct{}] {
	c, e := mutating(ctx)
	if c.scope.canceled {
		return readyFuture[struct{}](e, &CanceledError{Message: "context canceled before the signal was sent"})
	}
	input, err := e.conv.ToPayload(arg)
	if err != nil {
		return readyFuture[struct{}](e, err)
	}
	f := &signalFuture{future: future[struct{}]{e: e}, workflowID: workflowID}
	e.addCommand(api.Command{Type: api.CommandSignalExternalWorkflow, SignalExternalWorkflow: &api.SignalExternalWorkflowCommand{
		WorkflowID: workflowID, RunID: runID, SignalName: signalName, Input: input}}, f)
	return f
}

// signalFuture resolves when its SignalExternalSent event is known.
type signalFuture struct {
	future[struct{}]
	workflowID string
}

func (f *signalFuture) onCommandMatched(ev *history.Event) {
	if ev.Attrs.(*history.SignalExternalSent).Delivered {
		f.st.setValue(nil, nil)
	} else {
		f.st.setValue(nil, fmt.Errorf("%w: %s", ErrSignalNotDelivered, f.workflowID))
	}
}

// GetSignalChannel returns the channel of the signals named name. Signals
// are buffered from the start of the run whether or not anyone listens.
func GetSignalChannel[T any](ctx Context, name string) ReceiveChannel[T] {
	e := mustCtx(ctx).e
	return signalView[T]{e: e, ch: e.signalChannel(name)}
}

// queryHandler is a registered query handler: func([I]) ([O,] error).
type queryHandler struct {
	fn      reflect.Value
	inType  reflect.Type
	outType reflect.Type
}

func (h *queryHandler) call(conv Converter, args history.Payload) (history.Payload, error) {
	var in []reflect.Value
	if h.inType != nil {
		v := reflect.New(h.inType)
		if err := conv.FromPayload(args, v.Interface()); err != nil {
			return history.Payload{}, err
		}
		in = append(in, v.Elem())
	}
	out := h.fn.Call(in)
	if err, _ := out[len(out)-1].Interface().(error); err != nil {
		return history.Payload{}, err
	}
	if h.outType == nil {
		return history.Payload{}, nil
	}
	return conv.ToPayload(out[0].Interface())
}

// SetQueryHandler registers handler for queries of type name, replacing
// any earlier one. handler has the shape func([I]) ([O,] error); it runs
// against the workflow's state between tasks and must not block or change
// state (no activities, timers, channel sends).
func SetQueryHandler(ctx Context, name string, handler any) error {
	e := mustCtx(ctx).e
	v := reflect.ValueOf(handler)
	if handler == nil || v.Kind() != reflect.Func {
		return fmt.Errorf("sdk: query handler %q must be a function, got %T", name, handler)
	}
	t := v.Type()
	if t.IsVariadic() || t.NumIn() > 1 || t.NumOut() < 1 || t.NumOut() > 2 || t.Out(t.NumOut()-1) != errorType {
		return fmt.Errorf("sdk: query handler %q has signature %s; want func([I]) ([O,] error)", name, t)
	}
	if name == "" || name == QueryTypeStackTrace {
		return fmt.Errorf("sdk: query type %q is reserved", name)
	}
	h := &queryHandler{fn: v}
	if t.NumIn() == 1 {
		h.inType = t.In(0)
	}
	if t.NumOut() == 2 {
		h.outType = t.Out(0)
	}
	e.queries[name] = h
	return nil
}

// SideEffect runs fn once, records its result in history, and returns the
// recorded value on every replay: use it for nondeterministic values (a
// UUID, a random number). fn must not fail; it must not call workflow
// functions that block.
func SideEffect[T any](ctx Context, fn func(ctx Context) T) T {
	_, e := mutating(ctx)
	e.seqSideEffect++
	id := strconv.FormatInt(e.seqSideEffect, 10)
	var p history.Payload
	if e.replaying {
		m := e.findMarker(MarkerSideEffect, id)
		if m == nil {
			e.nondeterministic("MarkerRecorded " + MarkerSideEffect + "/" + id)
		}
		p = m.Data
	} else {
		p = mustEncode(e, fn(ctx), "SideEffect")
	}
	e.addCommand(api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: MarkerSideEffect, ID: id, Data: p}}, nil)
	return mustDecode[T](e, p, "SideEffect")
}

// MutableSideEffect runs fn on every call while deciding live, and records
// its result only when it differs from the last recorded value for id
// (compared with equals, or by encoding when equals is nil). Replay returns
// the recorded values. Use it for configuration that may change while the
// run lives.
func MutableSideEffect[T any](ctx Context, id string, fn func(ctx Context) T, equals func(a, b T) bool) T {
	_, e := mutating(ctx)
	record := func(p history.Payload) T {
		e.mutables[id] = p
		e.addCommand(api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: MarkerMutableSideEffect, ID: id, Data: p}}, nil)
		return mustDecode[T](e, p, "MutableSideEffect")
	}
	if e.replaying {
		if m := e.findMarker(MarkerMutableSideEffect, id); m != nil {
			return record(m.Data)
		}
		p, ok := e.mutables[id]
		if !ok {
			e.nondeterministic("MarkerRecorded " + MarkerMutableSideEffect + "/" + id)
		}
		return mustDecode[T](e, p, "MutableSideEffect")
	}
	v := fn(ctx)
	p := mustEncode(e, v, "MutableSideEffect")
	if old, ok := e.mutables[id]; ok {
		if equals != nil {
			if prev := mustDecode[T](e, old, "MutableSideEffect"); equals(prev, v) {
				return prev
			}
		} else if samePayload(old, p) {
			return mustDecode[T](e, old, "MutableSideEffect")
		}
	}
	return record(p)
}

func mustEncode(e *Execution, v any, what string) history.Payload {
	p, err := e.conv.ToPayload(v)
	if err != nil {
		panic(fmt.Errorf("sdk: %s: %w", what, err))
	}
	return p
}

func mustDecode[T any](e *Execution, p history.Payload, what string) T {
	var v T
	if err := e.conv.FromPayload(p, &v); err != nil {
		panic(fmt.Errorf("sdk: %s: %w", what, err))
	}
	return v
}

// Version is a code version returned by GetVersion.
type Version int

// DefaultVersion is the version of code that ran before GetVersion was
// added for a change.
const DefaultVersion Version = -1

// GetVersion lets code change safely while runs are open. The first call
// for changeID in a live decision records maxSupported and returns it;
// replay returns the recorded version, or DefaultVersion when the history
// (written by older code) has no marker for changeID at that decision. A
// version outside [minSupported, maxSupported] panics: the task fails until
// code that supports it is deployed.
//
//	v := sdk.GetVersion(ctx, "fraud-check", sdk.DefaultVersion, 1)
//	if v == 1 { /* new code */ } else { /* old code */ }
func GetVersion(ctx Context, changeID string, minSupported, maxSupported Version) Version {
	_, e := mutating(ctx)
	v, ok := e.versions[changeID]
	if !ok {
		switch {
		case !e.replaying:
			v = maxSupported
			e.addCommand(api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{
				Name: MarkerVersion, ID: changeID, Data: mustEncode(e, int64(v), "GetVersion")}}, nil)
		default:
			v = DefaultVersion
			if m := e.findMarker(MarkerVersion, changeID); m != nil {
				v = Version(mustDecode[int64](e, m.Data, "GetVersion"))
				e.addCommand(api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{
					Name: MarkerVersion, ID: changeID, Data: m.Data}}, nil)
			}
		}
		e.versions[changeID] = v
	}
	if v < minSupported || v > maxSupported {
		panic(fmt.Sprintf("sdk: GetVersion(%q): version %d is outside the supported range [%d, %d]", changeID, v, minSupported, maxSupported))
	}
	return v
}

// RecordMarker records value in history under (name, id), as a
// MarkerRecorded event, for what reads histories (the agent kit records
// its approvals this way, and the transcript API shows them). Replay
// matches it by name and id. Names starting with "cairn." are the kit's.
func RecordMarker(ctx Context, name, id string, value any) error {
	_, e := mutating(ctx)
	p, err := toPayload(e.conv, value) // a history.Payload is recorded as it is
	if err != nil {
		return err
	}
	e.addCommand(api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: name, ID: id, Data: p}}, nil)
	return nil
}

// SetBudget sets the run's budget for metered activities (model calls):
// when the run has used it up, the next one is held and the run is paused
// until a person raises the budget or stops the run (see docs/agents.md).
// The engine records it as BudgetUpdated; a person's later change wins
// until workflow code sets it again.
func SetBudget(ctx Context, b history.Budget) {
	_, e := mutating(ctx)
	e.addCommand(api.Command{Type: api.CommandSetBudget, SetBudget: &api.SetBudgetCommand{Budget: b}}, nil)
}

// NewContinueAsNewError returns the error a workflow returns to continue as
// a new run of wf (a workflow function or its registered name) with input.
// Adjust TaskQueue or timeouts on the returned *ContinueAsNewError.
func NewContinueAsNewError(ctx Context, wf any, input any) error {
	e := mustCtx(ctx).e
	name := e.reg.nameOf(wf)
	if name == "" {
		return fmt.Errorf("sdk: NewContinueAsNewError: %T is neither a workflow function nor a name", wf)
	}
	p, err := e.conv.ToPayload(input)
	if err != nil {
		return err
	}
	return &ContinueAsNewError{WorkflowType: name, Input: p}
}
