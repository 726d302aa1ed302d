package engine

import (
	"github.com/cairnflow/cairn/engine/api"
)

// Asynchronous completion: an activity that returned
// activities.ErrResultPending is reported later by whoever holds its task
// token, or by its ids (workflow id, run id, activity id). A report by id
// is the report of the activity's current attempt: it is turned into that
// attempt's token here and then takes the same path as a worker's report
// (engine/machine, report.go) — the ledger, late reports and duplicate
// judgement included.

// activityToken reads the task token of an activity report: tok when it
// is set, else the token of the current attempt of the activity the ids
// name.
func (e *Engine) activityToken(tok []byte, workflowID, runID, activityID string) (actToken, error) {
	var t actToken
	if len(tok) > 0 {
		if workflowID != "" || runID != "" || activityID != "" {
			return t, api.Errorf(api.ErrInvalidArgument, "an activity report names its activity by task token or by ids, not both")
		}
		err := decodeToken(tok, &t)
		return t, err
	}
	if workflowID == "" || activityID == "" {
		return t, api.Errorf(api.ErrInvalidArgument, "an activity report needs a task token, or a workflow id and an activity id")
	}
	return e.currentAttempt(workflowID, runID, activityID)
}

// currentAttempt returns the token of the attempt that holds the lease of
// the pending activity activityID of the open run of workflowID (runID,
// when set, must be that run).
func (e *Engine) currentAttempt(workflowID, runID, activityID string) (actToken, error) {
	unlock := e.lock(workflowID)
	defer unlock()
	if err := e.shards.check(workflowID); err != nil {
		return actToken{}, err
	}
	entry := e.openRun(workflowID)
	if entry == nil || runID != "" && entry.ref.RunID != runID {
		return actToken{}, api.Errorf(api.ErrNotFound, "workflow %q has no open run%s: its activities are closed", workflowID, runSuffix(runID))
	}
	if c := e.corrupt.lookup(workflowID, entry.ref.RunID); c != nil {
		return actToken{}, c.err()
	}
	st := entry.state
	var found []int64
	for _, id := range sortedKeys(st.Activities) {
		if st.Activities[id].ActivityID == activityID {
			found = append(found, id)
		}
	}
	switch {
	case len(found) == 0:
		return actToken{}, api.Errorf(api.ErrNotFound, "workflow %q run %q has no pending activity %q (it has closed: completed, failed, "+
			"timed out or canceled; or no activity has this id)", workflowID, entry.ref.RunID, activityID)
	case len(found) > 1:
		return actToken{}, api.Errorf(api.ErrInvalidArgument, "workflow %q run %q has %d pending activities with id %q: report by task token",
			workflowID, entry.ref.RunID, len(found), activityID)
	}
	a := st.Activities[found[0]]
	if a.State != api.ActivityStateStarted && a.State != api.ActivityStateUnknown || a.Reconciling || a.KeyPending || a.LeaseEpoch == 0 {
		return actToken{}, api.Errorf(api.ErrFailedPrecondition, "activity %q (event %d) of workflow %q run %q has no attempt running (%s): "+
			"only a running attempt can be reported by id", activityID, a.ScheduledEventID, workflowID, entry.ref.RunID, attemptState(a.State, a.Reconciling, a.KeyPending))
	}
	return actToken{W: workflowID, R: entry.ref.RunID, S: a.ScheduledEventID, E: a.LeaseEpoch, A: a.Attempt}, nil
}

func runSuffix(runID string) string {
	if runID == "" {
		return ""
	}
	return " " + runID
}

// attemptState says why an activity has no attempt to report.
func attemptState(s api.ActivityState, reconciling, keyPending bool) string {
	switch {
	case reconciling:
		return "its Reconcile lookup is running"
	case keyPending:
		return "its key is being computed"
	}
	return "it is " + s.String()
}
