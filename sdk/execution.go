package sdk

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// DefaultDeadlockTimeout is ExecutionOptions.DeadlockTimeout's default.
const DefaultDeadlockTimeout = time.Second

// ExecutionOptions configure an Execution.
type ExecutionOptions struct {
	// Converter encodes inputs, results, signals and markers. Default:
	// DefaultConverter() (canonical msgpack).
	Converter Converter
	// Logger is the base of GetLogger's logger. Default: no logging.
	Logger *zerolog.Logger
	// DeadlockTimeout bounds how long a workflow coroutine may run without
	// reaching an SDK call before the task fails with a *DeadlockError.
	// Default DefaultDeadlockTimeout (1 s).
	DeadlockTimeout time.Duration
	// OnDecision, when set, is called after every decision the code makes
	// (each replayed one and the live one that ends a task), for
	// step-by-step traces such as the replayer's. It runs on the task's
	// goroutine while the coroutines are parked; it must not call the
	// Execution's methods.
	OnDecision func(d *DecisionTrace)
}

// DecisionTrace describes one decision for ExecutionOptions.OnDecision.
type DecisionTrace struct {
	// Replayed is true for a decision recorded in history that the code
	// re-ran, false for the live decision that ends a task.
	Replayed bool
	// CompletedEventID is the WorkflowTaskCompleted event of a replayed
	// decision.
	CompletedEventID int64
	// Events are the events delivered to the code for this decision.
	Events []history.Event
	// Commands are the commands the decision produced; a replayed
	// decision's were matched against the recorded command events.
	Commands []api.Command
	// Err is the error that failed the task at this decision, if any.
	Err error

	e *Execution
}

// Stacks returns the stack of every live workflow coroutine, as the
// QueryTypeStackTrace query does. It is valid only during the OnDecision
// call.
func (d *DecisionTrace) Stacks() string { return d.e.stackTrace() }

// Validate reports invalid options.
func (o *ExecutionOptions) Validate() error {
	if o.DeadlockTimeout < 0 {
		return fmt.Errorf("sdk: ExecutionOptions.DeadlockTimeout must not be negative, got %s", o.DeadlockTimeout)
	}
	return nil
}

// ExecutionStats counts what an Execution did, for workers' metrics and
// tests.
type ExecutionStats struct {
	// Tasks is the number of tasks processed successfully.
	Tasks int64
	// Events is the number of events processed.
	Events int64
	// ReplayedDecisions counts workflow tasks whose recorded decision the
	// code re-ran (replay), as opposed to deciding live.
	ReplayedDecisions int64
	// ReplayedFromStart counts tasks that started at event 1 and replayed
	// at least one recorded decision: the rebuild of a run's state from
	// its full history (a cache miss, a restart). A sticky Execution that
	// keeps up task by task leaves it at 0.
	ReplayedFromStart int64
}

