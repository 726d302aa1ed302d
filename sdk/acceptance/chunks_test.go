package acceptance_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// ---- payloads stored by reference ----

// BigReport returns n kilobytes of text: above the inline threshold, so its
// result is stored as a chunk.
func BigReport(_ context.Context, n int) (string, error) { return strings.Repeat("r", n<<10), nil }

// Measure returns the length of its (resolved) input.
func Measure(_ context.Context, s string) (int, error) { return len(s), nil }

// BigResults passes a large activity result to another activity and
// returns it: the result, the next input and the run's result are all
// stored once, as the same chunk.
func BigResults(ctx sdk.Context, n int) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	r, err := sdk.ExecuteActivity(ctx, BigReport, n).Get(ctx)
	if err != nil {
		return "", err
	}
	if l, err := sdk.ExecuteActivity(ctx, Measure, r).Get(ctx); err != nil || l != len(r) {
		return "", errors.Join(err, errors.New("the activity saw another input"))
	}
	return r, nil
}

func TestLargePayloadsAreStoredOnceByReference(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(BigResults)
	env.RegisterActivity(BigReport)
	env.RegisterActivity(Measure)
	env.Start()
	run := start(t, ctx, env, "big", BigResults, 100)
	var got string
	if err := run.Get(ctx, &got); err != nil || len(got) != 100<<10 {
		t.Fatalf("result of %d bytes, %v", len(got), err)
	}
	var refs [][]byte
	for _, ev := range events(t, ctx, env.Client, "big", run.RunID()) {
		history.VisitPayloads(ev.Attrs, func(name string, p *history.Payload) {
			if len(p.Data) > 16<<10 {
				t.Errorf("event %d %s %s holds %d bytes inline", ev.ID, ev.Type(), name, len(p.Data))
			}
			if p.ByRef() {
				refs = append(refs, p.Ref)
			}
		})
	}
	// The report appears three times (a result, an input, the run's result):
	// one chunk.
	if len(refs) != 3 || !bytes.Equal(refs[0], refs[1]) || !bytes.Equal(refs[1], refs[2]) {
		t.Fatalf("references %x, want the same chunk three times", refs)
	}
	resp, err := env.Client.Service().GetChunks(ctx, &api.GetChunksRequest{Hashes: [][]byte{refs[0]}})
	if err != nil || len(resp.Chunks) != 1 || len(resp.Chunks[0].Data) < 100<<10 {
		t.Fatalf("GetChunks: %v %v", resp, err)
	}
}

// Echo of a transcript: the raw activity receives its input as recorded.
func Transcriptish(ctx context.Context, p history.Payload) (string, error) {
	b, err := history.ResolveBytes(ctx, activities.Chunks(ctx), p)
	return string(b), err
}

// GrowingInput calls Transcriptish once per part, each input extending the
// previous one's chunk, the way an agent's transcript grows.
func GrowingInput(ctx sdk.Context, parts []string) ([]string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	tip := history.RootRef
	var seen []string
	for _, part := range parts {
		p := history.Payload{Encoding: "text", Ref: tip, Data: []byte(part)}
		s, err := sdk.ExecuteActivity(ctx, Transcriptish, p).Get(ctx)
		if err != nil {
			return nil, err
		}
		seen = append(seen, s)
		tip = p.StoredRef()
	}
	return seen, nil
}

func TestGrowingInputCostsItsNewBytes(t *testing.T) {
	ctx := testCtx(t)
	env := newEnv(t, testenv.Options{})
	env.RegisterWorkflow(GrowingInput)
	env.RegisterActivity(Transcriptish)
	env.Start()
	parts := []string{"system|", "user: hi|", "assistant: hello|", "user: pay INV-9|"}
	run := start(t, ctx, env, "grow", GrowingInput, parts)
	var seen []string
	if err := run.Get(ctx, &seen); err != nil {
		t.Fatal(err)
	}
	want := ""
	for i, p := range parts {
		want += p
		if seen[i] != want {
			t.Fatalf("call %d saw %q, want %q", i+1, seen[i], want)
		}
	}
	evs := events(t, ctx, env.Client, "grow", run.RunID())
	var stored int
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok {
			if !s.Input.ByRef() || len(s.Input.Data) != 0 {
				t.Fatalf("input of event %d recorded as %+v, want a bare reference", ev.ID, s.Input)
			}
		}
	}
	chunks, err := history.CollectChunks(ctx, chunkSrc{env}, evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		stored += len(c.Data)
	}
	if stored != len(want) {
		t.Fatalf("chunks hold %d bytes, want exactly the %d new bytes", stored, len(want))
	}

	// The replayer reproduces the decisions from the references alone (it
	// never reads the transcript), from a file with or without its chunks.
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(GrowingInput))
	must(t, r.RegisterActivity(Transcriptish))
	if err := r.ReplayHistory(history.RunRef{WorkflowID: "grow", RunID: run.RunID()}, evs, worker.ReplayOptions{}); err != nil {
		t.Fatalf("replay without chunks: %v", err)
	}
	if err := r.ReplayHistory(history.RunRef{WorkflowID: "grow", RunID: run.RunID()}, evs, worker.ReplayOptions{Chunks: chunks}); err != nil {
		t.Fatalf("replay with chunks: %v", err)
	}
	// Code that sends other bytes under the same structure is caught.
	if err := r.ReplayHistory(history.RunRef{WorkflowID: "grow", RunID: run.RunID()}, tamperedInput(t, evs), worker.ReplayOptions{}); err == nil {
		t.Fatal("a replay against a changed reference passed")
	}
}

func tamperedInput(t *testing.T, evs []history.Event) []history.Event {
	out := make([]history.Event, len(evs))
	for i, ev := range evs {
		cp, err := history.CloneEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		if s, ok := cp.Attrs.(*history.ActivityScheduled); ok && i > 10 {
			s.Input.Ref = history.ChunkHash(nil, []byte("other"))
		}
		out[i] = cp
	}
	return out
}

type chunkSrc struct{ env *testenv.Env }

func (c chunkSrc) Chunk(ctx context.Context, h []byte) (history.Chunk, error) {
	resp, err := c.env.Client.Service().GetChunks(ctx, &api.GetChunksRequest{Hashes: [][]byte{h}})
	if err != nil {
		return history.Chunk{}, err
	}
	return resp.Chunks[0], nil
}
