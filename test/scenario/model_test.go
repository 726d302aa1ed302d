package scenario_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
)

// A model that keeps asking for tools ends the run at the turn limit with
// the agent's ErrMaxTurns, not a loop.
func TestModelThatNeverStopsHitsTheTurnLimit(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{fakellm.CallTool("CheckVendor", `{"id":"INV-L"}`)})
	s := newScene(t, model)
	err := s.start(t, ctx, "loop", Task{}).Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), agent.ErrMaxTurns.Error()) || model.Calls() != 20 {
		t.Fatalf("ended with %v after %d model calls, want %q after 20", err, model.Calls(), agent.ErrMaxTurns)
	}
}

// The endpoint's faults, as docs/agents.md classifies them: a 429 with
// Retry-After, a 500 and a malformed answer are retried and the run
// finishes; a 400 fails the model call for good and the run with a clear
// ModelRequestRejected error.
func TestModelEndpointFaults(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(fakellm.Script{
		{Content: "Fine.", Faults: []fakellm.Reply{{Status: 429, RetryAfter: 30 * time.Second}, {Status: 500}, {Malformed: true}}},
	})
	s := newScene(t, model)
	var res agent.Result
	must(t, s.start(t, ctx, "transient", Task{}).Get(ctx, &res))
	if res.Final != "Fine." || model.Calls() != 4 {
		t.Fatalf("result %+v after %d model calls, want 4", res, model.Calls())
	}
	d, err := s.env.Client.DescribeWorkflow(ctx, "transient", "")
	must(t, err)
	if d.Usage == nil || d.Usage.Total.Attempts < 1 {
		t.Fatalf("usage %+v", d.Usage)
	}

	rejecting := fakellm.New(fakellm.Script{{Status: 400}})
	s2 := newScene(t, rejecting)
	err = s2.start(t, ctx, "rejected", Task{}).Get(ctx, nil)
	var app *sdk.ApplicationError
	if err == nil || !errors.As(err, &app) || app.Type != "ModelRequestRejected" || rejecting.Calls() != 1 {
		t.Fatalf("a 400 ended the run with %v (%T) after %d calls", err, err, rejecting.Calls())
	}
}