// Execution runs one workflow run's code against its history. A worker
// creates one per run (NewExecution), feeds it each workflow task
// (ProcessTask), answers queries from it (Query), and closes it when the run
// leaves its cache (Close). Its methods are safe for concurrent use but
// serialise: only one runs at a time.
type Execution struct {
	mu     sync.Mutex
	reg    *Registry
	def    *WorkflowDefinition
	conv   Converter
	opts   ExecutionOptions
	logger *zerolog.Logger // built by getLogger

	info WorkflowInfo // static part; GetInfo fills in the rest

	// Scheduler.
	corosMu      sync.Mutex
	coros        []*coroutine // in creation order; guarded by corosMu
	current      *coroutine
	deadlock     *time.Timer
	closing      atomic.Bool
	fatal        error
	rootReturned bool

	// Position in history.
	lastEventID  int64
	inbox        []history.Event // delivered events the code has not seen yet
	times        []eventTime     // event times since the last decision boundary
	liveDecision bool            // the last decision was made live; its WorkflowTaskCompleted is due
	liveSeen     int64           // the last event the live decision saw

	// The decision being made.
	delivered       []history.Event // events delivered to it, kept only for OnDecision
	replaying       bool
	replayCmds      []history.Event // the recorded command events of the decision being replayed
	replayUsed      []bool
	replayWTC       int64
	now             time.Time
	historyLen      int64
	historySize     int64 // the size of every event processed (WorkflowInfo.HistorySize)
	historySeenSize int64 // the size of the events the current decision has seen
	suggestCANBytes int64
	decisionAttempt int32
	taskAttempt     int32
	taskSuggestCAN  bool
	suggestCANAt    int64
	pending         []*commandEntry

	// Workflow state.
	rootScope       *cancelScope
	listenerSeq     uint64
	cancelRequested bool
	workflowClosed  bool
	seqActivity     int64
	seqTimer        int64
	seqChild        int64
	seqSideEffect   int64
	seqCoroutine    int64
	activities      map[int64]*activityState // by scheduled event id; nil once resolved
	timers          map[string]*timerState   // by timer id; nil once resolved
	children        map[int64]*childState    // by initiated event id; nil once resolved
	signals         map[string]*signalChannel
	queries         map[string]*queryHandler
	updates         map[string]*updateHandler
	updatesRunning  int // accepted updates whose handler has not returned
	versions        map[string]Version
	mutables        map[string]history.Payload
	actDefs         map[string]*ActivityDefinition // registry lookups, misses included
	fnNames         map[uintptr]string             // function entry → registered or derived name
	inQuery         bool

	broken error // a failed task left the Execution unusable
	closed bool
	stats  ExecutionStats
}

// unknownWorkflowType is the ErrUnknownWorkflowType of typ: it names the
// types reg has.
func unknownWorkflowType(reg *Registry, typ string) error {
	known := "none is"
	if types := reg.WorkflowTypes(); len(types) > 0 {
		known = "registered: " + strings.Join(types, ", ")
	}
	return fmt.Errorf("%w %q: it is not registered (%s)", ErrUnknownWorkflowType, typ, known)
}

