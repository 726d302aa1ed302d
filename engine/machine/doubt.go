package machine

import (
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Doubt after a recovery of the store: a store that lost acknowledged
// commits, or was restored from a backup or a point-in-time copy, may say
// that an action was never started, or is still running, while in the
// lost range it was performed (and its run went on). Such an action's
// outcome is unknown, whatever the run state says, and the founding rule
// applies: its Reconcile lookup runs first, and without one the run pauses
// for a person. The service applies Doubt to every open run when it finds
// a history.DoubtMark at open.

// DoubtInput is what Doubt needs to know of the recovery and of the
// service.
type DoubtInput struct {
	// Reason says why, for a person (history.DoubtMark.Describe).
	Reason string
	// Since is the mark's time. An activity already put in doubt by the
	// same mark (DoubtSince equal) is left as it is, so that a pass
	// interrupted by a crash can be run again.
	Since time.Time
	// Declared returns the declaration of an activity type on a task
	// queue, as Machine.DispatchDeclared would apply it (nil: none known).
	Declared func(queue, activityType string) (api.ActivityDeclaration, bool)
}

// Doubt puts in doubt every scheduled or in-flight SideEffect action of
// the run (whatever state it is in: waiting for a worker, running, waiting
// to retry, waiting for its lookup, paused, held by the budget) — and of
// every Read action that a declaration turns into one before it runs: each
// records ActivityOutcomeUnknown and its ledger entry becomes unknown, and
// then its Reconcile lookup runs — once an attempt dispatched in the lost
// range can no longer act — or the run pauses. An activity whose key is
// not assigned yet is put in doubt once it is (keys.go). Read and
// Idempotent actions are left alone: they may run again. It returns how
// many actions it put in doubt.
func (m *Machine) Doubt(st *RunState, d DoubtInput, now time.Time) (Output, int) {
	t := m.begin(st, now)
	if !st.Status.Open() {
		return t.out, 0
	}
	n := 0
	for _, id := range sortedKeys(st.Activities) {
		a := st.Activities[id]
		if a.Doubt != "" && a.DoubtSince.Equal(d.Since) {
			continue // this mark's earlier pass did it
		}
		t.applyDeclared(a, d.Declared)
		if a.Effect == history.Read && !a.Reconciling {
			// A declaration the engine learns later may make it a
			// SideEffect: then it is put in doubt once its key is
			// assigned (keys.go), as it may have run as one in the lost
			// range.
			a.Doubt, a.DoubtSince = d.Reason, d.Since
			continue
		}
		if a.Effect != history.SideEffect {
			continue
		}
		a.Doubt, a.DoubtSince = d.Reason, d.Since
		n++
		if !a.KeyPending {
			t.inDoubt(a, true)
		}
	}
	return t.out, n
}

// applyDeclared upgrades an activity that waits for its next dispatch to
// its task queue's declaration, as that dispatch would (DispatchDeclared):
// an action the workflow scheduled as a Read but whose worker declares a
// SideEffect may have run as one in the lost range.
func (t *transition) applyDeclared(a *ActivityInfo, declared func(queue, activityType string) (api.ActivityDeclaration, bool)) {
	if declared == nil || a.Reconciling || a.KeyPending || a.State != api.ActivityStateScheduled && a.State != api.ActivityStateBackoff {
		return
	}
	if d, ok := declared(a.Options.TaskQueue, a.ActivityType); ok {
		t.applyDeclaration(a, &d, "")
	}
}

// inDoubt makes a's outcome unknown because of a recovery of the store:
// every attempt still running may have performed it, an attempt dispatched
// in the lost range too, and nothing is dispatched before such an attempt
// can no longer act. With a Reconcile lookup, the lookup is dispatched
// then; without one, or when the key is only now assigned and the lookup
// could not be trusted before the ledger was consulted, the run pauses.
// ledger says whether to set the action's ledger entry to unknown here
// (false for a key assigned in this transition: the service consults the
// entry first, see engine.txn.dedupe).
func (t *transition) inDoubt(a *ActivityInfo, ledger bool) {
	for i := range a.Attempts {
		if a.Attempts[i].Fate == FateRunning {
			a.Attempts[i].Fate = FateUnknown
		}
	}
	quiet := t.now.Add(lostLease(a))
	if a.LeaseDeadline.After(quiet) {
		quiet = a.LeaseDeadline
	}
	if q := quiet.Add(t.m.DriftMargin); q.After(a.QuietUntil) {
		a.QuietUntil = q
	}
	// The attempt that held the lease is no longer current: its success
	// still completes the action (a late report), but its failure proves
	// nothing about an attempt of the lost range.
	a.LeaseEpoch, a.LeaseDeadline, a.HeldReason = 0, time.Time{}, ""
	reason := "outcome unknown after a recovery of the store (" + a.Doubt + ")"
	if !a.HasReconcile {
		t.pauseInDoubt(a, reason, ledger)
		return
	}
	t.add(&history.ActivityOutcomeUnknown{ScheduledEventID: a.ScheduledEventID, StartedEventID: a.StartedEventID,
		Attempt: a.Attempt, Reason: reason + "; the Reconcile lookup runs first", IdempotencyKey: a.IdempotencyKey})
	if ledger {
		t.ledger(a, LedgerUnknown, history.Payload{})
	}
	a.UnknownReason = ""
	a.Reconciling, a.Lookups, a.StartedEventID = true, 0, 0
	t.after(a, a.QuietUntil)
}

// pauseInDoubt is pause, leaving the ledger entry alone when ledger is
// false.
func (t *transition) pauseInDoubt(a *ActivityInfo, reason string, ledger bool) {
	if ledger {
		t.pause(a, reason)
		return
	}
	n := len(t.out.Ledger)
	t.pause(a, reason)
	t.out.Ledger = t.out.Ledger[:n]
}

// lostLease bounds how long after the recovery an attempt dispatched
// before it — whose lease the store may have lost — can still act: its
// worker stops it at its start-to-close end, or (with a heartbeat timeout)
// at the end of the last lease the old engine confirmed, since the
// recovered engine renews no lease it does not know.
func lostLease(a *ActivityInfo) time.Duration {
	d := a.Options.StartToCloseTimeout
	if d == 0 {
		d = a.Options.ScheduleToCloseTimeout
	}
	if hb := a.Options.HeartbeatTimeout; hb > 0 && (d == 0 || hb < d) {
		d = hb
	}
	return d
}

// LedgerInDoubt records that the action scheduled as schedID, put in
// doubt when its key was assigned in this transition (inDoubt with ledger
// false), is unknown in the effects ledger: the service calls it when the
// ledger holds no entry for the key, so that a later run of the workflow
// id that schedules the same action pauses too. It does nothing for an
// action not in doubt.
func (m *Machine) LedgerInDoubt(st *RunState, schedID int64, now time.Time) Output {
	t := m.begin(st, now)
	a, ok := st.Activities[schedID]
	if ok && a.Doubt != "" && (a.State == api.ActivityStateUnknown || a.Reconciling) {
		t.ledger(a, LedgerUnknown, history.Payload{})
	}
	return t.out
}

// InDoubt says why the action's outcome is in doubt after a recovery of
// the store, or "" when it is not (a Read action is only marked, in case a
// declaration makes it a SideEffect).
func (a *ActivityInfo) InDoubt() string {
	if a.Effect != history.SideEffect {
		return ""
	}
	return a.Doubt
}
