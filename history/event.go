package history

import (
	"fmt"
	"time"
)

// Event is one entry of a run's history. IDs are contiguous from 1 within a
// run. Time is the engine clock at the moment the event was recorded. Attrs
// holds the typed attributes; its concrete type names the event type.
type Event struct {
	ID    int64
	Time  time.Time
	Attrs Attributes
}

// Type returns the event's type, or TypeUnknown when Attrs is nil.
func (e Event) Type() EventType {
	if e.Attrs == nil {
		return TypeUnknown
	}
	return e.Attrs.EventType()
}

// String renders the event compactly for logs and test failures.
func (e Event) String() string {
	return fmt.Sprintf("%d %s", e.ID, e.Type())
}

// Attributes is implemented by every event attribute type in this package
// (always used as a pointer, e.g. *ActivityCompleted).
//
// Attribute structs (and Payload, Failure, ActivityOptions, RetryPolicy) are
// stored by field position (see EncodeEvent): add a new field only at the
// end of a struct, never reorder, remove or retype one, and list it in the
// struct's fields method in fields.go (the tests fail until you do).
type Attributes interface {
	EventType() EventType
}

// EventType identifies the kind of an event. Values are stable: they are
// written to disk in every record's envelope and must never be renumbered.
type EventType uint8

// The event types. Never renumber; append new types at the end.
const (
	TypeUnknown EventType = iota
	TypeWorkflowStarted
	TypeWorkflowCompleted
	TypeWorkflowFailed
	TypeWorkflowCanceled
	TypeWorkflowTerminated
	TypeWorkflowTimedOut
	TypeWorkflowContinuedAsNew
	TypeWorkflowCancelRequested
	TypeWorkflowTaskCompleted
	TypeWorkflowTaskFailed
	TypeActivityScheduled
	TypeActivityStarted
	TypeActivityCompleted
	TypeActivityFailed
	TypeActivityTimedOut
	TypeActivityCanceled
	TypeActivityOutcomeUnknown
	TypeActivityResolved
	TypeActivityDeduplicated
	TypeTimerStarted
	TypeTimerFired
	TypeTimerCanceled
	TypeSignalReceived
	TypeMarkerRecorded
	TypeChildWorkflowStarted
	TypeChildWorkflowCompleted
	TypeChildWorkflowFailed
	TypeActivityCancelRequested
	TypeActivityDuplicateDetected
	TypeSignalExternalSent
	TypeBudgetUpdated
	TypeBudgetExceeded
	TypeActivityLateReport
	TypeActivityKeyed
	TypeWorkflowUpdateAccepted
	TypeWorkflowUpdateCompleted
	TypeChildWorkflowCancelRequested
	TypeWorkflowReset
	TypeActivityHeld
	typeCount
)

var typeNames = [typeCount]string{
	TypeUnknown:                      "Unknown",
	TypeWorkflowStarted:              "WorkflowStarted",
	TypeWorkflowCompleted:            "WorkflowCompleted",
	TypeWorkflowFailed:               "WorkflowFailed",
	TypeWorkflowCanceled:             "WorkflowCanceled",
	TypeWorkflowTerminated:           "WorkflowTerminated",
	TypeWorkflowTimedOut:             "WorkflowTimedOut",
	TypeWorkflowContinuedAsNew:       "WorkflowContinuedAsNew",
	TypeWorkflowCancelRequested:      "WorkflowCancelRequested",
	TypeWorkflowTaskCompleted:        "WorkflowTaskCompleted",
	TypeWorkflowTaskFailed:           "WorkflowTaskFailed",
	TypeActivityScheduled:            "ActivityScheduled",
	TypeActivityStarted:              "ActivityStarted",
	TypeActivityCompleted:            "ActivityCompleted",
	TypeActivityFailed:               "ActivityFailed",
	TypeActivityTimedOut:             "ActivityTimedOut",
	TypeActivityCanceled:             "ActivityCanceled",
	TypeActivityOutcomeUnknown:       "ActivityOutcomeUnknown",
	TypeActivityResolved:             "ActivityResolved",
	TypeActivityDeduplicated:         "ActivityDeduplicated",
	TypeTimerStarted:                 "TimerStarted",
	TypeTimerFired:                   "TimerFired",
	TypeTimerCanceled:                "TimerCanceled",
	TypeSignalReceived:               "SignalReceived",
	TypeMarkerRecorded:               "MarkerRecorded",
	TypeChildWorkflowStarted:         "ChildWorkflowStarted",
	TypeChildWorkflowCompleted:       "ChildWorkflowCompleted",
	TypeChildWorkflowFailed:          "ChildWorkflowFailed",
	TypeActivityCancelRequested:      "ActivityCancelRequested",
	TypeActivityDuplicateDetected:    "ActivityDuplicateDetected",
	TypeSignalExternalSent:           "SignalExternalSent",
	TypeBudgetUpdated:                "BudgetUpdated",
	TypeBudgetExceeded:               "BudgetExceeded",
	TypeActivityLateReport:           "ActivityLateReport",
	TypeActivityKeyed:                "ActivityKeyed",
	TypeWorkflowUpdateAccepted:       "WorkflowUpdateAccepted",
	TypeWorkflowUpdateCompleted:      "WorkflowUpdateCompleted",
	TypeChildWorkflowCancelRequested: "ChildWorkflowCancelRequested",
	TypeWorkflowReset:                "WorkflowReset",
	TypeActivityHeld:                 "ActivityHeld",
}

