package machine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// resolveRefusal resolves req on s's run, which must be refused with a
// *api.NotPausedError; it returns the error's text.
func resolveRefusal(t *testing.T, s *script, req api.ResolveActivityRequest) (*api.NotPausedError, string) {
	t.Helper()
	req.Resolution, req.Identity, req.Reason = history.ResolvedHappened, "clerk", "checked"
	_, err := s.m.Resolve(s.st.Clone(), &req, s.now)
	var np *api.NotPausedError
	if !errors.As(err, &np) || !errors.Is(err, api.ErrNotPaused) {
		t.Fatalf("resolve %+v: %v, want a *api.NotPausedError", req, err)
	}
	msg := err.Error()
	if strings.Contains(msg, `0/""`) || strings.Contains(msg, "matching") {
		t.Errorf("resolve %+v: the refusal shows the request's internals: %q", req, msg)
	}
	return np, msg
}

// TestResolveRefusalSaysWhatTheRunDoes: a resolve of a run that is not
// paused, of an activity that is not, or of no pending activity is
// refused saying what the run (or that activity) does instead and what on
// the run can be resolved — not with the request's 0/"" in the text.
func TestResolveRefusalSaysWhatTheRunDoes(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "invoice-INV-9", WorkflowType: "PayInvoice", TaskQueue: "q"})
	s.complete(schedule("pay", "SendPayment", history.SideEffect, minute), schedule("mail", "SendMail", history.Read, minute))
	s.dispatchActivity(3)

	// Nothing paused: the run's pending work, and nothing to resolve.
	np, msg := resolveRefusal(t, s, api.ResolveActivityRequest{WorkflowID: "invoice-INV-9"})
	for _, want := range []string{`cairn: not paused: workflow "invoice-INV-9" run "run-1" is running: `,
		`activity "pay" (SendPayment, scheduled event 3) is running attempt 1 on worker "w1"`,
		`activity "mail" (SendMail, scheduled event 4) is waiting for a worker on task queue "q" (attempt 1)`,
		"; nothing on this run can be resolved"} {
		if !strings.Contains(msg, want) {
			t.Errorf("resolve of a run that is not paused: %q does not say %q", msg, want)
		}
	}
	if np.Activity != "" || len(np.Resolvable) != 0 {
		t.Errorf("resolve of a run that is not paused: %+v", np)
	}

	// The payment's outcome becomes unknown: naming the other activity
	// says what it does, and points at the one that can be resolved.
	s.advance(time.Minute)
	s.fireDue()
	if s.st.Paused() == nil {
		t.Fatal("the payment did not pause the run")
	}
	_, msg = resolveRefusal(t, s, api.ResolveActivityRequest{WorkflowID: "invoice-INV-9", ActivityID: "mail"})
	for _, want := range []string{`workflow "invoice-INV-9" run "run-1": activity "mail" (SendMail, scheduled event 4) is waiting for a worker`,
		`; what can be resolved: activity "pay" (SendPayment, scheduled event 3)`} {
		if !strings.Contains(msg, want) {
			t.Errorf("resolve of an activity that is not paused: %q does not say %q", msg, want)
		}
	}
	_, msg = resolveRefusal(t, s, api.ResolveActivityRequest{WorkflowID: "invoice-INV-9", ActivityID: "nope"})
	if !strings.Contains(msg, `activity "nope" is no pending activity`) || !strings.Contains(msg, `what can be resolved: activity "pay"`) {
		t.Errorf("resolve of no pending activity: %q", msg)
	}
	_, msg = resolveRefusal(t, s, api.ResolveActivityRequest{WorkflowID: "invoice-INV-9", ScheduledEventID: 99})
	if !strings.Contains(msg, `scheduled event 99 is no pending activity`) {
		t.Errorf("resolve of no pending event: %q", msg)
	}
}

// TestResolveRefusalNamesApprovalWaits: a run paused for a tool call's
// approval is not paused on an unknown outcome: the refusal says what it
// waits for and how to decide it.
func TestResolveRefusalNamesApprovalWaits(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "agent", WorkflowType: "Agent", TaskQueue: "q"})
	s.st.Approvals = []ApprovalWait{{Key: "1:c1", CallID: "c1", Tool: "SendPayment", Signal: "approvals", Since: s.now}}
	_, msg := resolveRefusal(t, s, api.ResolveActivityRequest{WorkflowID: "agent"})
	if want := `is paused for an approval: tool call "c1" (SendPayment) awaits a person's approval since`; !strings.Contains(msg, want) ||
		!strings.Contains(msg, "cairn workflow approve or reject") {
		t.Errorf("resolve of a run awaiting an approval: %q does not say %q and how to decide it", msg, want)
	}
}