// NewExecution prepares an Execution for the run task names; task is used
// for the run's identity only — pass it to ProcessTask next. It fails with
// ErrUnknownWorkflowType when the registry has no such workflow.
func NewExecution(reg *Registry, task *api.WorkflowTask, opts ExecutionOptions) (*Execution, error) {
	if reg == nil || task == nil {
		return nil, errors.New("sdk: NewExecution needs a registry and a task")
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	def, ok := reg.Workflow(task.WorkflowType)
	if !ok {
		return nil, unknownWorkflowType(reg, task.WorkflowType)
	}
	if opts.Converter == nil {
		opts.Converter = DefaultConverter()
	}
	if opts.DeadlockTimeout == 0 {
		opts.DeadlockTimeout = DefaultDeadlockTimeout
	}
	e := &Execution{
		reg:        reg,
		def:        def,
		conv:       opts.Converter,
		opts:       opts,
		activities: map[int64]*activityState{},
		timers:     map[string]*timerState{},
		children:   map[int64]*childState{},
		signals:    map[string]*signalChannel{},
		queries:    map[string]*queryHandler{},
		updates:    map[string]*updateHandler{},
		versions:   map[string]Version{},
		mutables:   map[string]history.Payload{},
		actDefs:    map[string]*ActivityDefinition{},
		fnNames:    map[uintptr]string{},
		info: WorkflowInfo{
			WorkflowID:   task.WorkflowID,
			RunID:        task.RunID,
			WorkflowType: task.WorkflowType,
			TaskQueue:    task.TaskQueue,
		},
	}
	e.rootScope = newCancelScope(e, nil)
	return e, nil
}

// getLogger returns the run's logger, built on first use: most workflows
// never log, and a contextual zerolog logger costs an allocation.
func (e *Execution) getLogger() *zerolog.Logger {
	if e.logger == nil {
		base := zerolog.Nop()
		if e.opts.Logger != nil {
			base = *e.opts.Logger
		}
		l := base.With().Str("workflow_id", e.info.WorkflowID).Str("run_id", e.info.RunID).
			Str("workflow_type", e.info.WorkflowType).Logger().Hook(replayHook{e})
		e.logger = &l
	}
	return e.logger
}

// replayHook silences workflow logging while the code replays decisions
// that are already recorded.
type replayHook struct{ e *Execution }

func (h replayHook) Run(ev *zerolog.Event, _ zerolog.Level, _ string) {
	if h.e.replaying {
		ev.Discard()
	}
}

// ProcessTask applies a workflow task's new events and returns the
// commands of the live decision. For a new Execution the events must start
// at event 1; afterwards each task must continue where the last ended
// (sticky execution). Recorded decisions in the events are replayed: the
// code re-runs and its commands are matched against the recorded command
// events (a mismatch is a *NondeterminismError).
//
// On ErrHistoryGap nothing changed: build a new Execution from the full
// history. Any other error (*PanicError, *NondeterminismError,
// *DeadlockError …) leaves the Execution unusable: report the task failed
// (see TaskFailure) and Close the Execution. If the engine refuses the
// returned commands, the Execution is stale too: Close it.
func (e *Execution) ProcessTask(task *api.WorkflowTask) ([]api.Command, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return nil, ErrClosed
	case e.broken != nil:
		return nil, e.broken
	case task == nil:
		return nil, errors.New("sdk: nil workflow task")
	}
	if err := e.checkTask(task); err != nil {
		return nil, err
	}
	e.taskAttempt = task.Attempt
	e.taskSuggestCAN = task.ContinueAsNewSuggested
	if task.SuggestContinueAsNewAt > 0 {
		e.suggestCANAt = task.SuggestContinueAsNewAt
	}
	if task.SuggestContinueAsNewBytes > 0 {
		e.suggestCANBytes = task.SuggestContinueAsNewBytes
	}
	cmds, err := e.process(task.Events)
	if err != nil {
		e.broken = err
		return nil, err
	}
	e.stats.Tasks++
	return cmds, nil
}

// checkTask verifies that the task continues this Execution's history,
// before anything changes.
func (e *Execution) checkTask(task *api.WorkflowTask) error {
	evs := task.Events
	next := e.lastEventID + 1
	if len(evs) == 0 {
		if task.FirstEventID > next {
			return fmt.Errorf("%w: task starts at event %d, execution has seen events up to %d", ErrHistoryGap, task.FirstEventID, e.lastEventID)
		}
		return nil
	}
	first := evs[0].ID
	if task.FirstEventID != 0 && task.FirstEventID != first {
		return fmt.Errorf("%w: task says its first event is %d but carries event %d", ErrHistoryGap, task.FirstEventID, first)
	}
	if first != next {
		return fmt.Errorf("%w: task starts at event %d, execution has seen events up to %d", ErrHistoryGap, first, e.lastEventID)
	}
	for i := range evs {
		if evs[i].ID != first+int64(i) {
			return fmt.Errorf("%w: task events are not contiguous at event %d", ErrHistoryGap, evs[i].ID)
		}
		if evs[i].Attrs == nil {
			return fmt.Errorf("sdk: event %d has no attributes", evs[i].ID)
		}
	}
	if first == 1 {
		if _, ok := evs[0].Attrs.(*history.WorkflowStarted); !ok {
			return fmt.Errorf("sdk: event 1 is %s, not WorkflowStarted", evs[0].Type())
		}
	}
	if !e.liveDecision {
		return nil
	}
	for i := range evs {
		switch a := evs[i].Attrs.(type) {
		case *history.WorkflowTaskCompleted:
			if a.SeenEventID != 0 && a.SeenEventID != e.liveSeen {
				return fmt.Errorf("%w: the decision recorded at event %d had seen events up to %d, this execution decided having seen %d",
					ErrHistoryGap, evs[i].ID, a.SeenEventID, e.liveSeen)
			}
			return nil
		case *history.WorkflowTaskFailed:
			return fmt.Errorf("%w: this execution's last decision was not recorded (workflow task failed at event %d)", ErrHistoryGap, evs[i].ID)
		}
	}
	return fmt.Errorf("%w: this execution's last decision was not recorded", ErrHistoryGap)
}