// String returns the type's name, e.g. "ActivityCompleted".
func (t EventType) String() string {
	if t < typeCount {
		return typeNames[t]
	}
	return fmt.Sprintf("EventType(%d)", uint8(t))
}

// ParseEventType is the inverse of EventType.String. It reports false for an
// unknown name.
func ParseEventType(name string) (EventType, bool) {
	for i := TypeWorkflowStarted; i < typeCount; i++ {
		if typeNames[i] == name {
			return i, true
		}
	}
	return TypeUnknown, false
}

// NewAttributes returns a new zero value of the attribute type for t, or nil
// when t is not a known event type.
func NewAttributes(t EventType) Attributes {
	if t == TypeUnknown || t >= typeCount {
		return nil
	}
	return attrFactories[t]()
}

var attrFactories = [typeCount]func() Attributes{
	TypeWorkflowStarted:              func() Attributes { return new(WorkflowStarted) },
	TypeWorkflowCompleted:            func() Attributes { return new(WorkflowCompleted) },
	TypeWorkflowFailed:               func() Attributes { return new(WorkflowFailed) },
	TypeWorkflowCanceled:             func() Attributes { return new(WorkflowCanceled) },
	TypeWorkflowTerminated:           func() Attributes { return new(WorkflowTerminated) },
	TypeWorkflowTimedOut:             func() Attributes { return new(WorkflowTimedOut) },
	TypeWorkflowContinuedAsNew:       func() Attributes { return new(WorkflowContinuedAsNew) },
	TypeWorkflowCancelRequested:      func() Attributes { return new(WorkflowCancelRequested) },
	TypeWorkflowTaskCompleted:        func() Attributes { return new(WorkflowTaskCompleted) },
	TypeWorkflowTaskFailed:           func() Attributes { return new(WorkflowTaskFailed) },
	TypeActivityScheduled:            func() Attributes { return new(ActivityScheduled) },
	TypeActivityStarted:              func() Attributes { return new(ActivityStarted) },
	TypeActivityCompleted:            func() Attributes { return new(ActivityCompleted) },
	TypeActivityFailed:               func() Attributes { return new(ActivityFailed) },
	TypeActivityTimedOut:             func() Attributes { return new(ActivityTimedOut) },
	TypeActivityCanceled:             func() Attributes { return new(ActivityCanceled) },
	TypeActivityOutcomeUnknown:       func() Attributes { return new(ActivityOutcomeUnknown) },
	TypeActivityResolved:             func() Attributes { return new(ActivityResolved) },
	TypeActivityDeduplicated:         func() Attributes { return new(ActivityDeduplicated) },
	TypeTimerStarted:                 func() Attributes { return new(TimerStarted) },
	TypeTimerFired:                   func() Attributes { return new(TimerFired) },
	TypeTimerCanceled:                func() Attributes { return new(TimerCanceled) },
	TypeSignalReceived:               func() Attributes { return new(SignalReceived) },
	TypeMarkerRecorded:               func() Attributes { return new(MarkerRecorded) },
	TypeChildWorkflowStarted:         func() Attributes { return new(ChildWorkflowStarted) },
	TypeChildWorkflowCompleted:       func() Attributes { return new(ChildWorkflowCompleted) },
	TypeChildWorkflowFailed:          func() Attributes { return new(ChildWorkflowFailed) },
	TypeActivityCancelRequested:      func() Attributes { return new(ActivityCancelRequested) },
	TypeActivityDuplicateDetected:    func() Attributes { return new(ActivityDuplicateDetected) },
	TypeSignalExternalSent:           func() Attributes { return new(SignalExternalSent) },
	TypeBudgetUpdated:                func() Attributes { return new(BudgetUpdated) },
	TypeBudgetExceeded:               func() Attributes { return new(BudgetExceeded) },
	TypeActivityLateReport:           func() Attributes { return new(ActivityLateReport) },
	TypeActivityKeyed:                func() Attributes { return new(ActivityKeyed) },
	TypeWorkflowUpdateAccepted:       func() Attributes { return new(WorkflowUpdateAccepted) },
	TypeWorkflowUpdateCompleted:      func() Attributes { return new(WorkflowUpdateCompleted) },
	TypeChildWorkflowCancelRequested: func() Attributes { return new(ChildWorkflowCancelRequested) },
	TypeWorkflowReset:                func() Attributes { return new(WorkflowReset) },
	TypeActivityHeld:                 func() Attributes { return new(ActivityHeld) },
}

