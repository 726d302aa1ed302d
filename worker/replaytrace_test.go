package worker_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// A trace names the lines workflow code waits at relative to the working
// directory (here the package's), not as absolute paths.
func TestReplayTraceShowsRelativePaths(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Traced)
	env.RegisterActivity(Greet)
	env.Start()
	run := start(t, ctx, env.Client, env.TaskQueue(), "traced-rel", Traced, "ada")
	must(t, run.Get(ctx, nil))
	evs, err := env.Client.GetHistory(ctx, "traced-rel", run.RunID())
	must(t, err)
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Traced))
	var trace bytes.Buffer
	must(t, r.ReplayHistory(history.RunRef{WorkflowID: "traced-rel", RunID: run.RunID()}, evs, worker.ReplayOptions{Trace: &trace}))
	want := "worker_test.Traced (" + lineOf(t, "trace: waits for the greeting") + ")"
	if out := trace.String(); !strings.Contains(out, want) {
		t.Fatalf("the trace lacks %q:\n%s", want, out)
	}
}

// A history of an unknown workflow type fails naming the type, even when
// it also references payload chunks the replay does not have (it used to
// fail first saying to export it with --inline).
func TestReplayUnknownTypeBeforeMissingChunks(t *testing.T) {
	ref := make([]byte, 32)
	ref[0] = 1
	evs := []history.Event{{ID: 1, Time: time.Unix(1, 0), Attrs: &history.WorkflowStarted{WorkflowType: "ShipOrder",
		Input: history.Payload{Encoding: sdk.EncodingMsgpack, Ref: ref}}}}
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Traced))
	err := r.ReplayHistory(history.RunRef{WorkflowID: "ship-1", RunID: "r1"}, evs, worker.ReplayOptions{})
	if !errors.Is(err, sdk.ErrUnknownWorkflowType) || !strings.Contains(err.Error(), `"ShipOrder"`) || strings.Contains(err.Error(), "--inline") {
		t.Fatalf("replay of an unknown type with missing chunks: %v", err)
	}
}
