package worker_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// Traced greets, naps, and greets again.
func Traced(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	first, err := sdk.ExecuteActivity(ctx, Greet, name).Get(ctx) // trace: waits for the greeting
	if err != nil {
		return "", err
	}
	if err := sdk.Sleep(ctx, time.Hour); err != nil { // trace: waits for the timer
		return "", err
	}
	second, err := sdk.ExecuteActivity(ctx, Greet, name+" again").Get(ctx)
	return first + " " + second, err
}

// lineOf returns the line of this file that carries marker.
func lineOf(t *testing.T, marker string) string {
	t.Helper()
	f, err := os.Open("replayer_test.go")
	must(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if strings.Contains(sc.Text(), marker) && !strings.Contains(sc.Text(), "lineOf") {
			return fmt.Sprintf("replayer_test.go:%d", n)
		}
	}
	t.Fatalf("no line carries %q", marker)
	return ""
}

func TestReplayFileTrace(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(Traced)
	env.RegisterActivity(Greet)
	env.Start()
	run := start(t, ctx, env.Client, env.TaskQueue(), "traced", Traced, "ada")
	must(t, run.Get(ctx, nil))

	// Export the history as `cairn history export` does, and replay the file.
	evs, err := env.Client.GetHistory(ctx, "traced", run.RunID())
	must(t, err)
	path := filepath.Join(t.TempDir(), "traced.json")
	var file bytes.Buffer
	must(t, history.ExportJSON(&file, history.RunRef{WorkflowID: "traced", RunID: run.RunID()}, evs))
	must(t, os.WriteFile(path, file.Bytes(), 0o644))

	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Traced))
	var trace bytes.Buffer
	must(t, r.ReplayFile(path, worker.ReplayOptions{Trace: &trace}))
	out := trace.String()
	t.Logf("trace:\n%s", out)

	for _, want := range []string{
		"── decision 1: replayed, recorded at event 2",
		"event    1  WorkflowStarted",
		"command     ScheduleActivity Greet (id 1)",
		"ActivityCompleted of 3",
		"command     StartTimer 1 (1h0m0s)",
		"TimerFired",
		"command     CompleteWorkflow",
		"waiting at  root: github.com/cairnflow/cairn/worker_test.Traced (",
		lineOf(t, "trace: waits for the greeting") + ")",
		lineOf(t, "trace: waits for the timer") + ")",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the trace lacks %q", want)
		}
	}
	if strings.Contains(out, "ERROR") || strings.Contains(out, "live") {
		t.Error("a finished history replays without errors or live decisions")
	}

	// A changed workflow fails the replay, and the trace shows where.
	r2 := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r2.RegisterWorkflow(Hello, sdk.RegisterOptions{Name: "Traced"}))
	trace.Reset()
	err = r2.ReplayFile(path, worker.ReplayOptions{Trace: &trace})
	if err == nil || !strings.Contains(trace.String(), "ERROR       sdk: nondeterminism at event") {
		t.Fatalf("replay of changed code: %v\n%s", err, trace.String())
	}
}

// A history of a workflow type the replayer has not registered fails with
// sdk.ErrUnknownWorkflowType naming the type and those it has.
func TestReplayUnknownWorkflowType(t *testing.T) {
	evs := []history.Event{{ID: 1, Attrs: &history.WorkflowStarted{WorkflowType: "ShipOrder"}}}
	r := worker.NewReplayer(worker.ReplayerOptions{})
	err := r.ReplayHistory(history.RunRef{WorkflowID: "ship-1"}, evs, worker.ReplayOptions{})
	if !errors.Is(err, sdk.ErrUnknownWorkflowType) || !strings.Contains(err.Error(), `"ShipOrder": it is not registered (none is)`) {
		t.Fatalf("replay of an unregistered type with none registered: %v", err)
	}
	must(t, r.RegisterWorkflow(Traced))
	err = r.ReplayHistory(history.RunRef{WorkflowID: "ship-1"}, evs, worker.ReplayOptions{})
	if !errors.Is(err, sdk.ErrUnknownWorkflowType) || !strings.Contains(err.Error(), "(registered: Traced)") {
		t.Fatalf("replay of an unregistered type: %v", err)
	}
}