// Payload is an encoded value (workflow input, activity result, signal
// argument …) together with the name of its encoding, e.g. "msgpack" or
// "json". The history never interprets Data; converters in the SDK do.
//
// Ref, when set, names a stored chunk (see chunk.go): the payload's bytes
// are that chunk chain's bytes followed by Data. The engine stores every
// payload that extends a chunk, and every payload above its inline
// threshold, as a chunk, and records only the reference.
type Payload struct {
	Encoding string `msgpack:"e,omitempty" json:"encoding,omitempty"`
	Data     []byte `msgpack:"d,omitempty" json:"data,omitempty"`
	Ref      []byte `msgpack:"r,omitempty" json:"ref,omitempty"`
}

// IsZero reports whether the payload carries nothing.
func (p Payload) IsZero() bool { return p.Encoding == "" && len(p.Data) == 0 && len(p.Ref) == 0 }

// Failure is an error as stored in history: a plain value, never a Go error
// chain. Type is the error's type name (used by NonRetryableErrorTypes),
// NonRetryable stops retries regardless of policy.
type Failure struct {
	Type         string  `msgpack:"t,omitempty"`
	Message      string  `msgpack:"m,omitempty"`
	NonRetryable bool    `msgpack:"n,omitempty"`
	Details      Payload `msgpack:"d,omitempty"`
	Stack        string  `msgpack:"s,omitempty"`
}

// Error makes a Failure usable where an error is expected.
func (f *Failure) Error() string {
	if f.Type == "" {
		return f.Message
	}
	return f.Type + ": " + f.Message
}

// EffectClass says what a lost lease or an unknown outcome means for an
// activity. It is declared where the activity is registered.
type EffectClass uint8

// The effect classes; see docs/effects.md.
const (
	// Read activities have no side effect; retrying them is free.
	Read EffectClass = iota
	// Idempotent activities have a side effect that the downstream
	// deduplicates on the idempotency key; they are retried with that key.
	Idempotent
	// SideEffect activities have an effect that must not happen twice; an
	// unknown outcome is reconciled or pauses the run for a person.
	SideEffect
)

// String returns "Read", "Idempotent" or "SideEffect".
func (c EffectClass) String() string {
	switch c {
	case Read:
		return "Read"
	case Idempotent:
		return "Idempotent"
	case SideEffect:
		return "SideEffect"
	}
	return fmt.Sprintf("EffectClass(%d)", uint8(c))
}

// RetryPolicy governs activity retries. Zero values take the engine defaults
// (initial 1s, coefficient 2, maximum 100×initial, unlimited attempts).
type RetryPolicy struct {
	InitialInterval        time.Duration `msgpack:"i,omitempty"`
	BackoffCoefficient     float64       `msgpack:"b,omitempty"`
	MaximumInterval        time.Duration `msgpack:"x,omitempty"`
	MaximumAttempts        int32         `msgpack:"a,omitempty"`
	NonRetryableErrorTypes []string      `msgpack:"n,omitempty"`
}

// ActivityOptions are the timeouts and retry policy of one scheduled activity.
type ActivityOptions struct {
	TaskQueue              string        `msgpack:"q,omitempty"`
	ScheduleToStartTimeout time.Duration `msgpack:"ss,omitempty"`
	StartToCloseTimeout    time.Duration `msgpack:"sc,omitempty"`
	ScheduleToCloseTimeout time.Duration `msgpack:"tc,omitempty"`
	HeartbeatTimeout       time.Duration `msgpack:"hb,omitempty"`
	RetryPolicy            *RetryPolicy  `msgpack:"rp,omitempty"`
	// LimitKey names the concurrency/rate limit the activity counts
	// against (a model provider, a model, a tenant), beside its type.
	LimitKey string `msgpack:"lk,omitempty"`
}

// ParentClosePolicy says what happens to a child when its parent closes.
type ParentClosePolicy uint8

// The parent-close policies.
const (
	ParentCloseTerminate ParentClosePolicy = iota
	ParentCloseRequestCancel
	ParentCloseAbandon
)

// WorkflowStarted is always event 1 of a run.
type WorkflowStarted struct {
	WorkflowType           string        `msgpack:"wt"`
	TaskQueue              string        `msgpack:"q"`
	Input                  Payload       `msgpack:"in,omitempty"`
	ExecutionTimeout       time.Duration `msgpack:"et,omitempty"`
	RunTimeout             time.Duration `msgpack:"rt,omitempty"`
	TaskTimeout            time.Duration `msgpack:"tt,omitempty"`
	Attempt                int32         `msgpack:"a,omitempty"`
	ContinuedFromRunID     string        `msgpack:"cf,omitempty"`
	FirstRunID             string        `msgpack:"fr,omitempty"`
	ParentWorkflowID       string        `msgpack:"pw,omitempty"`
	ParentRunID            string        `msgpack:"pr,omitempty"`
	ParentInitiatedEventID int64         `msgpack:"pe,omitempty"`
	Identity               string        `msgpack:"id,omitempty"`
	// Budget bounds the run's metered activities (model calls).
	Budget Budget `msgpack:"bg,omitempty"`
	// Retention is how long the run is kept after it closes (0: the
	// server's default).
	Retention time.Duration `msgpack:"ret,omitempty"`
	// TraceParent and TraceState are the W3C trace context of the caller
	// that started the run (OpenTelemetry), empty when none.
	TraceParent string `msgpack:"tp,omitempty"`
	TraceState  string `msgpack:"ts,omitempty"`
}

