package machine

import (
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// RunState is the derived state of one run, rewritten with every
// transition (history.SpaceRunState). It is everything the engine needs to
// act on a run without reading its history; the history stays the truth a
// worker replays. Fields tagged msgpack:"-" live in memory only: they
// describe dispatches that a restart forgets on purpose (the task is simply
// dispatched again).
type RunState struct {
	WorkflowID   string
	RunID        string
	FirstRunID   string
	WorkflowType string
	TaskQueue    string
	Status       api.Status
	RequestID    string `msgpack:",omitempty"`

	StartTime         time.Time
	CloseTime         time.Time `msgpack:",omitempty"`
	ExecutionTimeout  time.Duration
	RunTimeout        time.Duration
	TaskTimeout       time.Duration
	ExecutionDeadline time.Time `msgpack:",omitempty"`
	RunDeadline       time.Time `msgpack:",omitempty"`

	// NextEventID is the id the next event will get.
	NextEventID int64
	Parent      *ParentRef `msgpack:",omitempty"`

	WFT        WFTState
	Activities map[int64]*ActivityInfo `msgpack:",omitempty"`
	Timers     map[string]*TimerInfo   `msgpack:",omitempty"`
	Children   map[int64]*ChildInfo    `msgpack:",omitempty"`
	// Occurrences is where run states written by earlier engines counted
	// identical (activity type, key material) schedules: the occurrence
	// part of the idempotency key. The counters are records of their own
	// now (the service's, engine/occurrences.go); this map is read while a run written in that
	// form is not migrated, and dropped in the run's next write.
	Occurrences map[string]int32 `msgpack:",omitempty"`
	// occ holds the occurrence counts this working copy advanced, not yet
	// committed (UncommittedOccurrences). Empty in an installed state.
	occ map[string]int32 `msgpack:"-"`

	CancelRequested bool `msgpack:",omitempty"`

	// The outcome of a closed run.
	Result              history.Payload  `msgpack:",omitempty"`
	Failure             *history.Failure `msgpack:",omitempty"`
	ContinuedAsNewRunID string           `msgpack:",omitempty"`

	// Duplicates and EffectConflicts count the run's judged late reports
	// (api.EffectReport) that are duplicates or conflicts; they may grow
	// after the run closed.
	Duplicates      int32 `msgpack:",omitempty"`
	EffectConflicts int32 `msgpack:",omitempty"`

	// Signals counts the signals the run received (Limits.MaxSignals).
	Signals int32 `msgpack:",omitempty"`

	// Budget bounds the metered activities; Usage and UsageByModel are
	// what the run's activities reported; Turns counts the metered
	// activities scheduled.
	Budget       history.Budget  `msgpack:",omitempty"`
	Usage        history.Usage   `msgpack:",omitempty"`
	UsageByModel []history.Usage `msgpack:",omitempty"`
	Turns        int64           `msgpack:",omitempty"`

	// Approvals are the agent's tool calls awaiting a person's approval,
	// in the order they started waiting (approvals.go): while there is
	// one, the run waits for a person.
	Approvals []ApprovalWait `msgpack:",omitempty"`

	// SignalRequests are the request ids of the last signals delivered
	// with one (at most MaxSignalRequests, oldest first): a signal sent
	// again with the same id is delivered once (a run on another server
	// of a cluster signalling this one, retried).
	SignalRequests []string `msgpack:",omitempty"`

	// Base is set on a run made by a reset or a fork: the run whose
	// history it copied, up to where (branch.go).
	Base *BaseRef `msgpack:",omitempty"`
	// ResetRunID is set on a run that was reset: the run made from it;
	// ResetAt the point (a WorkflowTaskCompleted event of this run) and
	// ResetRequestID the reset's request id.
	ResetRunID     string `msgpack:",omitempty"`
	ResetAt        int64  `msgpack:",omitempty"`
	ResetRequestID string `msgpack:",omitempty"`
	// LedgerAnswers counts the actions answered from the effects ledger.
	LedgerAnswers int32 `msgpack:",omitempty"`

	// ForkOf is set on every run of a forked workflow: the fork itself, a
	// reset of it, its next runs (continue-as-new). Its actions that its
	// own ledger cannot answer are asked of the base workflow's ledger,
	// else held or sent to the sandbox (branch.go, RunState.Fork).
	ForkOf *ForkOrigin `msgpack:",omitempty"`

	// Updates are the run's accepted updates, oldest first (at most
	// Limits.MaxUpdates): an update sent again with an id found here is
	// answered from its record, never applied twice.
	Updates []UpdateRecord `msgpack:",omitempty"`

	// TraceParent and TraceState are the run's W3C trace context, as its
	// WorkflowStarted records it (empty: not traced). Its tasks carry it.
	TraceParent string `msgpack:",omitempty"`
	TraceState  string `msgpack:",omitempty"`
	// Retention is how long the run is kept after it closes, as its start
	// asked (WorkflowStarted.Retention); 0: the engine's default
	// (engine.Options.Retention). A continue-as-new's next run keeps it.
	Retention time.Duration `msgpack:",omitempty"`
}

// UpdateRecord is an accepted update of a run.
type UpdateRecord struct {
	ID              string
	AcceptedEventID int64
	// CompletedEventID is its WorkflowUpdateCompleted event (0: the
	// handler has not returned yet).
	CompletedEventID int64 `msgpack:",omitempty"`
	// Name is the update's name.
	Name string `msgpack:",omitempty"`
}

// Update returns the record of the run's update id, or nil when no
// update with that id was accepted.
func (s *RunState) Update(id string) *UpdateRecord {
	for i := range s.Updates {
		if s.Updates[i].ID == id {
			return &s.Updates[i]
		}
	}
	return nil
}

// MaxSignalRequests bounds RunState.SignalRequests.
const MaxSignalRequests = 64

// SignalSeen reports whether a signal with this request id was delivered.
func (s *RunState) SignalSeen(requestID string) bool {
	return requestID != "" && slices.Contains(s.SignalRequests, requestID)
}

// NoteSignal remembers a delivered signal's request id (none: nothing).
func (s *RunState) NoteSignal(requestID string) {
	if requestID == "" {
		return
	}
	if len(s.SignalRequests) >= MaxSignalRequests {
		s.SignalRequests = slices.Delete(slices.Clone(s.SignalRequests), 0, 1)
	}
	s.SignalRequests = append(s.SignalRequests, requestID)
}

// ParentRef names the parent of a child run.
type ParentRef struct {
	WorkflowID        string
	RunID             string
	InitiatedEventID  int64
	ParentClosePolicy history.ParentClosePolicy
}

// WFTState is the run's workflow task. At most one is scheduled or started
// at a time.
type WFTState struct {
	Scheduled bool `msgpack:",omitempty"`
	Attempt   int32
	// StickyQueue is the queue of the worker that caches the run.
	StickyQueue string `msgpack:",omitempty"`
	// SeenEventID is the last event the sticky worker has seen.
	SeenEventID int64            `msgpack:",omitempty"`
	LastFailure *history.Failure `msgpack:",omitempty"`
	// BackoffUntil delays a retried task after repeated failures.
	BackoffUntil time.Time `msgpack:",omitempty"`
	// Refusals counts the workflow tasks in a row refused for breaking a
	// limit (Limits.MaxWorkflowTaskRefusals).
	Refusals int32 `msgpack:",omitempty"`

	// In memory only: the current dispatch.
	Started   bool      `msgpack:"-"`
	Epoch     int64     `msgpack:"-"`
	StartedAt time.Time `msgpack:"-"`
	// OnSticky says the task is queued on StickyQueue (until the fallback).
	OnSticky bool `msgpack:"-"`
	// Seq numbers each enqueue, so a stale queue entry or fallback is ignored.
	Seq int64 `msgpack:"-"`
	// DispatchNext is NextEventID when the task was handed out: events from
	// it on arrived while the task ran.
	DispatchNext int64 `msgpack:"-"`
}

// ActivityInfo is one pending activity.
type ActivityInfo struct {
	ScheduledEventID int64
	ActivityID       string
	ActivityType     string
	Options          history.ActivityOptions
	Effect           history.EffectClass `msgpack:",omitempty"`
	IdempotencyKey   string              `msgpack:",omitempty"`
	HasReconcile     bool                `msgpack:",omitempty"`
	ScheduledTime    time.Time

	State            api.ActivityState
	Attempt          int32
	LeaseEpoch       int64            `msgpack:",omitempty"`
	StartedTime      time.Time        `msgpack:",omitempty"`
	LeaseDeadline    time.Time        `msgpack:",omitempty"`
	StartedEventID   int64            `msgpack:",omitempty"`
	NextAttemptAt    time.Time        `msgpack:",omitempty"`
	ReadyTime        time.Time        `msgpack:",omitempty"` // the current attempt was queued (schedule-to-start counts from it)
	LastFailure      *history.Failure `msgpack:",omitempty"`
	LastHeartbeat    time.Time        `msgpack:",omitempty"`
	HeartbeatDetails history.Payload  `msgpack:",omitempty"`
	CancelRequested  bool             `msgpack:",omitempty"`
	// Reconciling: the current attempt runs the Reconcile lookup.
	Reconciling bool `msgpack:",omitempty"`
	// UnknownReason explains a paused activity.
	UnknownReason string    `msgpack:",omitempty"`
	UnknownSince  time.Time `msgpack:",omitempty"`
	// Identity of the worker holding the lease.
	Identity string `msgpack:",omitempty"`
	// Metered activities report usage and count against the budget; Turn
	// is the activity's number among them.
	Metered bool  `msgpack:",omitempty"`
	Turn    int64 `msgpack:",omitempty"`
	// Usage sums what its attempts reported.
	Usage history.Usage `msgpack:",omitempty"`
	// HeldReason and HeldSince explain a metered activity held by the
	// budget.
	HeldReason string    `msgpack:",omitempty"`
	HeldSince  time.Time `msgpack:",omitempty"`
	// Attempts are the attempts of an Idempotent or SideEffect action whose
	// intent was recorded, oldest first: what each reported and what it
	// is held to have done (see report.go).
	Attempts []AttemptRecord `msgpack:",omitempty"`
	// Late holds reports of earlier attempts that came while the current
	// attempt runs (a success, or an unknown outcome); the current
	// attempt's own outcome decides what they mean.
	Late []LateReport `msgpack:",omitempty"`
	// QuietUntil is when the attempts that lost their lease, or reported
	// an unknown outcome, can no longer act: their lease deadline (or
	// report) plus the drift margin. No Reconcile lookup and no next
	// attempt is dispatched before it.
	QuietUntil time.Time `msgpack:",omitempty"`
	// QuietWait: the activity is in ActivityStateBackoff only until
	// QuietUntil, to dispatch the same attempt (or its lookup) then.
	QuietWait bool `msgpack:",omitempty"`
	// Lookups counts the Reconcile lookups dispatched since the outcome
	// became unknown (bounded by maxLookups).
	Lookups int32 `msgpack:",omitempty"`
	// GiveBacks counts the dispatches of the current attempt that workers
	// gave back unstarted (their lease was over by their clock).
	GiveBacks int32 `msgpack:",omitempty"`
	// KeyPending: the idempotency key waits for key material that only a
	// worker running the activity can compute (a key task, see
	// keys.go); KeyMaterial holds it once known, until the keys of
	// the activity type are assigned in schedule order.
	KeyPending  bool   `msgpack:",omitempty"`
	KeyMaterial []byte `msgpack:",omitempty"`
	// BusinessKey: the key material is a declared business key.
	BusinessKey bool `msgpack:",omitempty"`
	// ShareResult: the result is stored as a chunk (sharedResult).
	ShareResult bool `msgpack:",omitempty"`

	// Input is the activity's input, kept in memory by the service so that
	// a dispatch need not read the ActivityScheduled event back (nil after
	// a restart: then it is read). The machine neither sets nor reads it,
	// and it is not stored.
	Input *history.Payload `msgpack:"-"`

	// Doubt says why the action's outcome is in doubt after a recovery of
	// the store (history.DoubtMark: an accepted data loss, a restore), and
	// DoubtSince is the mark's time. Such an action is never dispatched as
	// a fresh attempt: its Reconcile lookup runs first, or the run pauses
	// for a person (doubt.go). Cleared once a lookup or a person decided
	// that it did not happen; a person's "happened" or a lookup's answer
	// ends the activity.
	Doubt      string    `msgpack:",omitempty"`
	DoubtSince time.Time `msgpack:",omitempty"`

	// OriginKey is, in a fork, the action's key in its base workflow's
	// key space: the fork looks it up in the base's ledger (branch.go).
	OriginKey string `msgpack:",omitempty"`
	// ForkHeld: a fork held the action (no ledger answered it); the run
	// waits for a person to perform it or give its result.
	ForkHeld bool `msgpack:",omitempty"`
	// TraceParent is the W3C traceparent of the workflow task that
	// scheduled the activity, when it was traced (its attempts are traced
	// as its children); empty: the run's.
	TraceParent string `msgpack:",omitempty"`
}

// TimerInfo is one running user timer.
type TimerInfo struct {
	TimerID        string
	StartedEventID int64
	FireAt         time.Time
}

// ChildInfo is one child run that has not closed.
type ChildInfo struct {
	InitiatedEventID  int64
	WorkflowID        string
	RunID             string
	WorkflowType      string
	ParentClosePolicy history.ParentClosePolicy
	// CancelRequested: the parent asked the child to cancel
	// (ChildWorkflowCancelRequested); a second request is not sent.
	CancelRequested bool `msgpack:",omitempty"`
}

// Ref returns the run's reference.
func (s *RunState) Ref() history.RunRef {
	return history.RunRef{WorkflowID: s.WorkflowID, RunID: s.RunID}
}

// UncommittedOccurrences returns the occurrence counts the transitions
// applied to this working copy advanced, by occurrence key (OccurrenceKey),
// not yet committed; nil when there are none. The service writes each as
// the counter's record in the batch that commits the state, then calls
// OccurrencesCommitted; until then the machine reads them from here, and
// after it through Machine.Occurrence. The map belongs to the state: the
// caller must not modify it.
func (s *RunState) UncommittedOccurrences() map[string]int32 { return s.occ }

// OccurrencesCommitted records that the state's uncommitted occurrence
// counts are durable: the machine reads them through Machine.Occurrence
// from now on.
func (s *RunState) OccurrencesCommitted() { s.occ = nil }

// Clone returns a deep copy that a transition may mutate freely.
func (s *RunState) Clone() *RunState {
	c := *s
	if s.Parent != nil {
		p := *s.Parent
		c.Parent = &p
	}
	c.Activities = cloneMap(s.Activities)
	c.Timers = cloneMap(s.Timers)
	c.Children = cloneMap(s.Children)
	c.UsageByModel = slices.Clone(s.UsageByModel)
	c.Approvals = slices.Clone(s.Approvals)
	c.SignalRequests = slices.Clip(s.SignalRequests)
	c.Updates = slices.Clone(s.Updates)
	// Only a run state of the earlier form has Occurrences (until its
	// next write), and an installed state has no occ: both are usually nil.
	c.Occurrences = maps.Clone(s.Occurrences)
	c.occ = maps.Clone(s.occ)
	return &c
}

func cloneMap[K comparable, V any](m map[K]*V) map[K]*V {
	if m == nil {
		return nil
	}
	out := make(map[K]*V, len(m))
	for k, v := range m {
		cp := *v
		if c, ok := any(&cp).(interface{ cloneSlices() }); ok {
			c.cloneSlices()
		}
		out[k] = &cp
	}
	return out
}

// cloneSlices gives a copied ActivityInfo slices of its own.
func (a *ActivityInfo) cloneSlices() {
	a.Attempts = slices.Clone(a.Attempts)
	a.Late = slices.Clone(a.Late)
	a.KeyMaterial = slices.Clone(a.KeyMaterial)
}

// Paused returns the activity the run is paused on, or nil.
func (s *RunState) Paused() *ActivityInfo {
	// Fast path (every transition asks): no sort unless something is paused.
	found := false
	for _, a := range s.Activities {
		if a.State == api.ActivityStateUnknown {
			found = true
			break
		}
	}
	if !found {
		return nil
	}
	for _, id := range sortedKeys(s.Activities) {
		if a := s.Activities[id]; a.State == api.ActivityStateUnknown {
			return a
		}
	}
	return nil
}

// EffectiveStatus is Status, with running runs that wait for a person —
// on an unknown outcome, a budget raise or a tool call's approval —
// reported as paused.
func (s *RunState) EffectiveStatus() api.Status {
	if s.Status == api.StatusRunning && (len(s.Approvals) > 0 || s.Paused() != nil || s.hasHeld()) {
		return api.StatusPaused
	}
	return s.Status
}

// hasHeld reports whether a metered activity is held by the budget.
func (s *RunState) hasHeld() bool {
	for _, a := range s.Activities {
		if a.State == api.ActivityStateHeld {
			return true
		}
	}
	return false
}

func sortedKeys[K int64 | string, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
