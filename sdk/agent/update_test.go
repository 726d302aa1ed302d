package agent_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
)

// An approval sent as an update answers at once: an unknown call, a
// value that is not an Approval and a call already decided are rejected
// (nothing is recorded); an approval that applies answers the decision.
// Decide sends a decision as the update on request.
func TestApprovalUpdateAnswersSynchronously(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, _ := newEnv(t, fakellm.Script{
		fakellm.CallTools(fakellm.ToolCall{Name: "SendPayment", Arguments: `{"invoice":"INV-1","amount":100}`},
			fakellm.ToolCall{Name: "SendPayment", Arguments: `{"invoice":"INV-2","amount":200}`}),
		fakellm.Say("Paid INV-1."),
	})
	const id = "approve-by-update"
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: env.TaskQueue()}, Payer, "INV-1 and INV-2")
	must(t, err)
	waitFor(t, ctx, env.Client, id, nth(2, isMarker(history.MarkerApprovalRequested)))
	d, err := env.Client.DescribeWorkflow(ctx, id, "")
	must(t, err)
	if len(d.PendingApprovals) != 2 {
		t.Fatalf("pending approvals %+v", d.PendingApprovals)
	}
	first, second := d.PendingApprovals[0].CallID, d.PendingApprovals[1].CallID
	approve := func(v any) (agent.ApprovalOutcome, error) {
		var out agent.ApprovalOutcome
		h, err := env.Client.UpdateWorkflow(ctx, client.UpdateOptions{WorkflowID: id, Name: agent.ApprovalSignal, Args: v})
		if err == nil {
			err = h.Get(ctx, &out)
		}
		return out, err
	}

	before, err := env.Client.GetHistory(ctx, id, "")
	must(t, err)
	for _, c := range []struct {
		v    any
		want string
	}{
		{agent.Approval{CallID: "nope", Approved: true}, `no tool call "nope" is awaiting approval; awaiting: ` + first + ", " + second},
		{jsonSignal(`{"aproved":true}`), `not an agent.Approval: unknown field "aproved"`},
	} {
		if _, err := approve(c.v); !errors.Is(err, api.ErrUpdateRejected) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("approving %v: %v, want a rejection saying %q", c.v, err, c.want)
		}
	}
	after, err := env.Client.GetHistory(ctx, id, "")
	must(t, err)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("rejected approvals changed the history: %d events, was %d", len(after), len(before))
	}

	out, err := approve(agent.Approval{CallID: first, Approved: true, By: "ada"})
	if err != nil || out != (agent.ApprovalOutcome{CallID: first, Approved: true}) {
		t.Fatalf("approving %s: %+v, %v", first, out, err)
	}
	if _, err := approve(agent.Approval{CallID: first, Approved: false, By: "bob"}); !errors.Is(err, api.ErrUpdateRejected) ||
		!strings.Contains(err.Error(), "already approved by ada") {
		t.Fatalf("deciding %s again: %v", first, err)
	}
	// Decide sends it as the update when asked to.
	p, err := agent.Decide(ctx, env.Client.Service(), agent.Decision{WorkflowID: id, Approved: false, By: "bob", Reason: "twice", AsUpdate: true})
	if err != nil || p.CallID != second {
		t.Fatalf("Decide as an update: %+v, %v", p, err)
	}
	must(t, run.Get(ctx, nil))
	evs, err := env.Client.GetHistory(ctx, id, "")
	must(t, err)
	updates, signals := 0, 0
	for _, ev := range evs {
		switch ev.Type() {
		case history.TypeWorkflowUpdateCompleted:
			updates++
		case history.TypeSignalReceived:
			signals++
		}
	}
	if updates != 2 || signals != 0 {
		t.Fatalf("%d updates and %d signals decided the calls, want 2 updates", updates, signals)
	}
	if n := tl.count("SendPayment"); n != 1 {
		t.Fatalf("the payment ran %d times", n)
	}
	replay(t, ctx, env, id, run.RunID())
}