// WorkflowCompleted closes a run successfully with its result.
type WorkflowCompleted struct {
	Result                       Payload `msgpack:"r,omitempty"`
	WorkflowTaskCompletedEventID int64   `msgpack:"wc,omitempty"`
}

// WorkflowFailed closes a run with a failure.
type WorkflowFailed struct {
	Failure                      Failure `msgpack:"f"`
	WorkflowTaskCompletedEventID int64   `msgpack:"wc,omitempty"`
}

// WorkflowCanceled closes a run that accepted a cancel request.
type WorkflowCanceled struct {
	Details                      Payload `msgpack:"d,omitempty"`
	WorkflowTaskCompletedEventID int64   `msgpack:"wc,omitempty"`
}

// WorkflowTerminated closes a run by force, without running workflow code.
type WorkflowTerminated struct {
	Reason   string  `msgpack:"r,omitempty"`
	Details  Payload `msgpack:"d,omitempty"`
	Identity string  `msgpack:"id,omitempty"`
	// ResetRunID is set when a reset terminated the run: the run it made.
	ResetRunID string `msgpack:"rr,omitempty"`
}

// WorkflowTimedOut closes a run whose execution or run timeout elapsed.
type WorkflowTimedOut struct {
	Timeout string `msgpack:"k,omitempty"` // "execution" or "run"
}

// WorkflowContinuedAsNew closes a run that continues in NewRunID.
type WorkflowContinuedAsNew struct {
	NewRunID                     string        `msgpack:"nr"`
	WorkflowType                 string        `msgpack:"wt"`
	TaskQueue                    string        `msgpack:"q"`
	Input                        Payload       `msgpack:"in,omitempty"`
	RunTimeout                   time.Duration `msgpack:"rt,omitempty"`
	TaskTimeout                  time.Duration `msgpack:"tt,omitempty"`
	WorkflowTaskCompletedEventID int64         `msgpack:"wc,omitempty"`
}

// WorkflowCancelRequested records a request to cancel the run; the workflow
// code decides how to honour it.
type WorkflowCancelRequested struct {
	Reason   string `msgpack:"r,omitempty"`
	Identity string `msgpack:"id,omitempty"`
}

// WorkflowTaskCompleted marks a decision boundary: the events before it are
// what the code saw when it produced the commands recorded after it.
//
// SeenEventID is the last event the code had seen when it decided. Events
// between SeenEventID and this event arrived while the task ran: replay
// delivers them after this decision, exactly as the live code met them.
type WorkflowTaskCompleted struct {
	SeenEventID int64  `msgpack:"se"`
	Identity    string `msgpack:"id,omitempty"`
	Attempt     int32  `msgpack:"a,omitempty"`
}

// WorkflowTaskFailed records the first failure of a streak of workflow task
// failures (a panic, a nondeterminism error, a task timeout).
type WorkflowTaskFailed struct {
	Cause    string  `msgpack:"c,omitempty"` // "panic", "nondeterminism", "timeout", …
	Failure  Failure `msgpack:"f"`
	Identity string  `msgpack:"id,omitempty"`
	Attempt  int32   `msgpack:"a,omitempty"`
}

// ActivityScheduled records the intent to run an activity. For Idempotent and
// SideEffect activities IdempotencyKey identifies the logical action.
type ActivityScheduled struct {
	ActivityID                   string          `msgpack:"ai"`
	ActivityType                 string          `msgpack:"at"`
	Input                        Payload         `msgpack:"in,omitempty"`
	Options                      ActivityOptions `msgpack:"o"`
	Effect                       EffectClass     `msgpack:"ef,omitempty"`
	IdempotencyKey               string          `msgpack:"ik,omitempty"`
	HasReconcile                 bool            `msgpack:"rc,omitempty"`
	WorkflowTaskCompletedEventID int64           `msgpack:"wc,omitempty"`
	// Metered activities (model calls) report usage and count against the
	// run's budget: one is held while the budget is exhausted.
	Metered bool `msgpack:"mt,omitempty"`
	// ShareResult asks for the activity's result to be stored as a payload
	// chunk (when it is large enough to be worth it), so that other
	// payloads can reference it instead of copying it: an agent's
	// transcript refers to a tool's result this way (TranscriptEntry.Content).
	ShareResult bool `msgpack:"sr,omitempty"`
	// OccurrenceKey names the occurrence counter the key counted under,
	// with the activity type: a digest of the key material. With it a
	// reset or a fork rebuilds the counters of a history prefix, and so
	// repeats the keys of the base run.
	OccurrenceKey string `msgpack:"oc,omitempty"`
}

