package machine

import (
	"fmt"
	"slices"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// The outcomes an EffectReport names.
const (
	outcomeCompleted = "completed"
	outcomeUnknown   = "outcome_unknown"
	outcomeLeaseLost = "lease_lost"
)

// scheduleActivity schedules an activity. d, when known, is the activity
// as the workers of its task queue declare it: the stronger class of the
// two applies, the declared Reconcile lookup, and — when the workflow's
// worker did not compute the key material the way the declaration says
// (it did not declare the activity, or not its business key) — the key
// waits for a key task (keys.go).
func (t *transition) scheduleActivity(c *api.ScheduleActivityCommand, wtc int64, d *api.ActivityDeclaration) func() {
	st := t.st
	opts := c.Options
	if opts.TaskQueue == "" {
		opts.TaskQueue = st.TaskQueue
	}
	if opts.StartToCloseTimeout == 0 && opts.ScheduleToCloseTimeout == 0 {
		opts.StartToCloseTimeout = t.m.Defaults.StartToCloseTimeout
	}
	effect, reconcile, pending := c.Effect, c.HasReconcile, false
	if d != nil {
		effect, reconcile = max(effect, d.Effect), d.Reconcile
		pending = effect != history.Read && (c.Effect == history.Read || d.BusinessKey != c.BusinessKey)
	}
	key, okey, origin := "", "", ""
	if effect != history.Read && !pending {
		material := c.KeyMaterial
		if material == nil {
			material = c.Input.Data
		}
		key, okey, origin = t.nextKey(c.ActivityType, material)
	}
	if effect != history.Read {
		opts.TaskQueue = st.sandboxQueue(opts.TaskQueue)
	}
	id := t.add(&history.ActivityScheduled{ActivityID: c.ActivityID, ActivityType: c.ActivityType, Input: c.Input,
		Options: opts, Effect: effect, IdempotencyKey: key, HasReconcile: reconcile, WorkflowTaskCompletedEventID: wtc,
		Metered: c.Metered, ShareResult: c.ShareResult, OccurrenceKey: occurrenceDigest(c.ActivityType, okey)})
	if st.Activities == nil {
		st.Activities = map[int64]*ActivityInfo{}
	}
	a := &ActivityInfo{ScheduledEventID: id, ActivityID: c.ActivityID, ActivityType: c.ActivityType, Options: opts,
		Effect: effect, IdempotencyKey: key, HasReconcile: reconcile, ScheduledTime: t.now,
		State: api.ActivityStateScheduled, Attempt: 1, Metered: c.Metered, KeyPending: pending,
		BusinessKey: c.BusinessKey || pending && d.BusinessKey, ShareResult: c.ShareResult, OriginKey: origin,
		TraceParent: bounded(c.TraceParent, maxTraceParent)}
	if c.Metered {
		st.Turns++
		a.Turn = st.Turns
	}
	st.Activities[id] = a
	if opts.ScheduleToCloseTimeout > 0 {
		t.deadline(Deadline{At: t.now.Add(opts.ScheduleToCloseTimeout), Kind: DeadlineScheduleToClose, ID: id})
	}
	t.readyActivity(a) // a key task first when the key is pending
	return nil
}

// readyActivity puts a scheduled attempt on its queue.
func (t *transition) readyActivity(a *ActivityInfo) {
	if t.holdIfOverBudget(a) {
		return
	}
	a.State = api.ActivityStateScheduled
	a.ReadyTime = t.now
	t.out.ActivitiesReady = append(t.out.ActivitiesReady, a.ScheduledEventID)
	if a.Options.ScheduleToStartTimeout > 0 && !a.Reconciling {
		t.deadline(Deadline{At: t.now.Add(a.Options.ScheduleToStartTimeout), Kind: DeadlineScheduleToStart,
			ID: a.ScheduledEventID, Epoch: int64(a.Attempt)})
	}
}

func (t *transition) cancelActivity(schedID int64, wtc int64) func() {
	t.add(&history.ActivityCancelRequested{ScheduledEventID: schedID, WorkflowTaskCompletedEventID: wtc})
	a, ok := t.st.Activities[schedID]
	if !ok {
		return nil
	}
	a.CancelRequested = true
	if a.State != api.ActivityStateScheduled && a.State != api.ActivityStateBackoff && a.State != api.ActivityStateHeld {
		return nil // a running attempt learns it from its heartbeat; an unknown outcome stays paused
	}
	if a.Effect == history.SideEffect && (a.StartedEventID != 0 || a.Doubt != "") {
		return nil // an earlier attempt may have taken effect (or one lost in a recovery, doubt.go): let it resolve
	}
	return func() {
		delete(t.st.Activities, schedID)
		t.keysAfter(a)
		t.add(&history.ActivityCanceled{ScheduledEventID: schedID, Usage: a.Usage})
		t.needWFT()
	}
}

// ActivityDispatched leases a scheduled attempt to a worker. For Idempotent
// and SideEffect activities it writes ActivityStarted (intent before
// effect): the caller commits it durably before the task leaves the engine.
func (m *Machine) ActivityDispatched(st *RunState, schedID int64, epoch int64, identity string, now time.Time) (Output, error) {
	return m.DispatchDeclared(st, schedID, epoch, identity, nil, now)
}

// dispatch leases a's attempt (or its lookup) to identity under epoch.
func (t *transition) dispatch(a *ActivityInfo, epoch int64, identity string) {
	now := t.now
	a.State = api.ActivityStateStarted
	a.LeaseEpoch = epoch
	a.StartedTime = now
	a.LastHeartbeat = time.Time{}
	a.Identity = identity
	a.LeaseDeadline = leaseDeadline(a, now)
	a.StartedEventID = 0
	if a.Effect != history.Read || a.Reconciling {
		a.StartedEventID = t.add(&history.ActivityStarted{ScheduledEventID: a.ScheduledEventID, Attempt: a.Attempt, LeaseEpoch: epoch,
			Identity: identity, Reconcile: a.Reconciling})
		if a.Reconciling {
			a.Lookups++
		} else {
			a.Attempts = append(a.Attempts, AttemptRecord{Attempt: a.Attempt, Epoch: epoch, Identity: identity, Fate: FateRunning})
			t.ledger(a, LedgerInFlight, history.Payload{})
			t.out.Ledger[len(t.out.Ledger)-1].Dispatched = true
		}
	}
	t.deadline(Deadline{At: a.LeaseDeadline, Kind: DeadlineActivityLease, ID: a.ScheduledEventID, Epoch: epoch})
}

// HardDeadline is when the current attempt ends whatever its heartbeats
// say: its start-to-close timeout, else its schedule-to-close timeout.
func (a *ActivityInfo) HardDeadline() time.Time {
	if a.Options.StartToCloseTimeout == 0 {
		return a.ScheduledTime.Add(a.Options.ScheduleToCloseTimeout)
	}
	return a.StartedTime.Add(a.Options.StartToCloseTimeout)
}

// leaseDeadline is when an attempt's lease ends without news from the worker.
func leaseDeadline(a *ActivityInfo, from time.Time) time.Time {
	end := a.HardDeadline()
	if hb := a.Options.HeartbeatTimeout; hb > 0 && from.Add(hb).Before(end) {
		return from.Add(hb)
	}
	return end
}

// Current returns the activity scheduled as schedID if epoch names its
// live attempt: api.ErrStaleAttempt when it does not, api.ErrWorkflowClosed
// when the run has closed.
func (m *Machine) Current(st *RunState, schedID, epoch int64) (*ActivityInfo, error) {
	a, ok := st.Activities[schedID]
	if !ok || a.LeaseEpoch != epoch || (a.State != api.ActivityStateStarted && a.State != api.ActivityStateUnknown) {
		return nil, api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: lease %d is not current", schedID, st.WorkflowID, epoch)
	}
	if !st.Status.Open() {
		return nil, api.Errorf(api.ErrWorkflowClosed, "workflow %q run %q is %s", st.WorkflowID, st.RunID, st.Status)
	}
	return a, nil
}

// Heartbeat extends the lease of the current attempt. It changes only
// in-memory lease state: heartbeats are not written to history.
func (m *Machine) Heartbeat(st *RunState, schedID, epoch int64, details history.Payload, now time.Time) (time.Time, bool, error) {
	a, err := m.Current(st, schedID, epoch)
	if err != nil {
		return time.Time{}, false, err
	}
	if m.CheckPayload("heartbeat details", details) != nil {
		// Too large to keep: the heartbeat still extends the lease (an
		// activity making progress must not lose it over its details).
		details = history.Payload{}
	}
	a.LastHeartbeat = now
	if !details.IsZero() {
		a.HeartbeatDetails = details // an automatic heartbeat carries none: keep the last
	}
	if a.State == api.ActivityStateStarted {
		a.LeaseDeadline = leaseDeadline(a, now)
	}
	return a.LeaseDeadline, a.CancelRequested, nil
}

// fitResult drops a result over the payload limit, saying why.
func (m *Machine) fitResult(result history.Payload, omitted string) (history.Payload, string) {
	if omitted != "" {
		return history.Payload{}, omitted
	}
	if err := m.CheckPayload("activity result", result); err != nil {
		return history.Payload{}, fmt.Sprintf("the activity result is %d bytes, over the limit of %d (Limits.MaxPayloadBytes)",
			len(result.Data), m.Limits.MaxPayloadBytes)
	}
	return result, ""
}

// omitted marks a's ledger change, just made, as completed without its
// result.
func (t *transition) omitted(a *ActivityInfo, reason string) {
	if n := len(t.out.Ledger); reason != "" && n > 0 && a.IdempotencyKey != "" && t.out.Ledger[n-1].Key == a.IdempotencyKey {
		t.out.Ledger[n-1].ResultOmitted = reason
	}
}

// startedForRead writes the ActivityStarted of a Read attempt, which is
// recorded with its outcome rather than before dispatch.
func (t *transition) startedForRead(a *ActivityInfo) {
	if a.StartedEventID == 0 {
		a.StartedEventID = t.add(&history.ActivityStarted{ScheduledEventID: a.ScheduledEventID, Attempt: a.Attempt,
			LeaseEpoch: a.LeaseEpoch, Identity: a.Identity})
	}
}

func (t *transition) finishActivity(a *ActivityInfo, ls LedgerState, result history.Payload) {
	delete(t.st.Activities, a.ScheduledEventID)
	t.keysAfter(a)
	t.ledger(a, ls, result)
	t.needWFT()
}

// ledger records a change of a's effects-ledger entry (none for an
// activity without an idempotency key): its new state ls (0: unchanged)
// and result, and the attempt records as they stand.
func (t *transition) ledger(a *ActivityInfo, ls LedgerState, result history.Payload) {
	if a.IdempotencyKey == "" {
		return
	}
	c := LedgerChange{Key: a.IdempotencyKey, State: ls, KeepState: ls == 0,
		ScheduledEventID: a.ScheduledEventID, ActivityType: a.ActivityType, Result: result, Effect: a.Effect,
		Attempts: slices.Clone(a.Attempts)}
	if ls == LedgerUnknown {
		c.Doubt = a.Doubt
	}
	t.out.Ledger = append(t.out.Ledger, c)
}

// ActivityCompleted records the current attempt's result (Report with
// ReportCompleted, for callers that know the attempt is current). A result
// over the payload limit is not refused (the worker could only let its
// lease expire, and a side effect would then look unknown): the activity is
// recorded as completed without it (ResultOmitted), and workflow code gets
// a non-retryable ResultTooLarge error. omitted is the worker's own reason
// for sending no result, if it checked first.
func (m *Machine) ActivityCompleted(st *RunState, schedID, epoch int64, result history.Payload, omitted, identity string, usage history.Usage, now time.Time) (Output, error) {
	return m.reportCurrent(st, AttemptReport{ScheduledEventID: schedID, Epoch: epoch, Kind: ReportCompleted, Result: result,
		ResultOmitted: omitted, Identity: identity, Usage: usage}, now)
}

// ActivityFailed records the end of the current attempt without a result.
func (m *Machine) ActivityFailed(st *RunState, schedID, epoch int64, f history.Failure, r FailureReport, now time.Time) (Output, error) {
	return m.reportCurrent(st, AttemptReport{ScheduledEventID: schedID, Epoch: epoch, Kind: r.Kind.report(), Failure: f,
		Usage: r.Usage, RetryAfter: r.RetryAfter}, now)
}

// reportCurrent is Report for a report that must come from the attempt
// holding the lease: anything else is api.ErrStaleAttempt.
func (m *Machine) reportCurrent(st *RunState, r AttemptReport, now time.Time) (Output, error) {
	if _, err := m.Current(st, r.ScheduledEventID, r.Epoch); err != nil {
		return Output{}, err
	}
	out, _, err := m.Report(st, r, "", nil, now)
	return out, err
}

// FailureKind says how an attempt ended without a result.
type FailureKind uint8

// The failure kinds.
const (
	// FailedError: the activity returned an error.
	FailedError FailureKind = iota
	// FailedOutcomeUnknown: the tool cannot tell whether the effect happened.
	FailedOutcomeUnknown
	// FailedNotHappened: a Reconcile lookup found the action did not happen.
	FailedNotHappened
	// FailedCanceled: the attempt stopped on a cancel request.
	FailedCanceled
)

func (k FailureKind) report() ReportKind {
	switch k {
	case FailedOutcomeUnknown:
		return ReportUnknown
	case FailedNotHappened:
		return ReportNotHappened
	case FailedCanceled:
		return ReportCanceled
	}
	return ReportFailed
}

// FailureReport is what a worker reports with an attempt's failure, for
// ActivityFailed.
type FailureReport struct {
	Kind FailureKind
	// Usage is what the attempt consumed.
	Usage history.Usage
	// RetryAfter, when positive, replaces the retry policy's backoff
	// before the next attempt.
	RetryAfter time.Duration
}

// retryOrFail retries the attempt per policy or fails the activity for good.
// timeout names the timeout that ended the attempt, if any.
func (t *transition) retryOrFail(a *ActivityInfo, f *history.Failure, timeout string) {
	if f != nil {
		last := *f
		a.LastFailure = &last // timeouts reach here without passing ActivityFailed
	}
	p := a.Options.RetryPolicy
	wait := t.m.backoff(p, a.Attempt)
	if t.retryAfter > 0 {
		wait = t.retryAfter // the activity (a provider's Retry-After) asked for this delay
	}
	next := t.now.Add(wait)
	withinDeadline := a.Options.ScheduleToCloseTimeout == 0 || next.Before(a.ScheduledTime.Add(a.Options.ScheduleToCloseTimeout))
	if retryable(p, f, a.Attempt) && withinDeadline {
		a.State = api.ActivityStateBackoff
		a.NextAttemptAt, a.QuietWait = next, false
		t.deadline(Deadline{At: next, Kind: DeadlineActivityRetry, ID: a.ScheduledEventID, Epoch: int64(a.Attempt)})
		return
	}
	t.failActivity(a, f, timeout)
}

func (t *transition) failActivity(a *ActivityInfo, f *history.Failure, timeout string) {
	if a.State == api.ActivityStateStarted {
		t.startedForRead(a)
	}
	var failure history.Failure
	if f != nil {
		failure = *f
	}
	if timeout != "" {
		t.add(&history.ActivityTimedOut{ScheduledEventID: a.ScheduledEventID, StartedEventID: a.StartedEventID,
			Timeout: timeout, LastFailure: failure, Attempt: a.Attempt, Usage: a.Usage})
	} else {
		t.add(&history.ActivityFailed{ScheduledEventID: a.ScheduledEventID, StartedEventID: a.StartedEventID,
			Failure: failure, Attempt: a.Attempt, Identity: a.Identity, Usage: a.Usage})
	}
	t.finishActivity(a, LedgerNotHappened, history.Payload{})
}

// Resolve applies a person's decision about an unknown outcome.
func (m *Machine) Resolve(st *RunState, req *api.ResolveActivityRequest, now time.Time) (Output, error) {
	if err := m.checkOpen(st); err != nil {
		return Output{}, err
	}
	a := findActivity(st, req.ScheduledEventID, req.ActivityID)
	if a == nil || a.State != api.ActivityStateUnknown {
		return Output{}, notPaused(st, req, a)
	}
	// No history limit here: a paused run must stay resolvable (its next
	// workflow task enforces the limit).
	if err := m.CheckPayload("result", req.Result); err != nil {
		return Output{}, err
	}
	t := m.begin(st, now)
	ev := &history.ActivityResolved{ScheduledEventID: a.ScheduledEventID, Resolution: req.Resolution, By: req.Identity, Reason: req.Reason}
	if a.ForkHeld {
		return t.resolveHeld(a, ev, req)
	}
	switch req.Resolution {
	case history.ResolvedHappened:
		ev.Result = req.Result
		t.add(ev)
		t.happened(a, req.Result)
	case history.ResolvedNotHappened:
		t.add(ev)
		t.notHappened(a) // the next attempt waits until the lost ones can no longer act
	case history.ResolvedFailed:
		f := history.Failure{Type: "ResolvedFailed", Message: req.Reason, NonRetryable: true}
		if req.Failure != nil {
			f = *req.Failure
		}
		ev.Failure = &f
		t.add(ev)
		t.finishActivity(a, LedgerNotHappened, history.Payload{})
	case history.ResolvedPerform:
		return Output{}, api.Errorf(api.ErrInvalidArgument, "%s was not held by a fork: perform applies only to a held action (use not-happened to retry it)",
			activityName(a))
	default:
		return Output{}, api.Errorf(api.ErrInvalidArgument, "unknown resolution %d", req.Resolution)
	}
	return t.out, nil
}

// resolveHeld applies a person's decision about an action a fork held:
// perform it (not-happened means the same: it did not happen, so it is
// to be done), use the given result instead, or fail it.
func (t *transition) resolveHeld(a *ActivityInfo, ev *history.ActivityResolved, req *api.ResolveActivityRequest) (Output, error) {
	a.ForkHeld, a.UnknownReason, a.UnknownSince = false, "", time.Time{}
	switch req.Resolution {
	case history.ResolvedPerform, history.ResolvedNotHappened:
		ev.Resolution = history.ResolvedPerform
		t.add(ev)
		a.State = api.ActivityStateScheduled
		t.readyActivity(a)
	case history.ResolvedHappened:
		ev.Result = req.Result
		t.add(ev)
		t.finishActivity(a, LedgerCompleted, req.Result)
	case history.ResolvedFailed:
		f := history.Failure{Type: "ResolvedFailed", Message: req.Reason, NonRetryable: true}
		if req.Failure != nil {
			f = *req.Failure
		}
		ev.Failure = &f
		t.add(ev)
		// Nothing in the ledger: the action was never performed, and a
		// later schedule of it must be held again, not performed.
		delete(t.st.Activities, a.ScheduledEventID)
		t.keysAfter(a)
		t.needWFT()
	default:
		return Output{}, api.Errorf(api.ErrInvalidArgument, "unknown resolution %d", req.Resolution)
	}
	return t.out, nil
}

// FindActivity returns the activity a resolution names (see Resolve).
func FindActivity(st *RunState, schedID int64, activityID string) *ActivityInfo {
	return findActivity(st, schedID, activityID)
}

func findActivity(st *RunState, schedID int64, activityID string) *ActivityInfo {
	if schedID != 0 {
		return st.Activities[schedID]
	}
	for _, id := range sortedKeys(st.Activities) {
		if a := st.Activities[id]; a.ActivityID == activityID {
			return a
		}
	}
	if activityID == "" {
		return st.Paused()
	}
	return nil
}

// Deduplicate answers a scheduled activity from the effects ledger: the
// action already happened under the same idempotency key (in this run or an
// earlier run of the workflow id).
func (m *Machine) Deduplicate(st *RunState, schedID int64, result history.Payload, omitted, originalRun string, originalEvent int64, now time.Time) Output {
	return m.DeduplicateFrom(st, schedID, LedgerAnswer{Result: result, Omitted: omitted, RunID: originalRun, EventID: originalEvent}, now)
}

// LedgerAnswer is what an effects-ledger entry says of a completed
// action: its result, and where it was performed.
type LedgerAnswer struct {
	Result  history.Payload
	Omitted string
	// WorkflowID is set when the answer comes from another workflow's
	// ledger (a fork's base).
	WorkflowID string
	RunID      string
	EventID    int64
}

// DeduplicateFrom is Deduplicate with the answer's origin in full.
func (m *Machine) DeduplicateFrom(st *RunState, schedID int64, ans LedgerAnswer, now time.Time) Output {
	t := m.begin(st, now)
	a, ok := st.Activities[schedID]
	if !ok {
		return t.out
	}
	delete(st.Activities, schedID)
	st.LedgerAnswers++
	change := LedgerChange{Key: a.IdempotencyKey, KeepState: true} // note the run
	if ans.WorkflowID != "" {
		// Answered from a fork's base: the fork's own ledger says so too,
		// so that its later runs are answered the same way.
		change = LedgerChange{Key: a.IdempotencyKey, State: LedgerCompleted, ScheduledEventID: schedID, ActivityType: a.ActivityType,
			Result: ans.Result, ResultOmitted: ans.Omitted, Effect: a.Effect}
	}
	t.add(&history.ActivityDeduplicated{ScheduledEventID: schedID, IdempotencyKey: a.IdempotencyKey, Result: ans.Result,
		OriginalRunID: ans.RunID, OriginalEventID: ans.EventID, ResultOmitted: ans.Omitted, OriginalWorkflowID: ans.WorkflowID})
	t.out.Ledger = append(t.out.Ledger, change)
	t.needWFT()
	return t.out
}

// PauseOnLedger pauses a scheduled activity whose key is in flight or
// unknown from an earlier run: nobody knows whether it happened.
func (m *Machine) PauseOnLedger(st *RunState, schedID int64, reason string, now time.Time) Output {
	t := m.begin(st, now)
	if a, ok := st.Activities[schedID]; ok {
		t.pause(a, reason)
		// The ledger entry belongs to the earlier run: leave its state as
		// it is, and note this run.
		t.out.Ledger = []LedgerChange{{Key: a.IdempotencyKey, KeepState: true}}
	}
	return t.out
}
