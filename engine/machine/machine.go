package machine

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Machine is the pure run state machine: (run state, input, now) → (new
// events, new state, what to dispatch, which deadlines to arm, what other
// runs it touches). It starts no goroutine, reads no clock, and does no I/O
// but one read, through Occurrence, when it assigns an idempotency key;
// the service (package engine) owns the store, the locks and the queues
// and runs every input through a Machine inside one store transaction.
//
// Its fields are its configuration, set before the first input and not
// changed after; what it needs of the service comes in as functions
// (NewRunID, Occurrence). A Machine holds no state of its own: one serves
// any number of runs, from several goroutines at once when those functions
// allow it, as long as each run state is used by one goroutine at a time.
//
// Every input method mutates the state it is given and returns an Output.
// On error nothing in Output is meaningful and the caller must discard the
// state (the service always hands the machine a Clone).
type Machine struct {
	// Limits bound what one run may hold; they must be filled
	// (Limits.FillDefaults).
	Limits Limits
	// Defaults fill unset timeouts and policies; they must be filled
	// (Defaults.FillDefaults).
	Defaults Defaults
	// DriftMargin is added to a lost attempt's lease deadline before the
	// engine treats it as unable to act (engine.Options.LeaseDriftMargin).
	DriftMargin time.Duration
	// NewRunID returns a fresh run id, for a child or the next run of a
	// continue-as-new (random in the service, a counter in tests).
	NewRunID func() string
	// Pricing prices reported usage (cost 0 for a model it lacks).
	Pricing Pricing
	// Occurrence returns the committed count of a run's occurrence counter
	// okey (OccurrenceKey; 0 when there is none): the one record the
	// machine reads, when it assigns an idempotency key. The service reads
	// it from the store (engine/occurrences.go), and an error fails the
	// input; nil means none is committed (a machine whose states live in
	// memory only).
	Occurrence func(ref history.RunRef, okey string) (int32, error)
}

// DeadlineKind names what a deadline is for.
type DeadlineKind uint8

// The deadline kinds.
const (
	DeadlineUserTimer DeadlineKind = iota + 1
	DeadlineActivityLease
	DeadlineScheduleToStart
	DeadlineScheduleToClose
	DeadlineActivityRetry
	DeadlineWFTTimeout
	DeadlineWFTBackoff
	DeadlineStickyFallback
	DeadlineRunTimeout
	DeadlineExecutionTimeout
	// DeadlineQuiet: the attempts that lost their lease can no longer act;
	// the activity's lookup or next attempt may be dispatched.
	DeadlineQuiet
)

// Deadline is a moment at which the machine wants to be told the time
// (Machine.Fire). Deadlines are hints: Fire checks that the deadline still
// applies, so stale ones cost nothing.
type Deadline struct {
	At    time.Time
	Kind  DeadlineKind
	ID    int64  // scheduled event id for activity deadlines
	Name  string // timer id for user timers
	Epoch int64  // lease epoch, attempt or schedule sequence it belongs to
}

// Output is what one input produced.
type Output struct {
	// Events are the new events, numbered from the state's former NextEventID.
	Events []history.Event
	// WFTReady: enqueue the run's workflow task.
	WFTReady bool
	// ActivitiesReady: enqueue these activities (scheduled event ids).
	ActivitiesReady []int64
	// Deadlines to arm.
	Deadlines []Deadline
	// Closed: the run closed with this input.
	Closed bool
	// ChildStarts are children to start in the same transaction.
	ChildStarts []ChildStart
	// SignalsOut are signals to deliver in the same transaction.
	SignalsOut []SignalOut
	// ContinueAsNew is the next run to start in the same transaction.
	ContinueAsNew *StartParams
	// CloseChildren are open children whose parent-close policy applies.
	CloseChildren []ChildInfo
	// CancelChildren are open children the run asked to cancel
	// (ChildWorkflowCancelRequested): each child run is to get a cancel
	// request in the same transaction.
	CancelChildren []ChildCancel
	// Ledger lists effects-ledger changes (idempotency keys touched).
	Ledger []LedgerChange
	// Reports are the judged late reports this input recorded (logged and
	// counted once committed).
	Reports []api.EffectReport
	// Duplicate is set when a stale attempt proved an effect happened twice.
	Duplicate *history.ActivityDuplicateDetected
	// Usage lists the priced usage the input reported (for the workflow
	// id's ledger).
	Usage []history.Usage
}

// ChildStart is a child run to start on behalf of a parent.
type ChildStart struct {
	Params StartParams
}

// ChildCancel is a parent's request to cancel one of its open children.
type ChildCancel struct {
	WorkflowID string
	RunID      string
	// Reason and Identity go into the child's WorkflowCancelRequested.
	Reason   string
	Identity string
}

// SignalOut is a signal the run sends to another.
type SignalOut struct {
	WorkflowID string
	RunID      string
	Name       string
	Input      history.Payload
	Identity   string
	// SentEventID is the sender's SignalExternalSent event: with the
	// sender's run it names this signal, so that a delivery sent again
	// (to a run another server serves) is recognised.
	SentEventID int64
}

// ErrUnhandledEvents is returned by CompleteWorkflowTask when the commands
// close the run but events arrived while the task ran: the code must see
// them first. The task is rescheduled; nothing is written.
var ErrUnhandledEvents = errors.New("machine: new events arrived while the workflow task ran")

type transition struct {
	m   *Machine
	st  *RunState
	now time.Time
	out Output
	// retryAfter, when positive, is the delay the failed attempt asked
	// for before the next one.
	retryAfter time.Duration
	// err is the first failure to read what the transition needs (an
	// occurrence count): the input fails with it.
	err error
}

func (m *Machine) begin(st *RunState, now time.Time) *transition {
	return &transition{m: m, st: st, now: now}
}

// add appends an event and returns its id.
func (t *transition) add(attrs history.Attributes) int64 {
	id := t.st.NextEventID
	t.st.NextEventID++
	t.out.Events = append(t.out.Events, history.Event{ID: id, Time: t.now, Attrs: attrs})
	return id
}

func (t *transition) deadline(d Deadline) {
	if d.At.IsZero() {
		return
	}
	t.out.Deadlines = append(t.out.Deadlines, d)
}

// needWFT schedules a workflow task unless one is scheduled or started.
func (t *transition) needWFT() {
	st := t.st
	if !st.Status.Open() || st.WFT.Scheduled {
		return
	}
	st.WFT.Scheduled = true
	if st.WFT.Attempt == 0 {
		st.WFT.Attempt = 1
	}
	if st.WFT.BackoffUntil.After(t.now) {
		t.deadline(Deadline{At: st.WFT.BackoffUntil, Kind: DeadlineWFTBackoff})
		return
	}
	t.out.WFTReady = true
}

// StartParams describe a new run.
type StartParams struct {
	Request           api.StartWorkflowRequest
	RunID             string
	FirstRunID        string
	Parent            *ParentRef
	ContinuedFrom     string
	ExecutionDeadline time.Time
	// ForkOf: the next run of a fork's run is the fork's too.
	ForkOf *ForkOrigin
}

// Start creates a run's state and its first event.
func (m *Machine) Start(p StartParams, now time.Time) (*RunState, Output) {
	req := p.Request
	st := &RunState{
		WorkflowID:       req.WorkflowID,
		RunID:            p.RunID,
		FirstRunID:       p.FirstRunID,
		WorkflowType:     req.WorkflowType,
		TaskQueue:        req.TaskQueue,
		Status:           api.StatusRunning,
		RequestID:        req.RequestID,
		StartTime:        now,
		ExecutionTimeout: req.ExecutionTimeout,
		RunTimeout:       req.RunTimeout,
		TaskTimeout:      req.TaskTimeout,
		NextEventID:      1,
		Parent:           p.Parent,
		Budget:           req.Budget,
		ForkOf:           p.ForkOf,
		TraceParent:      bounded(req.TraceParent, maxTraceParent),
		TraceState:       bounded(req.TraceState, maxTraceState),
		Retention:        req.Retention,
	}
	if st.FirstRunID == "" {
		st.FirstRunID = p.RunID
	}
	if st.TaskTimeout == 0 {
		st.TaskTimeout = m.Defaults.TaskTimeout
	}
	t := m.begin(st, now)
	started := &history.WorkflowStarted{
		WorkflowType: req.WorkflowType, TaskQueue: req.TaskQueue, Input: req.Input,
		ExecutionTimeout: req.ExecutionTimeout, RunTimeout: req.RunTimeout, TaskTimeout: st.TaskTimeout,
		ContinuedFromRunID: p.ContinuedFrom, FirstRunID: st.FirstRunID, Identity: req.Identity, Budget: req.Budget,
		TraceParent: st.TraceParent, TraceState: st.TraceState,
		Retention: req.Retention,
	}
	if p.Parent != nil {
		started.ParentWorkflowID = p.Parent.WorkflowID
		started.ParentRunID = p.Parent.RunID
		started.ParentInitiatedEventID = p.Parent.InitiatedEventID
	}
	t.add(started)
	st.ExecutionDeadline = p.ExecutionDeadline
	if st.ExecutionDeadline.IsZero() && req.ExecutionTimeout > 0 {
		st.ExecutionDeadline = now.Add(req.ExecutionTimeout)
	}
	if req.RunTimeout > 0 {
		st.RunDeadline = now.Add(req.RunTimeout)
	}
	t.deadline(Deadline{At: st.ExecutionDeadline, Kind: DeadlineExecutionTimeout})
	t.deadline(Deadline{At: st.RunDeadline, Kind: DeadlineRunTimeout})
	t.needWFT()
	return st, t.out
}

// The longest W3C trace context kept (a traceparent is 55 characters;
// tracestate is at most 32 entries of 256): anything longer is dropped, not
// stored, so that a caller cannot grow a run's state through it.
const (
	maxTraceParent = 128
	maxTraceState  = 512
)

// bounded is s, or empty when it is longer than max.
func bounded(s string, max int) string {
	if len(s) > max {
		return ""
	}
	return s
}

// Signal delivers a signal.
func (m *Machine) Signal(st *RunState, name string, input history.Payload, identity string, now time.Time) (Output, error) {
	if err := m.CanSignal(st); err != nil {
		return Output{}, err
	}
	t := m.begin(st, now)
	st.Signals++
	t.add(&history.SignalReceived{Name: name, Input: input, Identity: identity})
	t.needWFT()
	return t.out, nil
}

// RequestCancel records a cancel request (once).
func (m *Machine) RequestCancel(st *RunState, reason, identity string, now time.Time) (Output, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, err
	}
	t := m.begin(st, now)
	if st.CancelRequested {
		return t.out, nil
	}
	st.CancelRequested = true
	t.add(&history.WorkflowCancelRequested{Reason: reason, Identity: identity})
	t.needWFT()
	return t.out, nil
}