// ActivityStarted records a dispatch of an attempt under a lease. For
// Idempotent and SideEffect activities it is written durably before the task
// reaches a worker (intent before effect).
type ActivityStarted struct {
	ScheduledEventID int64  `msgpack:"se"`
	Attempt          int32  `msgpack:"a"`
	LeaseEpoch       int64  `msgpack:"le"`
	Identity         string `msgpack:"id,omitempty"`
	Reconcile        bool   `msgpack:"rc,omitempty"` // this attempt runs the Reconcile lookup
}

// ActivityCompleted records an activity's result.
type ActivityCompleted struct {
	ScheduledEventID int64   `msgpack:"se"`
	StartedEventID   int64   `msgpack:"st,omitempty"`
	Result           Payload `msgpack:"r,omitempty"`
	Identity         string  `msgpack:"id,omitempty"`
	// ResultOmitted, when set, says why the result is not recorded (it
	// was larger than the engine's payload limit): the activity completed
	// — its effect happened — but workflow code gets a non-retryable
	// ResultTooLarge error instead of a value.
	ResultOmitted string `msgpack:"ro,omitempty"`
	// Usage sums what every attempt of the activity reported, failed
	// attempts included.
	Usage Usage `msgpack:"u,omitempty"`
}

// ActivityFailed records an activity's final failure (retries exhausted or
// non-retryable).
type ActivityFailed struct {
	ScheduledEventID int64   `msgpack:"se"`
	StartedEventID   int64   `msgpack:"st,omitempty"`
	Failure          Failure `msgpack:"f"`
	Attempt          int32   `msgpack:"a,omitempty"`
	Identity         string  `msgpack:"id,omitempty"`
	Usage            Usage   `msgpack:"u,omitempty"`
}

// ActivityTimedOut records an activity's final timeout.
type ActivityTimedOut struct {
	ScheduledEventID int64   `msgpack:"se"`
	StartedEventID   int64   `msgpack:"st,omitempty"`
	Timeout          string  `msgpack:"k"` // "schedule_to_start", "start_to_close", "schedule_to_close", "heartbeat"
	LastFailure      Failure `msgpack:"f,omitempty"`
	Attempt          int32   `msgpack:"a,omitempty"`
	Usage            Usage   `msgpack:"u,omitempty"`
}

// ActivityCanceled records that a cancel request reached the activity.
type ActivityCanceled struct {
	ScheduledEventID int64   `msgpack:"se"`
	StartedEventID   int64   `msgpack:"st,omitempty"`
	Details          Payload `msgpack:"d,omitempty"`
	Usage            Usage   `msgpack:"u,omitempty"`
}

// ActivityCancelRequested records the workflow's request to cancel an activity.
type ActivityCancelRequested struct {
	ScheduledEventID             int64 `msgpack:"se"`
	WorkflowTaskCompletedEventID int64 `msgpack:"wc,omitempty"`
}

// ActivityOutcomeUnknown records that a side-effecting attempt may or may not
// have taken effect. Unless reconciled, the run is paused until resolved.
type ActivityOutcomeUnknown struct {
	ScheduledEventID int64  `msgpack:"se"`
	StartedEventID   int64  `msgpack:"st,omitempty"`
	Attempt          int32  `msgpack:"a"`
	Reason           string `msgpack:"r"`
	IdempotencyKey   string `msgpack:"ik,omitempty"`
}

// Resolution is what a person (or a Reconcile lookup) decided about an
// activity whose outcome was unknown.
type Resolution uint8

// The resolutions.
const (
	// ResolvedHappened: the effect took place; Result is the activity's result.
	ResolvedHappened Resolution = iota + 1
	// ResolvedNotHappened: the effect did not take place; retry with the same key.
	ResolvedNotHappened
	// ResolvedFailed: fail the activity with Failure.
	ResolvedFailed
	// ResolvedPerform: perform an action a fork held (ActivityHeld) for
	// real, under the fork's own key.
	ResolvedPerform
)

// String returns "happened", "not-happened" or "failed".
func (r Resolution) String() string {
	switch r {
	case ResolvedHappened:
		return "happened"
	case ResolvedNotHappened:
		return "not-happened"
	case ResolvedFailed:
		return "failed"
	case ResolvedPerform:
		return "perform"
	}
	return fmt.Sprintf("Resolution(%d)", uint8(r))
}

