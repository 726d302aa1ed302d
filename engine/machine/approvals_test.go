package machine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// The approvals an agent awaits, scripted as sdk/agent records them: its
// approval-requested markers add a call to the run's state, in order, and
// make the run wait for a person; a decision takes its call out; an
// ignored approval changes nothing; a closed run awaits nothing.

func approvalMarker(name, key string, data any) api.Command {
	p := history.Payload{}
	if data != nil {
		b, err := msgpack.Marshal(data)
		if err != nil {
			panic(err)
		}
		p = history.Payload{Encoding: "msgpack", Data: b}
	}
	return api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: name, ID: key, Data: p}}
}

func requested(key, callID, tool, signal string) api.Command {
	return approvalMarker(history.MarkerApprovalRequested, key, &history.ApprovalRequest{CallID: callID, Tool: tool,
		Arguments: `{"invoice":"INV-9"}`, Signal: signal})
}

func decided(key string, ok bool, by string) api.Command {
	return approvalMarker(history.MarkerApprovalDecided, key, &history.Approval{Approved: ok, By: by})
}

// awaiting notes the calls the run awaits, and its effective status, in
// the golden trace.
func (s *script) awaiting() string {
	var calls []string
	for _, w := range s.st.Approvals {
		effect := "effect unknown"
		if w.EffectKnown {
			effect = w.Effect.String()
		}
		calls = append(calls, fmt.Sprintf("%s (call %s, %s, %s, signal %s, event %d, since +%s)", w.Key, w.CallID, w.Tool, effect,
			w.Signal, w.EventID, w.Since.Sub(testStart)))
	}
	got := fmt.Sprintf("%s; awaiting [%s]", s.st.EffectiveStatus(), strings.Join(calls, ", "))
	fmt.Fprintf(&s.out, "     == %s\n", got)
	return got
}

func TestApprovalsAwaited(t *testing.T) {
	s := newServiceScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "pay-INV-9", WorkflowType: "PayInvoiceAgent", TaskQueue: "q"})
	if got := s.awaiting(); got != "running; awaiting []" {
		t.Fatalf("a new run: %s", got)
	}

	// Two calls of one answer await approval; the payment tool's
	// declaration is known, the refund's is not.
	s.dispatchWFT()
	s.must("complete workflow task", func(st *RunState) (Output, error) {
		return s.m.CompleteWFT(st, WFTCompletion{Identity: "w1", Commands: []api.Command{
			requested("2:call_1", "call_1", "SendPayment", "approve"),
			requested("2:call_2", "call_2", "Refund", "approve"),
		}, Declarations: map[int]api.ActivityDeclaration{0: {ActivityType: "SendPayment", Effect: history.SideEffect}}}, s.now)
	})
	s.awaiting()
	if w := s.st.Approvals; s.st.EffectiveStatus() != api.StatusPaused || len(w) != 2 || w[0].CallID != "call_1" ||
		w[0].Tool != "SendPayment" || !w[0].EffectKnown || w[0].Effect != history.SideEffect || w[1].EffectKnown || w[0].EventID != 3 {
		t.Fatalf("awaiting %+v, status %s", w, s.st.EffectiveStatus())
	}

	// An approval signal that applied to no call is recorded as ignored:
	// the calls still wait. The first call's decision takes it out.
	s.advance(time.Minute)
	s.signal("approve", `{"CallID":"call_9","Approved":true}`)
	ignored := approvalMarker(history.MarkerApprovalIgnored, "call_9", &history.IgnoredApproval{CallID: "call_9", Approved: true,
		Why: `no tool call "call_9" is awaiting approval`})
	s.complete(ignored)
	if got := s.awaiting(); len(s.st.Approvals) != 2 {
		t.Fatalf("an ignored approval changed what the run awaits: %s", got)
	}
	s.signal("approve", `{"CallID":"call_1","Approved":true}`)
	s.complete(decided("2:call_1", true, "ada"), schedule("tool:2:call_1", "SendPayment", history.SideEffect, minute))
	if got := s.awaiting(); s.st.EffectiveStatus() != api.StatusPaused || len(s.st.Approvals) != 1 || s.st.Approvals[0].Key != "2:call_2" {
		t.Fatalf("after the first decision: %s", got)
	}
	// The second is rejected: the run waits for nobody.
	s.signal("approve", `{"CallID":"call_2","Approved":false}`)
	s.complete(decided("2:call_2", false, "bob"))
	if got := s.awaiting(); s.st.EffectiveStatus() != api.StatusRunning || s.st.Approvals != nil {
		t.Fatalf("after both decisions: %s", got)
	}

	// A request as histories recorded it before it carried anything (an
	// empty Approval): the call id of its key, the default signal.
	s.signal("ask", `"and INV-7?"`)
	s.complete(approvalMarker(history.MarkerApprovalRequested, "3:call_3#2", &history.Approval{}))
	if w := s.st.Approvals; len(w) != 1 || w[0].CallID != "call_3" || w[0].Signal != history.DefaultApprovalSignal || w[0].Tool != "" {
		t.Fatalf("an old-form request: %+v", w)
	}
	s.awaiting()

	// The state round-trips through its stored form.
	b, err := api.MarshalMsgpack(s.st)
	if err != nil {
		t.Fatal(err)
	}
	var back RunState
	if err := msgpack.Unmarshal(b, &back); err != nil || len(back.Approvals) != 1 || !back.Approvals[0].Since.Equal(s.st.Approvals[0].Since) {
		t.Fatalf("stored and read back: %+v %v", back.Approvals, err)
	}
	w := back.Approvals[0]
	w.Since = s.st.Approvals[0].Since // times read back in the local zone
	if w != s.st.Approvals[0] {
		t.Fatalf("stored and read back: %+v, want %+v", w, s.st.Approvals[0])
	}

	// A closed run waits for nobody.
	s.signal("stop", `true`)
	s.complete(completeWF(`"done"`))
	if got := s.awaiting(); s.st.Approvals != nil || s.st.EffectiveStatus() != api.StatusCompleted {
		t.Fatalf("closed: %s", got)
	}
	s.golden()
}