// Terminate closes the run at once.
func (m *Machine) Terminate(st *RunState, reason string, details history.Payload, identity string, now time.Time) (Output, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, err
	}
	t := m.begin(st, now)
	t.add(&history.WorkflowTerminated{Reason: reason, Details: details, Identity: identity})
	t.close(api.StatusTerminated, history.Payload{}, &history.Failure{Type: "Terminated", Message: reason, NonRetryable: true})
	return t.out, nil
}

// CanSignal reports why the run cannot take one more signal, if it cannot:
// it is closed, its history is full, or it has received MaxSignals.
func (m *Machine) CanSignal(st *RunState) error {
	if err := m.checkOpen(st); err != nil {
		return err
	}
	if m.Limits.MaxSignals > 0 && int(st.Signals) >= m.Limits.MaxSignals {
		return api.Errorf(api.ErrLimitExceeded, "workflow %q run %q has received %d signals, the limit (Limits.MaxSignals)",
			st.WorkflowID, st.RunID, st.Signals)
	}
	return m.checkGrowth(st, 1)
}

func (m *Machine) checkOpen(st *RunState) error {
	if !st.Status.Open() {
		return api.Errorf(api.ErrWorkflowClosed, "workflow %q run %q is %s", st.WorkflowID, st.RunID, st.Status)
	}
	return nil
}