// ActivityResolved records who decided what about an unknown outcome.
type ActivityResolved struct {
	ScheduledEventID int64      `msgpack:"se"`
	Resolution       Resolution `msgpack:"rs"`
	Result           Payload    `msgpack:"r,omitempty"`
	Failure          *Failure   `msgpack:"f,omitempty"`
	By               string     `msgpack:"by,omitempty"` // a person's identity or "reconcile"
	Reason           string     `msgpack:"why,omitempty"`
	// ResultOmitted: as in ActivityCompleted, for a Reconcile lookup's
	// result.
	ResultOmitted string `msgpack:"ro,omitempty"`
}

// ActivityDeduplicated records that an activity was not dispatched because
// its idempotency key was already completed in the effects ledger.
type ActivityDeduplicated struct {
	ScheduledEventID int64   `msgpack:"se"`
	IdempotencyKey   string  `msgpack:"ik"`
	Result           Payload `msgpack:"r,omitempty"`
	OriginalRunID    string  `msgpack:"or,omitempty"`
	OriginalEventID  int64   `msgpack:"oe,omitempty"`
	// ResultOmitted: as in ActivityCompleted — the action happened but its
	// result was never recorded.
	ResultOmitted string `msgpack:"ro,omitempty"`
	// OriginalWorkflowID is set when the answer came from another
	// workflow's ledger: the base workflow of a fork.
	OriginalWorkflowID string `msgpack:"ow,omitempty"`
}

// ActivityDuplicateDetected records, loudly, that two different attempts of
// one action (one idempotency key) may both have performed it: Attempt
// reported success (or, with Possible, that its outcome is unknown, or it
// lost its lease without a word) while OtherAttempt performed the action
// too. Without Possible it is proof that the effect happened twice.
type ActivityDuplicateDetected struct {
	ScheduledEventID int64   `msgpack:"se"`
	Attempt          int32   `msgpack:"a"`
	LeaseEpoch       int64   `msgpack:"le"`
	IdempotencyKey   string  `msgpack:"ik,omitempty"`
	Result           Payload `msgpack:"r,omitempty"`
	Identity         string  `msgpack:"id,omitempty"`
	Possible         bool    `msgpack:"po,omitempty"`
	OtherAttempt     int32   `msgpack:"oa,omitempty"`
	Outcome          string  `msgpack:"oc,omitempty"` // "completed", "outcome_unknown", "lease_lost"
	Detail           string  `msgpack:"dt,omitempty"`
}

// ActivityKeyed records an activity's effect class, Reconcile lookup and
// idempotency key decided after its ActivityScheduled event: the worker
// that runs it declares it stronger than the workflow's worker did (or with
// a business key only it can compute), so the engine applied that
// declaration before the first attempt's intent was recorded.
type ActivityKeyed struct {
	ScheduledEventID int64       `msgpack:"se"`
	Effect           EffectClass `msgpack:"ef"`
	IdempotencyKey   string      `msgpack:"ik,omitempty"`
	HasReconcile     bool        `msgpack:"rc,omitempty"`
	// DeclaredBy names the worker whose declaration applied.
	DeclaredBy string `msgpack:"by,omitempty"`
	// OccurrenceKey: as in ActivityScheduled.
	OccurrenceKey string `msgpack:"oc,omitempty"`
}

// ActivityLateReport records a report of an attempt that no longer held
// its lease, judged not to be a duplicate: a confirmation (the attempt the
// action was attributed to reported the same outcome) or a conflict (the
// report contradicts the record: another result, or a success for an
// action recorded as not happened). Verdict is "confirmation" or
// "conflict".
type ActivityLateReport struct {
	ScheduledEventID int64   `msgpack:"se"`
	Attempt          int32   `msgpack:"a"`
	LeaseEpoch       int64   `msgpack:"le"`
	IdempotencyKey   string  `msgpack:"ik,omitempty"`
	Verdict          string  `msgpack:"v"`
	Outcome          string  `msgpack:"oc,omitempty"`
	Result           Payload `msgpack:"r,omitempty"`
	Identity         string  `msgpack:"id,omitempty"`
	OtherAttempt     int32   `msgpack:"oa,omitempty"`
	Detail           string  `msgpack:"dt,omitempty"`
}

// TimerStarted records a durable timer.
type TimerStarted struct {
	TimerID                      string        `msgpack:"ti"`
	Duration                     time.Duration `msgpack:"d"`
	FireAt                       time.Time     `msgpack:"at"`
	WorkflowTaskCompletedEventID int64         `msgpack:"wc,omitempty"`
}

// TimerFired records that a timer came due.
type TimerFired struct {
	TimerID        string `msgpack:"ti"`
	StartedEventID int64  `msgpack:"st"`
}

// TimerCanceled records that the workflow canceled a timer.
type TimerCanceled struct {
	TimerID                      string `msgpack:"ti"`
	StartedEventID               int64  `msgpack:"st"`
	WorkflowTaskCompletedEventID int64  `msgpack:"wc,omitempty"`
}

// SignalReceived records a signal delivered to the run.
type SignalReceived struct {
	Name     string  `msgpack:"n"`
	Input    Payload `msgpack:"in,omitempty"`
	Identity string  `msgpack:"id,omitempty"`
}

