package machine

import (
	"errors"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

func completeUpdate(id, result string) api.Command {
	return api.Command{Type: api.CommandCompleteUpdate, CompleteUpdate: &api.CompleteUpdateCommand{UpdateID: id, Result: jsonPayload(result)}}
}

func (s *script) acceptUpdate(id, name, input string) (Output, error) {
	s.t.Helper()
	return s.do("accept update "+id, func(st *RunState) (Output, error) {
		return s.m.AcceptUpdate(st, id, name, jsonPayload(input), "cli", s.now)
	})
}

// An accepted update is recorded once per id and schedules a workflow
// task; its completion is a command, refused for an update that is not
// accepted or already completed; the limit counts accepted updates.
func TestUpdateAcceptAndComplete(t *testing.T) {
	s := newServiceScript(t)
	s.m.Limits.MaxUpdates = 2
	s.start(api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "Desk", TaskQueue: "q"})
	s.complete()
	if _, err := s.acceptUpdate("u1", "decide", `{"call":"pay"}`); err != nil {
		t.Fatal(err)
	}
	if !s.st.WFT.Scheduled {
		t.Fatal("an accepted update scheduled no workflow task")
	}
	// The same id again records nothing.
	if out, err := s.acceptUpdate("u1", "decide", `{"call":"other"}`); err != nil || len(out.Events) != 0 {
		t.Fatalf("the same update id again: %d events, %v", len(out.Events), err)
	}
	s.dispatchWFT()
	for _, c := range [][]api.Command{{completeUpdate("u2", `"no"`)}, {completeUpdate("u1", `"a"`), completeUpdate("u1", `"b"`)}} {
		if _, err := s.do("complete workflow task", func(st *RunState) (Output, error) {
			return s.m.CompleteWFT(st, WFTCompletion{Commands: c}, s.now)
		}); !errors.Is(err, api.ErrInvalidArgument) {
			t.Fatalf("completing %+v: %v, want ErrInvalidArgument", c, err)
		}
	}
	s.completeTask(completeUpdate("u1", `"approved"`))
	u := s.st.Update("u1")
	if u == nil || u.AcceptedEventID != 3 || u.CompletedEventID != 5 {
		t.Fatalf("update record %+v", u)
	}
	if c, _ := find[*history.WorkflowUpdateCompleted](t, s.history); c.AcceptedEventID != 3 || c.WorkflowTaskCompletedEventID != 4 {
		t.Fatalf("WorkflowUpdateCompleted %+v", c)
	}
	if _, err := s.acceptUpdate("u2", "decide", `{}`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.acceptUpdate("u3", "decide", `{}`); !errors.Is(err, api.ErrLimitExceeded) {
		t.Fatalf("past MaxUpdates: %v", err)
	}
	wantTypes(t, s.history, "WorkflowStarted WorkflowTaskCompleted WorkflowUpdateAccepted WorkflowTaskCompleted WorkflowUpdateCompleted WorkflowUpdateAccepted")
	s.golden()
}
