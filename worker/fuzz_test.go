package worker_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// Replay of damaged or altered histories: whatever a history holds, the
// replayer returns (nil or an error), never panics, never hangs.

// Rich touches most of what a history can hold: activities (one in a
// coroutine), a timer, a signal, a side effect, a version marker, a child.
func Rich(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	v := sdk.GetVersion(ctx, "greeting", sdk.DefaultVersion, 1)
	n := sdk.SideEffect(ctx, func(sdk.Context) int { return 7 })
	var second string
	done := false
	sdk.Go(ctx, func(ctx sdk.Context) {
		second, _ = sdk.ExecuteActivity(ctx, Greet, name+" again").Get(ctx)
		done = true
	})
	first, err := sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	if err := sdk.Sleep(ctx, time.Minute); err != nil {
		return "", err
	}
	by := sdk.GetSignalChannel[string](ctx, "approve").Receive(ctx)
	if err := sdk.Await(ctx, func() bool { return done }); err != nil {
		return "", err
	}
	kid, err := sdk.ExecuteChildWorkflow(ctx, Kid, by).Get(ctx)
	if err != nil {
		return "", err
	}
	return strings.Join([]string{first, second, by, kid, string(rune('0' + n)), string(rune('0' + int(v)))}, " "), nil
}

// Kid is Rich's child.
func Kid(_ sdk.Context, by string) (string, error) { return "kid of " + by, nil }

var richHistory struct {
	once sync.Once
	run  history.RunRef
	evs  []history.Event
	err  error
}

// recordRich runs Rich once and returns its history.
func recordRich(t testing.TB) (history.RunRef, []history.Event) {
	richHistory.once.Do(func() {
		env := newEnv(t, testenv.Options{})
		env.RegisterWorkflow(Rich)
		env.RegisterWorkflow(Kid)
		env.RegisterActivity(Greet)
		env.Start()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "rich", TaskQueue: env.TaskQueue()}, Rich, "ada")
		if err == nil {
			err = env.Client.SignalWorkflow(ctx, "rich", "", "approve", "grace")
		}
		if err == nil {
			err = run.Get(ctx, nil)
		}
		if err == nil {
			richHistory.run = history.RunRef{WorkflowID: "rich", RunID: run.RunID()}
			richHistory.evs, err = env.Client.GetHistory(ctx, "rich", run.RunID())
		}
		richHistory.err = err
	})
	if richHistory.err != nil {
		t.Fatal(richHistory.err)
	}
	return richHistory.run, richHistory.evs
}

func richReplayer(t testing.TB) *worker.Replayer {
	r := worker.NewReplayer(worker.ReplayerOptions{})
	if err := errors.Join(r.RegisterWorkflow(Rich), r.RegisterWorkflow(Kid)); err != nil {
		t.Fatal(err)
	}
	return r
}

// mutate applies the fuzzer's edits to a copy of evs. Each edit is three
// bytes: what, which event, an argument.
func mutate(evs []history.Event, edits []byte) []history.Event {
	out := append([]history.Event(nil), evs...)
	for len(edits) >= 3 && len(out) > 0 {
		op, i, arg := edits[0]%6, int(edits[1])%len(out), int(edits[2])
		edits = edits[3:]
		switch op {
		case 0: // drop
			out = append(out[:i], out[i+1:]...)
		case 1: // duplicate
			out = append(out[:i+1], out[i:]...)
		case 2: // swap with another
			j := arg % len(out)
			out[i], out[j] = out[j], out[i]
		case 3: // become another event (the attributes of another)
			out[i].Attrs = out[arg%len(out)].Attrs
		case 4: // renumber
			out[i].ID = int64(arg)
		case 5: // cut the history here
			out = out[:i]
		}
	}
	return out
}

// FuzzReplayMutated replays a real history of Rich with events dropped,
// duplicated, swapped, replaced, renumbered or cut. The replay must end —
// nil or a typed error — and never panic; the unaltered history replays.
func FuzzReplayMutated(f *testing.F) {
	run, evs := recordRich(f)
	r := richReplayer(f)
	if err := r.ReplayHistory(run, evs, worker.ReplayOptions{}); err != nil {
		f.Fatalf("the unaltered history does not replay: %v", err)
	}
	f.Add([]byte{})
	for i := range len(evs) {
		for op := range 6 {
			f.Add([]byte{byte(op), byte(i), byte(i + 1)})
		}
	}
	f.Fuzz(func(t *testing.T, edits []byte) {
		replayEnds(t, r, run, mutate(evs, edits))
	})
}

// FuzzReplayJSON replays an arbitrary history file: the import refuses
// what is not a history; what imports, replays or fails, never panics.
func FuzzReplayJSON(f *testing.F) {
	run, evs := recordRich(f)
	var file bytes.Buffer
	if err := history.ExportJSON(&file, run, evs); err != nil {
		f.Fatal(err)
	}
	f.Add(file.Bytes())
	f.Add([]byte(`{"workflowId":"rich","runId":"r","events":[]}`))
	r := richReplayer(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		doc, err := history.ImportDocument(bytes.NewReader(data))
		if err != nil {
			return
		}
		replayEnds(t, r, doc.Run, doc.Events)
	})
}

// replayEnds replays evs and fails the test if the replay hangs or fails
// with an error of no known kind (a panic fails it by itself).
func replayEnds(t *testing.T, r *worker.Replayer, run history.RunRef, evs []history.Event) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- r.ReplayHistory(run, evs, worker.ReplayOptions{}) }()
	select {
	case err := <-done:
		if err != nil && !typedReplayError(err) {
			t.Fatalf("the replay of %d events failed with an untyped error %T: %v", len(evs), err, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the replay of %d events did not end", len(evs))
	}
}

// typedReplayError reports whether err is one a caller can tell apart: a
// sentinel of the SDK, the worker or the history, or a typed SDK error.
func typedReplayError(err error) bool {
	for _, s := range []error{sdk.ErrHistoryGap, sdk.ErrNondeterminism, sdk.ErrDeadlock, sdk.ErrUnknownWorkflowType, sdk.ErrClosed,
		worker.ErrBadHistory, history.ErrCorrupt, history.ErrInvalid} {
		if errors.Is(err, s) {
			return true
		}
	}
	var (
		nd  *sdk.NondeterminismError
		pan *sdk.PanicError
		dl  *sdk.DeadlockError
	)
	return errors.As(err, &nd) || errors.As(err, &pan) || errors.As(err, &dl)
}