// SignalExternalSent records that the workflow signalled another workflow.
type SignalExternalSent struct {
	WorkflowID                   string  `msgpack:"w"`
	RunID                        string  `msgpack:"r,omitempty"`
	Name                         string  `msgpack:"n"`
	Input                        Payload `msgpack:"in,omitempty"`
	Delivered                    bool    `msgpack:"ok,omitempty"` // false: no open run had that id
	WorkflowTaskCompletedEventID int64   `msgpack:"wc,omitempty"`
}

// MarkerRecorded records a value produced by workflow code that must replay
// identically: side-effect values, version markers.
type MarkerRecorded struct {
	Name                         string  `msgpack:"n"` // "SideEffect", "MutableSideEffect", "Version"
	ID                           string  `msgpack:"i,omitempty"`
	Data                         Payload `msgpack:"d,omitempty"`
	WorkflowTaskCompletedEventID int64   `msgpack:"wc,omitempty"`
}

// ChildWorkflowStarted records the start of a child workflow.
type ChildWorkflowStarted struct {
	WorkflowID                   string            `msgpack:"w"`
	RunID                        string            `msgpack:"r"`
	WorkflowType                 string            `msgpack:"wt"`
	TaskQueue                    string            `msgpack:"q"`
	Input                        Payload           `msgpack:"in,omitempty"`
	ParentClosePolicy            ParentClosePolicy `msgpack:"pc,omitempty"`
	WorkflowTaskCompletedEventID int64             `msgpack:"wc,omitempty"`
}

// ChildWorkflowCompleted records a child's result.
type ChildWorkflowCompleted struct {
	InitiatedEventID int64   `msgpack:"ie"`
	WorkflowID       string  `msgpack:"w"`
	RunID            string  `msgpack:"r"`
	Result           Payload `msgpack:"res,omitempty"`
}

// ChildWorkflowFailed records that a child closed without a result (failed,
// canceled, terminated or timed out; Failure.Type says which).
type ChildWorkflowFailed struct {
	InitiatedEventID int64   `msgpack:"ie"`
	WorkflowID       string  `msgpack:"w"`
	RunID            string  `msgpack:"r"`
	Failure          Failure `msgpack:"f"`
}

// BudgetUpdated records a change of the run's budget: set by workflow
// code or a person (raise it, and held activities go on), or Stop: the
// held activities fail with a non-retryable BudgetExceeded error.
type BudgetUpdated struct {
	Budget Budget `msgpack:"b"`
	Stop   bool   `msgpack:"s,omitempty"`
	By     string `msgpack:"by,omitempty"`
	Reason string `msgpack:"why,omitempty"`
	// WorkflowTaskCompletedEventID is set when workflow code set the
	// budget (a command event); zero for a person's change.
	WorkflowTaskCompletedEventID int64 `msgpack:"wc,omitempty"`
}

// BudgetExceeded records that a metered activity is held because the
// run's budget is exhausted: the run is paused until the budget is raised
// or the run stopped.
type BudgetExceeded struct {
	ScheduledEventID int64  `msgpack:"se"`
	Reason           string `msgpack:"r"`
	Used             Usage  `msgpack:"u"`
	Turns            int64  `msgpack:"n,omitempty"`
}

// WorkflowUpdateAccepted records an update whose validator accepted it
// (a rejected update leaves no event): from here the update is durable
// and its handler runs.
type WorkflowUpdateAccepted struct {
	UpdateID string  `msgpack:"u"`
	Name     string  `msgpack:"n"`
	Input    Payload `msgpack:"in,omitempty"`
	Identity string  `msgpack:"id,omitempty"`
}

// WorkflowUpdateCompleted records the outcome of an accepted update's
// handler: its result, or its failure.
type WorkflowUpdateCompleted struct {
	UpdateID                     string   `msgpack:"u"`
	AcceptedEventID              int64    `msgpack:"ae"`
	Result                       Payload  `msgpack:"r,omitempty"`
	Failure                      *Failure `msgpack:"f,omitempty"`
	WorkflowTaskCompletedEventID int64    `msgpack:"wc,omitempty"`
}

// ChildWorkflowCancelRequested records the parent's request to cancel a
// child it started (the context the child was started with was
// cancelled). The child's outcome follows as ChildWorkflowFailed.
type ChildWorkflowCancelRequested struct {
	InitiatedEventID             int64  `msgpack:"ie"`
	WorkflowID                   string `msgpack:"w"`
	RunID                        string `msgpack:"r,omitempty"`
	WorkflowTaskCompletedEventID int64  `msgpack:"wc,omitempty"`
}

