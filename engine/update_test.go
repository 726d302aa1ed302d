package engine

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

func completeUpdate(id, result string) api.Command {
	return api.Command{Type: api.CommandCompleteUpdate, CompleteUpdate: &api.CompleteUpdateCommand{UpdateID: id, Result: jsonPayload(result)}}
}

// respondValidation answers the next update validation on "q" (completing
// the workflow tasks queued before it with no commands) and returns how
// many workflow tasks it completed first.
func (h *harness) respondValidation(name string, rejection string) int {
	h.t.Helper()
	n := 0
	for {
		task := h.pollWFT("q")
		if task.Query == nil {
			h.complete(task)
			n++
			continue
		}
		if !task.Query.Update || task.Query.QueryType != name {
			h.t.Fatalf("validation task %+v", task.Query)
		}
		req := &api.RespondQueryTaskRequest{TaskToken: task.TaskToken}
		if rejection != "" {
			req.Rejected, req.Failure = true, &history.Failure{Type: "Rejected", Message: rejection}
		}
		if _, err := h.eng.RespondQueryTask(h.ctx(), req); err != nil {
			h.t.Fatal(err)
		}
		return n
	}
}

func TestUpdateWorkflow(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	update := func(id string) <-chan asyncRes[*api.UpdateWorkflowResponse] {
		return async(func() (*api.UpdateWorkflowResponse, error) {
			return h.eng.UpdateWorkflow(h.ctx(), &api.UpdateWorkflowRequest{WorkflowID: "wf", UpdateID: id, Name: "decide",
				Input: jsonPayload(`{"call":"pay"}`)})
		})
	}

	// Rejected: the caller hears why, and nothing is written.
	before := h.history("wf")
	ch := update("u0")
	h.respondValidation("decide", `unknown call "pay"`)
	r := <-ch
	wantErr(t, r.err, api.ErrUpdateRejected)
	if !strings.Contains(r.err.Error(), `unknown call "pay"`) {
		t.Fatalf("rejection %v", r.err)
	}
	if after := h.history("wf"); !reflect.DeepEqual(after, before) {
		t.Fatalf("a rejected update changed the history: %d events, was %d", len(after), len(before))
	}
	h.noWFT("q")

	// The run changes while the worker validates: the acceptance would
	// follow a state the validator did not see, so it is validated again.
	ch = update("u1")
	task := h.pollWFT("q")
	h.signal("wf", "poke", `1`)
	if _, err := h.eng.RespondQueryTask(h.ctx(), &api.RespondQueryTaskRequest{TaskToken: task.TaskToken}); err != nil {
		t.Fatal(err)
	}
	if n := h.respondValidation("decide", ""); n != 1 {
		t.Fatalf("%d workflow tasks before the second validation, want the signal's", n)
	}
	// Accepted: its handler's completion is a command.
	task = h.pollWFT("q")
	acc, ok := task.Events[len(task.Events)-1].Attrs.(*history.WorkflowUpdateAccepted)
	if !ok || acc.UpdateID != "u1" || acc.Name != "decide" {
		t.Fatalf("the task's last event is %s, want the update's acceptance", task.Events[len(task.Events)-1].Type())
	}
	h.complete(task, completeUpdate("u1", `"paid"`))
	resp := await(t, ch)
	if resp.Stage != api.UpdateStageCompleted || string(resp.Result.Data) != `"paid"` || resp.UpdateID != "u1" {
		t.Fatalf("update response %+v", resp)
	}

	// The same id again: the same outcome, without a validation.
	again := await(t, update("u1"))
	if !reflect.DeepEqual(again, resp) {
		t.Fatalf("the same update again: %+v, want %+v", again, resp)
	}
	h.noWFT("q")
	if n := countType(h.history("wf"), history.TypeWorkflowUpdateAccepted); n != 1 {
		t.Fatalf("%d acceptances", n)
	}

	// A closed run takes no update, and still answers the ones it took.
	h.signal("wf", "poke", `2`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	wantErr(t, (<-update("u2")).err, api.ErrWorkflowClosed)
	if got := await(t, update("u1")); string(got.Result.Data) != `"paid"` {
		t.Fatalf("a closed run's update: %+v", got)
	}
}
