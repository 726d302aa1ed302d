package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// The test binary doubles as the benchmark's worker and model processes
// (CAIRN_BENCH_TEST_ROLE), as `cairn bench agent-worker` and
// `cairn bench agent-model` are for the real command.
func TestMain(m *testing.M) {
	switch os.Getenv("CAIRN_BENCH_TEST_ROLE") {
	case "worker", "model":
		os.Exit(runRole(os.Getenv("CAIRN_BENCH_TEST_ROLE"), os.Args[1:]))
	}
	os.Exit(m.Run())
}

func runRole(role string, args []string) int {
	fs := flag.NewFlagSet(role, flag.ContinueOnError)
	address := fs.String("address", "", "")
	modelURL := fs.String("model-url", "", "")
	turns := fs.Int("turns", 0, "")
	toolEffect := fs.String("tool-effect", "", "")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var err error
	if role == "worker" {
		err = RunAgentWorker(*address, *modelURL, *toolEffect)
	} else {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		err = ServeAgentModel(ctx, os.Stdout, *turns)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		return 1
	}
	return 0
}

func roleCommand(role string) func(args ...string) *exec.Cmd {
	return func(args ...string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "CAIRN_BENCH_TEST_ROLE="+role)
		return cmd
	}
}

// TestAgentBenchmarkReportsItsFigures runs `cairn bench agent` small, with
// real worker and model processes, and checks the JSON it prints: every
// figure the issue asks for, the model's time per call and each process's
// CPU per turn, and no model call on replay.
func TestAgentBenchmarkReportsItsFigures(t *testing.T) {
	const turns = 20
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := RunAgent(ctx, AgentOptions{Out: &out, Turns: turns, Dir: t.TempDir(),
		WorkerCommand: roleCommand("worker"), ModelCommand: roleCommand("model")})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.Bytes())
	}
	for _, k := range []string{"turns", "history_bytes", "turn_ms", "model_calls_on_replay", "peak_rss_mb", "model_ms_mean50", "cpu_ms_per_turn"} {
		if _, ok := got[k]; !ok {
			t.Errorf("the JSON has no %q: %s", k, out.Bytes())
		}
	}
	if res.Turns != turns || res.ModelCalls != turns+1 || res.ModelCallsOnReplay != 0 || res.HistoryBytes <= res.ChunkBytes || res.ChunkBytes <= 0 {
		t.Fatalf("turns %d, model calls %d (on replay %d), history %d bytes (chunks %d)",
			res.Turns, res.ModelCalls, res.ModelCallsOnReplay, res.HistoryBytes, res.ChunkBytes)
	}
	for _, k := range []int{1, 10, turns / 2, turns} {
		key := strconv.Itoa(k)
		if res.TurnMS[key] <= 0 || res.ModelMeanMS[key] <= 0 || res.ModelMeanMS[key] >= res.TurnMeanMS[key] {
			t.Errorf("turn %d: %v ms, mean %v ms, of which the model %v ms", k, res.TurnMS[key], res.TurnMeanMS[key], res.ModelMeanMS[key])
		}
	}
	for _, w := range []string{"early", "late"} {
		per := res.CPUPerTurnMS[w]
		for _, proc := range []string{"server", "worker", "model"} {
			if _, ok := per[proc]; !ok {
				t.Errorf("no CPU per turn for %s in the %s window (%s): %v", proc, w, res.CPUWindows[w], res.CPUPerTurnMS)
			}
		}
	}
	if res.TranscriptBytes < int64(turns)*900 { // ~1 KB per turn, seen by the model whole
		t.Errorf("the last request was %d bytes", res.TranscriptBytes)
	}
	if res.QuadraticEstimate < int64(turns)*res.TranscriptBytes/3 || res.QuadraticEstimate <= res.HistoryBytes {
		t.Errorf("the whole transcript every turn would be %d bytes (the last request %d, history %d)",
			res.QuadraticEstimate, res.TranscriptBytes, res.HistoryBytes)
	}
}

// TestAgentBenchmarkSideEffectTool runs the benchmark with its tool
// registered as a SideEffect activity (--tool-effect side-effect): every
// call is a new action, so the effects ledger holds one entry per turn,
// each under its own key, and the figures name the run state's size.
func TestAgentBenchmarkSideEffectTool(t *testing.T) {
	const turns = 12
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	res, err := RunAgent(ctx, AgentOptions{Turns: turns, Dir: dir, ToolEffect: "side-effect",
		WorkerCommand: roleCommand("worker"), ModelCommand: roleCommand("model")})
	if err != nil {
		t.Fatal(err)
	}
	if res.ToolEffect != "side-effect" || res.RunStateBytes <= 0 || res.RecordBytesWritten["runstate"] < res.RunStateBytes || res.Commits <= 0 {
		t.Fatalf("tool effect %q, run state %d bytes, written %v in %d commits", res.ToolEffect, res.RunStateBytes,
			res.RecordBytesWritten, res.Commits)
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	recs, err := st.Scan(ctx, history.SpaceLedger, history.ScanOptions{Prefix: history.Key().Str("bench-agent").Bytes()})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != turns {
		t.Fatalf("the effects ledger holds %d entries; want one per tool call (%d)", len(recs), turns)
	}
	if _, err := RunAgent(ctx, AgentOptions{Turns: 1, ToolEffect: "twice", WorkerCommand: roleCommand("worker"),
		ModelCommand: roleCommand("model")}); err == nil {
		t.Fatal("an unknown tool effect was accepted")
	}
}

// TestTurnTimesAreWindowMedians: turn_ms is the median of each turn's
// 50-turn window, so one slow turn (a sync, a collection) moves
// turn_ms_mean50 and turn_ms_single but not turn_ms.
func TestTurnTimesAreWindowMedians(t *testing.T) {
	const turns = 200
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var evs []history.Event
	at := t0
	for k := 0; k <= turns; k++ {
		evs = append(evs, history.Event{Time: at, Attrs: &history.ActivityScheduled{ActivityType: llm.ActivityName}},
			history.Event{Time: at.Add(time.Millisecond), Attrs: &history.ActivityScheduled{ActivityType: "Pad"}})
		d := 4*time.Millisecond + time.Duration(k%3)*time.Millisecond // turns of 4, 5 and 6 ms
		if k == turns-1 {
			d = 500 * time.Millisecond // turn N is slow
		}
		at = at.Add(d)
	}
	single, median, mean := turnTimes(evs, turns)
	for _, k := range []string{"1", "10", "100", "200"} {
		if median[k] != 5 {
			t.Errorf("turn %s: median %v ms, want 5", k, median[k])
		}
	}
	if single["200"] != 500 || mean["200"] < 14 || mean["10"] < 4.9 || mean["10"] > 5.1 {
		t.Errorf("single %v, mean %v", single, mean)
	}
}