func (e *Execution) process(evs []history.Event) ([]api.Command, error) {
	fromStart := len(evs) > 0 && evs[0].ID == 1
	replayed := e.stats.ReplayedDecisions
	for i := 0; i < len(evs); {
		ev := &evs[i]
		e.historySize += e.eventSize(ev)
		e.times = append(e.times, eventTime{ev.ID, ev.Time, e.historySize})
		switch a := ev.Attrs.(type) {
		case *history.WorkflowTaskCompleted:
			j := i + 1
			for j < len(evs) && isCommandEvent(&evs[j]) {
				j++
			}
			group := evs[i+1 : j]
			if !e.liveDecision {
				seen := a.SeenEventID
				if seen <= 0 || seen >= ev.ID {
					seen = ev.ID - 1
				}
				e.replaying = true
				e.replayCmds, e.replayUsed, e.replayWTC = group, nil, ev.ID
				e.decisionAttempt = a.Attempt
				e.decide(seen)
				e.replayCmds, e.replayUsed = nil, nil
				if e.fatal != nil {
					e.traceDecision(true, ev.ID, e.pendingCommands(), e.fatal)
					return nil, e.fatal
				}
				e.stats.ReplayedDecisions++
				var cmds []api.Command
				if e.opts.OnDecision != nil {
					cmds = e.pendingCommands() // match clears them
				}
				err := e.match(ev.ID, group)
				e.traceDecision(true, ev.ID, cmds, err)
				if err != nil {
					return nil, err
				}
			} else if err := e.match(ev.ID, group); err != nil {
				return nil, err
			}
			e.liveDecision = false
			e.lastEventID = evs[j-1].ID
			for k := i + 1; k < j; k++ {
				e.historySize += e.eventSize(&evs[k])
			}
			e.times = append(e.times[:0], eventTime{evs[j-1].ID, evs[j-1].Time, e.historySize})
			i = j
			continue
		case *history.ActivityStarted, *history.ActivityOutcomeUnknown, *history.ActivityDuplicateDetected, *history.ActivityLateReport, *history.ActivityKeyed,
			*history.WorkflowReset, *history.ActivityHeld,
			*history.WorkflowTaskFailed:
			// No meaning to workflow code.
		default:
			if isCommandEvent(ev) {
				return nil, &NondeterminismError{EventID: ev.ID, Recorded: describeEvent(ev),
					Produced: "nothing (a command event must follow a WorkflowTaskCompleted)"}
			}
			e.inbox = append(e.inbox, *ev)
		}
		e.lastEventID = ev.ID
		i++
	}
	e.stats.Events += int64(len(evs))
	if fromStart && e.stats.ReplayedDecisions > replayed {
		e.stats.ReplayedFromStart++
	}
	e.replaying = false
	e.decisionAttempt = e.taskAttempt
	if !e.decide(e.lastEventID) {
		e.traceDecision(false, 0, e.pendingCommands(), e.fatal)
		return nil, e.fatal
	}
	if e.workflowClosed {
		return nil, nil
	}
	cmds := make([]api.Command, 0, len(e.pending))
	for _, p := range e.pending {
		if !p.dropped {
			p.sent = true
			cmds = append(cmds, p.cmd)
		}
	}
	e.liveDecision = true
	e.liveSeen = e.lastEventID
	e.traceDecision(false, 0, cmds, nil)
	return cmds, nil
}

