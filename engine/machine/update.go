package machine

import (
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// CanAcceptUpdate reports why the run cannot accept one more update, if
// it cannot: it is closed, its history is full, or it has accepted
// Limits.MaxUpdates. The service asks before it has the update validated,
// and AcceptUpdate asks again.
func (m *Machine) CanAcceptUpdate(st *RunState) error {
	if err := m.checkOpen(st); err != nil {
		return err
	}
	if m.Limits.MaxUpdates > 0 && len(st.Updates) >= m.Limits.MaxUpdates {
		return api.Errorf(api.ErrLimitExceeded, "workflow %q run %q has accepted %d updates, the limit (Limits.MaxUpdates); continue as new",
			st.WorkflowID, st.RunID, len(st.Updates))
	}
	// The acceptance and, later, the completion.
	return m.checkGrowth(st, 2)
}

// AcceptUpdate records an update its validator accepted
// (WorkflowUpdateAccepted) and schedules a workflow task, whose code runs
// the update's handler. An update id the run accepted already records
// nothing (the caller answers from UpdateRecord).
func (m *Machine) AcceptUpdate(st *RunState, id, name string, input history.Payload, identity string, now time.Time) (Output, error) {
	if st.Update(id) != nil {
		return Output{}, nil
	}
	if err := m.CanAcceptUpdate(st); err != nil {
		return Output{}, err
	}
	t := m.begin(st, now)
	ev := t.add(&history.WorkflowUpdateAccepted{UpdateID: id, Name: name, Input: input, Identity: identity})
	st.Updates = append(st.Updates, UpdateRecord{ID: id, AcceptedEventID: ev, Name: name})
	t.needWFT()
	return t.out, nil
}

// completeUpdate applies a CompleteUpdate command (validated: the update
// is accepted and not completed).
func (t *transition) completeUpdate(c *api.CompleteUpdateCommand, wtc int64) {
	u := t.st.Update(c.UpdateID)
	ev := t.add(&history.WorkflowUpdateCompleted{UpdateID: c.UpdateID, AcceptedEventID: u.AcceptedEventID, Result: c.Result,
		Failure: c.Failure, WorkflowTaskCompletedEventID: wtc})
	u.CompletedEventID = ev
}