// checkGrowth refuses inputs that would push the history past its limit.
func (m *Machine) checkGrowth(st *RunState, n int64) error {
	if m.Limits.MaxHistoryEvents > 0 && st.NextEventID-1+n > m.Limits.MaxHistoryEvents {
		return &historyFullError{msg: fmt.Sprintf("history of workflow %q run %q would exceed %d events (Limits.MaxHistoryEvents); continue as new",
			st.WorkflowID, st.RunID, m.Limits.MaxHistoryEvents)}
	}
	return nil
}

// historyFullError is the history limit refusing an input
// (api.ErrLimitExceeded). No retry of a workflow task can get past it: the
// history only grows.
type historyFullError struct{ msg string }

// Error implements error.
func (e *historyFullError) Error() string { return api.ErrLimitExceeded.Error() + ": " + e.msg }

// Unwrap makes the error an api.ErrLimitExceeded.
func (e *historyFullError) Unwrap() error { return api.ErrLimitExceeded }

// close ends the run.
func (t *transition) close(status api.Status, result history.Payload, failure *history.Failure) {
	st := t.st
	st.Status = status
	st.CloseTime = t.now
	st.Result = result
	st.Failure = failure
	st.WFT = WFTState{}
	st.Approvals = nil // a closed run waits for nobody
	t.out.Closed = true
	t.out.WFTReady = false
	for _, id := range sortedKeys(st.Children) {
		if c := st.Children[id]; c.ParentClosePolicy != history.ParentCloseAbandon && c.RunID != "" {
			t.out.CloseChildren = append(t.out.CloseChildren, *c)
		}
	}
}