// pendingCommands returns the current decision's commands.
func (e *Execution) pendingCommands() []api.Command {
	var cmds []api.Command
	for _, p := range e.pending {
		if !p.dropped {
			cmds = append(cmds, p.cmd)
		}
	}
	return cmds
}

// traceDecision reports the decision just made to OnDecision, if set.
func (e *Execution) traceDecision(replayed bool, wtc int64, cmds []api.Command, err error) {
	if e.opts.OnDecision == nil {
		return
	}
	e.opts.OnDecision(&DecisionTrace{Replayed: replayed, CompletedEventID: wtc, Events: e.delivered, Commands: cmds, Err: err, e: e})
	e.delivered = nil
}

// decide delivers the events up to seen and runs the code until it blocks.
// It reports false on a fatal error.
func (e *Execution) decide(seen int64) bool {
	e.applyInbox(seen)
	if e.fatal != nil {
		return false
	}
	if e.workflowClosed {
		return true
	}
	e.historyLen = seen
	e.now, e.historySeenSize = e.timeOf(seen)
	e.runCoroutines()
	return e.fatal == nil
}

// timeOf returns the time of event id and the history's size up to it.
func (e *Execution) timeOf(id int64) (time.Time, int64) {
	for i := len(e.times) - 1; i >= 0; i-- {
		if e.times[i].id <= id {
			return e.times[i].t, e.times[i].size
		}
	}
	if len(e.times) > 0 {
		return e.times[0].t, e.times[0].size
	}
	return e.now, e.historySeenSize
}

// eventSize is an event's part of WorkflowInfo.HistorySize: the length of
// its envelope (history.EventSize) as the code receives it — payloads it
// decodes resolved, payloads the runtime only compares kept as references
// (ResolveEventPayloads) — the same on every replay of the history.
func (e *Execution) eventSize(ev *history.Event) int64 { return history.EventSize(*ev) }

// match pairs the decision's commands with the command events recorded
// after its WorkflowTaskCompleted, one for one and in order.
func (e *Execution) match(wtcID int64, group []history.Event) error {
	k := 0
	for _, p := range e.pending {
		if p.dropped {
			continue
		}
		if p.cmd.Type == api.CommandRequestCancelChildWorkflow && (k >= len(group) || !commandMatches(&p.cmd, &group[k])) {
			// A history recorded before a parent could cancel its child
			// (an SDK that sent nothing when the child's context was
			// canceled): the request was not made then, and is not now.
			// The child's outcome is in the history as it happened.
			p.dropped = true
			continue
		}
		if k >= len(group) {
			return &NondeterminismError{EventID: wtcID + int64(k) + 1,
				Recorded: fmt.Sprintf("no command event (the decision completed at event %d recorded %d)", wtcID, len(group)),
				Produced: describeCommand(&p.cmd)}
		}
		ev := &group[k]
		if !commandMatches(&p.cmd, ev) {
			return &NondeterminismError{EventID: ev.ID, Recorded: describeEvent(ev), Produced: describeCommand(&p.cmd)}
		}
		p.matched = true
		if p.owner != nil {
			p.owner.onCommandMatched(ev)
		}
		k++
	}
	if k < len(group) {
		return &NondeterminismError{EventID: group[k].ID, Recorded: describeEvent(&group[k]), Produced: "nothing"}
	}
	clear(e.pending)
	e.pending = e.pending[:0]
	return nil
}

// addCommand appends a command to the current decision.
func (e *Execution) addCommand(cmd api.Command, owner commandOwner) *commandEntry {
	c := &commandEntry{cmd: cmd, owner: owner}
	e.addEntry(c)
	return c
}

// addEntry appends a prepared command entry to the current decision.
func (e *Execution) addEntry(c *commandEntry) {
	if e.inQuery {
		panic(errQueryMutation)
	}
	if e.closing.Load() {
		c.dropped = true
		return
	}
	e.pending = append(e.pending, c)
}