// WorkflowReset marks, in a run made by a reset or a fork, where the
// history copied from the base run ends: the events before it are the
// base run's (BaseWorkflowID, BaseRunID) up to, not including, its event
// AtEventID; the events after it are the new run's own.
type WorkflowReset struct {
	// Kind is "reset" (the same workflow id; the base run was
	// terminated) or "fork" (a new workflow id; the base run goes on).
	Kind           string `msgpack:"k"`
	BaseWorkflowID string `msgpack:"bw"`
	BaseRunID      string `msgpack:"br"`
	AtEventID      int64  `msgpack:"at"`
	Reason         string `msgpack:"why,omitempty"`
	Identity       string `msgpack:"id,omitempty"`
	// Effects is a fork's policy for effects the base run's ledger cannot
	// answer: "hold" (the default) or "sandbox:QUEUE".
	Effects string `msgpack:"ef,omitempty"`
	// Reapplied counts the base run's signals received after the point
	// that follow as SignalReceived events.
	Reapplied int32 `msgpack:"rs,omitempty"`
}

// ActivityHeld records that a fork held an effect the base run's ledger
// could not answer: it is not performed until a person approves it (or
// gives the result to use instead). The run waits for a person.
type ActivityHeld struct {
	ScheduledEventID int64 `msgpack:"se"`
	// OriginKey is the action's key in the base workflow's key space,
	// looked up in its ledger.
	OriginKey string `msgpack:"ok,omitempty"`
	Reason    string `msgpack:"r"`
}

// EventType implementations.

func (*WorkflowStarted) EventType() EventType         { return TypeWorkflowStarted }
func (*WorkflowCompleted) EventType() EventType       { return TypeWorkflowCompleted }
func (*WorkflowFailed) EventType() EventType          { return TypeWorkflowFailed }
func (*WorkflowCanceled) EventType() EventType        { return TypeWorkflowCanceled }
func (*WorkflowTerminated) EventType() EventType      { return TypeWorkflowTerminated }
func (*WorkflowTimedOut) EventType() EventType        { return TypeWorkflowTimedOut }
func (*WorkflowContinuedAsNew) EventType() EventType  { return TypeWorkflowContinuedAsNew }
func (*WorkflowCancelRequested) EventType() EventType { return TypeWorkflowCancelRequested }
func (*WorkflowTaskCompleted) EventType() EventType   { return TypeWorkflowTaskCompleted }
func (*WorkflowTaskFailed) EventType() EventType      { return TypeWorkflowTaskFailed }
func (*ActivityScheduled) EventType() EventType       { return TypeActivityScheduled }
func (*ActivityStarted) EventType() EventType         { return TypeActivityStarted }
func (*ActivityCompleted) EventType() EventType       { return TypeActivityCompleted }
func (*ActivityFailed) EventType() EventType          { return TypeActivityFailed }
func (*ActivityTimedOut) EventType() EventType        { return TypeActivityTimedOut }
func (*ActivityCanceled) EventType() EventType        { return TypeActivityCanceled }
func (*ActivityCancelRequested) EventType() EventType { return TypeActivityCancelRequested }
func (*ActivityOutcomeUnknown) EventType() EventType  { return TypeActivityOutcomeUnknown }
func (*ActivityResolved) EventType() EventType        { return TypeActivityResolved }
func (*ActivityDeduplicated) EventType() EventType    { return TypeActivityDeduplicated }
func (*ActivityDuplicateDetected) EventType() EventType {
	return TypeActivityDuplicateDetected
}
func (*TimerStarted) EventType() EventType            { return TypeTimerStarted }
func (*TimerFired) EventType() EventType              { return TypeTimerFired }
func (*TimerCanceled) EventType() EventType           { return TypeTimerCanceled }
func (*SignalReceived) EventType() EventType          { return TypeSignalReceived }
func (*SignalExternalSent) EventType() EventType      { return TypeSignalExternalSent }
func (*MarkerRecorded) EventType() EventType          { return TypeMarkerRecorded }
func (*ChildWorkflowStarted) EventType() EventType    { return TypeChildWorkflowStarted }
func (*ChildWorkflowCompleted) EventType() EventType  { return TypeChildWorkflowCompleted }
func (*ChildWorkflowFailed) EventType() EventType     { return TypeChildWorkflowFailed }
func (*BudgetUpdated) EventType() EventType           { return TypeBudgetUpdated }
func (*BudgetExceeded) EventType() EventType          { return TypeBudgetExceeded }
func (*ActivityLateReport) EventType() EventType      { return TypeActivityLateReport }
func (*ActivityKeyed) EventType() EventType           { return TypeActivityKeyed }
func (*WorkflowUpdateAccepted) EventType() EventType  { return TypeWorkflowUpdateAccepted }
func (*WorkflowUpdateCompleted) EventType() EventType { return TypeWorkflowUpdateCompleted }
func (*ChildWorkflowCancelRequested) EventType() EventType {
	return TypeChildWorkflowCancelRequested
}
func (*WorkflowReset) EventType() EventType { return TypeWorkflowReset }
func (*ActivityHeld) EventType() EventType  { return TypeActivityHeld }
