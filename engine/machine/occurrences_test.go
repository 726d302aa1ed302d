package machine

import (
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

var occOpts = history.ActivityOptions{StartToCloseTimeout: time.Minute}

// pay schedules a SideEffect Pay for invoice (its key material is its
// input).
func pay(id, invoice string) api.Command {
	c := schedule(id, "Pay", history.SideEffect, occOpts)
	c.ScheduleActivity.Input = jsonPayload(fmt.Sprintf(`{"invoice":%q}`, invoice))
	return c
}

// payKey is the key the n-th identical Pay of invoice must get.
func payKey(workflowID, invoice string, n int32) string {
	return IdempotencyKey(workflowID, "Pay", []byte(fmt.Sprintf(`{"invoice":%q}`, invoice)), n)
}

// keysOf returns the idempotency keys of the scheduled activities by
// activity id (the last run's, in the order scheduled).
func keysOf(evs []history.Event) map[string]string {
	keys := map[string]string{}
	for _, ev := range evs {
		if a, ok := ev.Attrs.(*history.ActivityScheduled); ok {
			keys[a.ActivityID] = a.IdempotencyKey
		}
	}
	return keys
}

func wantKeys(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for id, k := range want {
		if got[id] != k {
			t.Errorf("activity %s has key %q, want %q", id, got[id], k)
		}
	}
}

// TestMachineReadsEarlierFormFirst: while a run state of the earlier form
// is not migrated, its map is the committed count — no record is read —
// and a count this transition advanced is read back from the working
// copy, not from the store.
func TestMachineReadsEarlierFormFirst(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	reads := 0
	s.m.Occurrence = func(history.RunRef, string) (int32, error) { reads++; return 7, nil }
	s.st.Occurrences = map[string]int32{OccurrenceKey("Pay", []byte(`{"invoice":"INV-1"}`)): 2}
	evs := s.complete(pay("a3", "INV-1"), pay("a4", "INV-1")).Events
	s.st.Occurrences = nil // as the commit of that transition leaves it
	evs = append(evs, s.complete(pay("b8", "INV-2"), pay("b9", "INV-2")).Events...)
	if reads != 1 {
		t.Errorf("%d counts read from the store, want 1 (INV-2's first)", reads)
	}
	wantKeys(t, keysOf(evs), map[string]string{"a3": payKey("wf", "INV-1", 3), "a4": payKey("wf", "INV-1", 4),
		"b8": payKey("wf", "INV-2", 8), "b9": payKey("wf", "INV-2", 9)})
}