func (e *Execution) setFatal(err error) {
	if e.fatal == nil {
		e.fatal = err
	}
}

// nondeterministic fails the task because the code asked history for a
// value it does not hold at this point, and parks the coroutine.
func (e *Execution) nondeterministic(produced string) {
	k := 0
	for _, p := range e.pending {
		if !p.dropped {
			k++
		}
	}
	err := &NondeterminismError{EventID: e.replayWTC + int64(k) + 1, Produced: produced,
		Recorded: fmt.Sprintf("no such event (the decision completed at event %d recorded %d)", e.replayWTC, len(e.replayCmds))}
	if k < len(e.replayCmds) {
		ev := &e.replayCmds[k]
		err.EventID, err.Recorded = ev.ID, describeEvent(ev)
	}
	e.setFatal(err)
	e.blockForever()
}

// findMarker returns the first unused marker of the decision being replayed
// with the given name and id.
func (e *Execution) findMarker(name, id string) *history.MarkerRecorded {
	for i := range e.replayCmds {
		m, ok := e.replayCmds[i].Attrs.(*history.MarkerRecorded)
		if !ok || m.Name != name || m.ID != id || (e.replayUsed != nil && e.replayUsed[i]) {
			continue
		}
		if e.replayUsed == nil {
			e.replayUsed = make([]bool, len(e.replayCmds))
		}
		e.replayUsed[i] = true
		return m
	}
	return nil
}

// Query answers a query from the run's current state with the handler
// registered by SetQueryHandler (or the built-in QueryTypeStackTrace). It
// neither produces commands nor advances the run. Unknown types return
// ErrUnknownQuery; a handler's error is returned as is, its panic as a
// *PanicError.
func (e *Execution) Query(name string, args history.Payload) (result history.Payload, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return history.Payload{}, ErrClosed
	case e.broken != nil:
		return history.Payload{}, e.broken
	}
	if name == QueryTypeStackTrace {
		return e.conv.ToPayload(e.stackTrace())
	}
	h, ok := e.queries[name]
	if !ok {
		names := make([]string, 0, len(e.queries))
		for n := range e.queries {
			names = append(names, n)
		}
		slices.Sort(names)
		return history.Payload{}, fmt.Errorf("%w %q (known: %s)", ErrUnknownQuery, name, strings.Join(append(names, QueryTypeStackTrace), ", "))
	}
	e.inQuery = true
	defer func() {
		e.inQuery = false
		if r := recover(); r != nil {
			err = newPanicError(r, stackOf())
		}
	}()
	return h.call(e.conv, args)
}

// stackTrace renders every live coroutine's stack.
func (e *Execution) stackTrace() string {
	var b strings.Builder
	e.corosMu.Lock()
	defer e.corosMu.Unlock()
	for _, c := range e.coros {
		if c.finished {
			continue
		}
		fmt.Fprintf(&b, "coroutine %s:\n%s\n\n", c.name, goroutineStack(c.gid))
	}
	return b.String()
}

// Close ends the Execution: every workflow coroutine is unwound (its
// deferred calls run; workflow calls inside them return at once or end the
// coroutine) and its goroutine exits. A coroutine stuck outside the SDK
// (see DeadlockError) cannot be unwound: it is abandoned, and exits at its
// next SDK call if it ever gets there. Close is idempotent.
func (e *Execution) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.closed = true
	e.unwind()
	if e.deadlock != nil {
		e.deadlock.Stop()
	}
}

// LastEventID returns the id of the last event processed: the next task
// must start at LastEventID()+1.
func (e *Execution) LastEventID() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastEventID
}

// Stats returns the Execution's counters.
func (e *Execution) Stats() ExecutionStats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stats
}

// WorkflowClosed reports whether the run has closed, or will close when the
// engine accepts the last decision (the workflow function has returned):
// the Execution will produce no more commands, so there is no point caching
// it.
func (e *Execution) WorkflowClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.workflowClosed || e.rootReturned
}
