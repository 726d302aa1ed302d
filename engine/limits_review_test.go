package engine

import (
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// TestActivityLimitSlotFreedWhenRunEnds: an attempt holding the only slot
// of a limit gives it back when its run ends without it reporting —
// terminated, deleted with force, reset — so the queue is not blocked
// until the attempt's start-to-close timeout.
func TestActivityLimitSlotFreedWhenRunEnds(t *testing.T) {
	h := newHarness(t)
	h.setLimit(api.ActivityLimit{LimitKey: "k", MaxInFlight: 1})
	ends := []func(id string){
		func(id string) { h.terminate(id) },
		func(id string) {
			if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: id, Force: true}); err != nil {
				t.Fatal(err)
			}
		},
		func(id string) {
			h.reset(api.ResetWorkflowRequest{WorkflowID: id, ToFirstTask: true})
			h.complete(h.pollWFT("q"), completeWF(`1`))
		},
	}
	for i, end := range ends {
		id := string(rune('a' + i))
		h.startScheduling(id, "llm", "k", history.Read, 1)
		a := h.pollActivityAs("w1")
		if a == nil || a.WorkflowID != id {
			t.Fatalf("%d: first %+v", i, a)
		}
		end(id)
		other := id + "-other"
		h.startScheduling(other, "llm", "k", history.Read, 1)
		b := h.pollActivityAs("w2")
		if b == nil || b.WorkflowID != other {
			t.Fatalf("%d: the slot of an ended run was not freed: %+v", i, b)
		}
		h.completeActivity(b, `1`)
		h.complete(h.pollWFT("q"), completeWF(`1`))
	}
}