// SuggestContinueAsNew reports whether the run's history is long enough to
// suggest continuing as new.
func (m *Machine) SuggestContinueAsNew(st *RunState) bool {
	return m.Limits.SuggestContinueAsNewAt > 0 && st.NextEventID-1 >= m.Limits.SuggestContinueAsNewAt
}

// backoff returns the wait before retry number attempt+1.
func (m *Machine) backoff(p *history.RetryPolicy, attempt int32) time.Duration {
	initial := m.Defaults.RetryInitialInterval
	coef := m.Defaults.RetryBackoffCoefficient
	var maxInterval time.Duration
	if p != nil {
		if p.InitialInterval > 0 {
			initial = p.InitialInterval
		}
		if p.BackoffCoefficient >= 1 {
			coef = p.BackoffCoefficient
		}
		maxInterval = p.MaximumInterval
	}
	if maxInterval <= 0 {
		maxInterval = 100 * initial
	}
	d := float64(initial) * math.Pow(coef, float64(attempt-1))
	if d > float64(maxInterval) || math.IsInf(d, 0) || math.IsNaN(d) {
		return maxInterval
	}
	return time.Duration(d)
}

func retryable(p *history.RetryPolicy, f *history.Failure, attempt int32) bool {
	if f != nil && f.NonRetryable {
		return false
	}
	if p == nil {
		return true
	}
	if p.MaximumAttempts > 0 && attempt >= p.MaximumAttempts {
		return false
	}
	return f == nil || !slices.Contains(p.NonRetryableErrorTypes, f.Type)
}

// CheckID checks an id or a name against Limits.MaxIDBytes (and, when
// required, that it is set): api.ErrLimitExceeded or
// api.ErrInvalidArgument naming what it is.
func (m *Machine) CheckID(what, id string, required bool) error {
	if required && id == "" {
		return api.Errorf(api.ErrInvalidArgument, "%s is required", what)
	}
	if len(id) > m.Limits.MaxIDBytes {
		return api.Errorf(api.ErrLimitExceeded, "%s is %d bytes, limit %d", what, len(id), m.Limits.MaxIDBytes)
	}
	return nil
}

// CheckPayload checks the bytes payload p adds against
// Limits.MaxPayloadBytes: api.ErrLimitExceeded naming what it is.
func (m *Machine) CheckPayload(what string, p history.Payload) error {
	if len(p.Data) > m.Limits.MaxPayloadBytes {
		return api.Errorf(api.ErrLimitExceeded, "%s payload is %d bytes, limit %d", what, len(p.Data), m.Limits.MaxPayloadBytes)
	}
	return nil
}

// ValidateStart checks a start request against the limits.
func (m *Machine) ValidateStart(req *api.StartWorkflowRequest) error {
	for _, c := range []struct {
		what, id string
	}{{"workflow id", req.WorkflowID}, {"workflow type", req.WorkflowType}, {"task queue", req.TaskQueue}} {
		if err := m.CheckID(c.what, c.id, true); err != nil {
			return err
		}
	}
	if req.ExecutionTimeout < 0 || req.RunTimeout < 0 || req.TaskTimeout < 0 {
		return api.Errorf(api.ErrInvalidArgument, "timeouts must not be negative")
	}
	if req.ReusePolicy > api.RejectDuplicate || req.ConflictPolicy > api.ConflictUseExisting {
		return api.Errorf(api.ErrInvalidArgument, "unknown reuse or conflict policy")
	}
	if err := m.checkBudget(req.Budget); err != nil {
		return err
	}
	return m.CheckPayload("input", req.Input)
}

func fmtFailure(f *history.Failure) string {
	if f == nil {
		return ""
	}
	return fmt.Sprintf("%s: %s", f.Type, f.Message)
}
