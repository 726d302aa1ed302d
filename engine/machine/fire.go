package machine

import (
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Fire tells the machine that deadline d has come. A deadline that no
// longer applies (the timer was canceled, the lease was renewed, the run
// closed) produces an empty Output; a renewed lease re-arms itself.
func (m *Machine) Fire(st *RunState, d Deadline, now time.Time) Output {
	t := m.begin(st, now)
	if !st.Status.Open() {
		return t.out
	}
	switch d.Kind {
	case DeadlineUserTimer:
		t.fireTimer(d)
	case DeadlineActivityLease:
		t.fireLease(d)
	case DeadlineScheduleToStart:
		if a, ok := st.Activities[d.ID]; ok && a.State == api.ActivityStateScheduled && int64(a.Attempt) == d.Epoch && !a.Reconciling {
			t.failActivity(a, &history.Failure{Type: "Timeout", Message: "no worker started the activity in time", NonRetryable: true}, "schedule_to_start")
		}
	case DeadlineScheduleToClose:
		t.fireScheduleToClose(d)
	case DeadlineQuiet:
		if a, ok := st.Activities[d.ID]; ok && a.State == api.ActivityStateBackoff && a.QuietWait && int64(a.Attempt) == d.Epoch &&
			!a.NextAttemptAt.After(now) {
			a.NextAttemptAt, a.QuietWait = time.Time{}, false
			t.readyActivity(a)
		}
	case DeadlineActivityRetry:
		if a, ok := st.Activities[d.ID]; ok && a.State == api.ActivityStateBackoff && !a.QuietWait && int64(a.Attempt) == d.Epoch {
			a.Attempt++
			a.StartedEventID = 0
			a.NextAttemptAt = time.Time{}
			t.readyActivity(a)
		}
	case DeadlineWFTTimeout:
		if st.WFT.Started && st.WFT.Epoch == d.Epoch {
			out, _ := m.FailWFT(st, "timeout", history.Failure{Type: "Timeout", Message: "workflow task timed out"}, "", now)
			return out
		}
	case DeadlineWFTBackoff:
		if st.WFT.Scheduled && !st.WFT.Started && !st.WFT.BackoffUntil.After(now) {
			st.WFT.BackoffUntil = time.Time{}
			t.out.WFTReady = true
		}
	case DeadlineStickyFallback:
		if st.WFT.Scheduled && !st.WFT.Started && st.WFT.OnSticky && st.WFT.Seq == d.Epoch {
			st.WFT.StickyQueue, st.WFT.SeenEventID, st.WFT.OnSticky = "", 0, false
			t.out.WFTReady = true
		}
	case DeadlineRunTimeout, DeadlineExecutionTimeout:
		t.fireRunTimeout(d)
	}
	return t.out
}

func (t *transition) fireTimer(d Deadline) {
	ti, ok := t.st.Timers[d.Name]
	if !ok || ti.StartedEventID != d.Epoch {
		return
	}
	if ti.FireAt.After(t.now) {
		t.deadline(Deadline{At: ti.FireAt, Kind: DeadlineUserTimer, Name: ti.TimerID, Epoch: ti.StartedEventID})
		return
	}
	delete(t.st.Timers, d.Name)
	t.add(&history.TimerFired{TimerID: ti.TimerID, StartedEventID: ti.StartedEventID})
	t.needWFT()
}

func (t *transition) fireLease(d Deadline) {
	a, ok := t.st.Activities[d.ID]
	if !ok || a.State != api.ActivityStateStarted || a.LeaseEpoch != d.Epoch {
		return
	}
	if a.LeaseDeadline.After(t.now) { // renewed by a heartbeat
		t.deadline(Deadline{At: a.LeaseDeadline, Kind: DeadlineActivityLease, ID: a.ScheduledEventID, Epoch: a.LeaseEpoch})
		return
	}
	if a.KeyPending { // a key task runs nothing: ask again
		a.LeaseEpoch, a.LeaseDeadline = 0, time.Time{}
		t.readyActivity(a)
		return
	}
	if a.Reconciling {
		// The lookup is a read: it is simply asked again.
		a.LastFailure = &history.Failure{Type: "LeaseLost", Message: "the Reconcile lookup's lease expired"}
		t.lookupAgain(a, 0, "lost its lease")
		return
	}
	kind := "start_to_close"
	if hb := a.Options.HeartbeatTimeout; hb > 0 && a.LeaseDeadline.Before(a.StartedTime.Add(a.Options.StartToCloseTimeout)) {
		kind = "heartbeat"
	}
	reason := "the worker's lease expired (" + kind + " timeout) before it reported an outcome"
	if a.Effect != history.SideEffect {
		if rec := a.record(a.LeaseEpoch); rec != nil && rec.Fate == FateRunning {
			rec.Fate = FateUnknown
		}
		t.retryOrFail(a, &history.Failure{Type: "Timeout", Message: reason}, kind)
		return
	}
	t.leaseLost(a, reason, t.now)
}

func (t *transition) fireScheduleToClose(d Deadline) {
	a, ok := t.st.Activities[d.ID]
	if !ok || a.State == api.ActivityStateUnknown {
		return
	}
	if a.Doubt != "" && a.Effect == history.SideEffect && !a.KeyPending {
		// An attempt lost in a recovery may have performed it: failing it
		// would say it did not happen (doubt.go).
		t.pause(a, "the schedule-to-close timeout expired while the outcome was in doubt after a recovery of the store ("+a.Doubt+")")
		return
	}
	if a.Effect == history.SideEffect && a.StartedEventID != 0 && a.State == api.ActivityStateStarted {
		t.leaseLost(a, "the schedule-to-close timeout expired while an attempt was running", t.now)
		return
	}
	t.failActivity(a, &history.Failure{Type: "Timeout", Message: "schedule-to-close timeout", NonRetryable: true}, "schedule_to_close")
}

func (t *transition) fireRunTimeout(d Deadline) {
	st := t.st
	at, which := st.RunDeadline, "run"
	if d.Kind == DeadlineExecutionTimeout {
		at, which = st.ExecutionDeadline, "execution"
	}
	if at.IsZero() || at.After(t.now) {
		return
	}
	t.add(&history.WorkflowTimedOut{Timeout: which})
	t.close(api.StatusTimedOut, history.Payload{}, &history.Failure{Type: "TimedOut", Message: which + " timeout", NonRetryable: true})
}

// Recovered adjusts a run's state read back when the engine opens, at now.
// A lease of an attempt whose intent was recorded is extended to at least
// now plus its heartbeat timeout (within its start-to-close end):
// heartbeats extend leases in memory only, so the engine cannot know the
// last deadline it granted before it stopped, only that it was no later
// than that. A live worker's next heartbeat renews it; a dead one's lease
// ends a heartbeat timeout after the restart.
func (m *Machine) Recovered(st *RunState, now time.Time) {
	for _, a := range st.Activities {
		hb := a.Options.HeartbeatTimeout
		if a.State != api.ActivityStateStarted || a.StartedEventID == 0 || hb <= 0 {
			continue
		}
		if d := leaseDeadline(a, now); d.After(a.LeaseDeadline) {
			a.LeaseDeadline = d
		}
	}
}

// Deadlines lists every deadline the state implies, for rebuilding the
// timer heap when the engine opens.
func (m *Machine) Deadlines(st *RunState) []Deadline {
	if !st.Status.Open() {
		return nil
	}
	var ds []Deadline
	add := func(d Deadline) {
		if !d.At.IsZero() {
			ds = append(ds, d)
		}
	}
	add(Deadline{At: st.ExecutionDeadline, Kind: DeadlineExecutionTimeout})
	add(Deadline{At: st.RunDeadline, Kind: DeadlineRunTimeout})
	if st.WFT.Scheduled && st.WFT.BackoffUntil.After(time.Time{}) {
		add(Deadline{At: st.WFT.BackoffUntil, Kind: DeadlineWFTBackoff})
	}
	for _, name := range sortedKeys(st.Timers) {
		ti := st.Timers[name]
		add(Deadline{At: ti.FireAt, Kind: DeadlineUserTimer, Name: name, Epoch: ti.StartedEventID})
	}
	for _, id := range sortedKeys(st.Activities) {
		a := st.Activities[id]
		if a.Options.ScheduleToCloseTimeout > 0 {
			add(Deadline{At: a.ScheduledTime.Add(a.Options.ScheduleToCloseTimeout), Kind: DeadlineScheduleToClose, ID: id})
		}
		switch a.State {
		case api.ActivityStateScheduled:
			if a.Options.ScheduleToStartTimeout > 0 && !a.Reconciling && !a.ReadyTime.IsZero() {
				add(Deadline{At: a.ReadyTime.Add(a.Options.ScheduleToStartTimeout), Kind: DeadlineScheduleToStart, ID: id, Epoch: int64(a.Attempt)})
			}
		case api.ActivityStateStarted:
			add(Deadline{At: a.LeaseDeadline, Kind: DeadlineActivityLease, ID: id, Epoch: a.LeaseEpoch})
		case api.ActivityStateBackoff:
			kind := DeadlineActivityRetry
			if a.QuietWait {
				kind = DeadlineQuiet
			}
			add(Deadline{At: a.NextAttemptAt, Kind: kind, ID: id, Epoch: int64(a.Attempt)})
		}
	}
	return ds
}
