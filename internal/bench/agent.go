package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// `cairn bench agent`: an agent whose transcript grows by about 1 KB per
// turn (the model asks for a tool with ~400 bytes of arguments, the tool
// answers ~500 bytes), for N turns and a final answer, with the model (the
// fake, in this process) and the server here and the worker in its own
// process, on fsynced storage. It measures what a turn costs as the
// conversation grows, the bytes stored for the run, and what a replay of
// the whole history costs.

// AgentTaskQueue is the agent benchmark's queue.
const AgentTaskQueue = "bench-agent"

// PadArgs is the benchmark tool's input.
type PadArgs struct {
	Turn int    `json:"turn"`
	Note string `json:"note"`
}

// Pad answers ~500 bytes.
func Pad(_ context.Context, a PadArgs) (string, error) {
	return fmt.Sprintf("turn %d: %s", a.Turn, strings.Repeat("r", 480)), nil
}

// GrowingAgent runs the agent loop for the benchmark.
func GrowingAgent(ctx sdk.Context, turns int) (agent.Result, error) {
	a := agent.New(ctx, agent.Options{Model: "bench", System: "You pad.", Tools: []agent.Tool{agent.NewTool(Pad, "Pad")},
		MaxTurns: turns + 1, ToolOptions: &sdk.ActivityOptions{StartToCloseTimeout: time.Minute}})
	return a.Run(ctx, "pad "+strconv.Itoa(turns)+" times")
}

// RegisterAgentWorker registers the benchmark agent on a worker.
func RegisterAgentWorker(w *worker.Worker, modelURL string) error {
	m, err := llm.New(llm.Config{BaseURL: modelURL, Model: "bench"})
	if err != nil {
		return err
	}
	if err := m.Register(w); err != nil {
		return err
	}
	if err := w.RegisterWorkflow(GrowingAgent); err != nil {
		return err
	}
	return w.RegisterActivity(Pad)
}

// AgentOptions configure RunAgent.
type AgentOptions struct {
	Out   io.Writer
	Turns int
	// WorkerCommand builds the worker process's command.
	WorkerCommand func(args ...string) *exec.Cmd
	// Dir holds the data (default: a temporary directory).
	Dir string
}

// AgentResult is what RunAgent measured.
type AgentResult struct {
	Turns int `json:"turns"`
	// HistoryBytes is every byte stored for the run: its events (encoded)
	// and the payload chunks they reference (key and value).
	HistoryBytes int64 `json:"history_bytes"`
	EventBytes   int64 `json:"event_bytes"`
	// EventBytesByType splits EventBytes by event type.
	EventBytesByType  map[string]int64 `json:"event_bytes_by_type"`
	ChunkBytes        int64            `json:"chunk_bytes"`
	Events            int              `json:"events"`
	TranscriptBytes   int64            `json:"transcript_bytes"` // the last model call's request body
	QuadraticEstimate int64            `json:"whole_transcript_every_turn_bytes"`
	// TurnMS is the time of turns 1, 10, N/2 and N (schedule of model call
	// k to schedule of model call k+1, from the history's event times).
	TurnMS map[string]float64 `json:"turn_ms"`
	// TurnMedianMS is the median over the 9 turns around each of them, and
	// TurnMeanMS the mean over 50 (turns 10–59, N/2±25, N−49–N): less
	// noise on a shared machine.
	TurnMedianMS       map[string]float64 `json:"turn_ms_median9"`
	TurnMeanMS         map[string]float64 `json:"turn_ms_mean50"`
	ModelCalls         int64              `json:"model_calls"`
	ModelCallsOnReplay int64              `json:"model_calls_on_replay"`
	ReplayMS           float64            `json:"replay_ms"`
	PeakRSSMB          float64            `json:"peak_rss_mb"`
	TotalSeconds       float64            `json:"total_s"`
}

// agentScript asks for Pad every turn, then answers.
func agentScript(turns int) func(fakellm.Request) fakellm.Reply {
	note := strings.Repeat("n", 380)
	return func(r fakellm.Request) fakellm.Reply {
		if r.Seq >= int64(turns) {
			return fakellm.Say("done")
		}
		return fakellm.CallTool("Pad", fmt.Sprintf(`{"turn":%d,"note":%q}`, r.Seq+1, note))
	}
}

// RunAgent runs the benchmark.
func RunAgent(ctx context.Context, opts AgentOptions) (*AgentResult, error) {
	if opts.Turns <= 0 {
		opts.Turns = 1000
	}
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "cairn-bench-agent-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: filepath.Join(dir, "data")})
	if err != nil {
		return nil, err
	}
	defer st.Close()
	eng, err := engine.Open(engine.Options{Store: st, Limits: engine.Limits{SuggestContinueAsNewAt: 1 << 40}})
	if err != nil {
		return nil, err
	}
	defer eng.Close()
	srv, addr, err := listen(httpapi.NewHandler(eng, httpapi.Options{}))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	model := fakellm.NewFunc(agentScript(opts.Turns)).BySequence()
	msrv, maddr, err := listen(model)
	if err != nil {
		return nil, err
	}
	defer msrv.Close()
	cmd := opts.WorkerCommand("--address", addr, "--model-url", maddr+"/v1")
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer stopWorker(cmd)
	c := client.NewLocal(eng, client.Options{})
	start := time.Now()
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "bench-agent", TaskQueue: AgentTaskQueue}, GrowingAgent, opts.Turns)
	if err != nil {
		return nil, err
	}
	var res agent.Result
	if err := run.Get(ctx, &res); err != nil {
		return nil, err
	}
	out := &AgentResult{Turns: opts.Turns, ModelCalls: model.Calls(), TotalSeconds: time.Since(start).Seconds(),
		PeakRSSMB: peakRSS(cmd.Process.Pid), TranscriptBytes: model.LastSize()}
	evs, err := c.GetHistory(ctx, "bench-agent", run.RunID())
	if err != nil {
		return nil, err
	}
	if err := measureHistory(ctx, out, c, evs); err != nil {
		return nil, err
	}
	out.TurnMS, out.TurnMedianMS, out.TurnMeanMS = turnTimes(evs, opts.Turns)
	// A replay of the whole history, as a worker rebuilding the run does:
	// no model call.
	r := worker.NewReplayer(worker.ReplayerOptions{})
	if err := r.RegisterWorkflow(GrowingAgent); err != nil {
		return nil, err
	}
	before := model.Calls()
	t0 := time.Now()
	ro := worker.ReplayOptions{Chunks: client.NewChunkCache(c.Service(), 0)} // a cold cache, as a fresh worker's
	if err := r.ReplayHistory(history.RunRef{WorkflowID: "bench-agent", RunID: run.RunID()}, evs, ro); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	out.ReplayMS = ms(time.Since(t0))
	out.ModelCallsOnReplay = model.Calls() - before
	if opts.Out != nil {
		b, _ := json.Marshal(out)
		fmt.Fprintln(opts.Out, string(b))
	}
	return out, nil
}

func listen(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

// measureHistory adds up the bytes stored for the run.
func measureHistory(ctx context.Context, out *AgentResult, c client.Client, evs []history.Event) error {
	out.Events = len(evs)
	out.EventBytesByType = map[string]int64{}
	key := int64(len(history.Key().Str("bench-agent").Str(evs[0].Attrs.(*history.WorkflowStarted).FirstRunID).Bytes())) + 9
	for _, ev := range evs {
		b, err := history.EncodeEvent(ev)
		if err != nil {
			return err
		}
		n := int64(len(b)) + key // the key: prefix, run tuple, id
		out.EventBytes += n
		out.EventBytesByType[ev.Type().String()] += n
	}
	chunks, err := history.CollectChunks(ctx, client.NewChunkCache(c.Service(), 0), evs)
	if err != nil {
		return err
	}
	var running int64
	for _, ch := range chunks {
		out.ChunkBytes += int64(len(history.EncodeChunk(ch))) + history.HashSize + 1
	}
	out.HistoryBytes = out.EventBytes + out.ChunkBytes
	// What the same turns would store if every model call carried the whole
	// transcript: the sum of its prefixes.
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.ActivityType == llm.ActivityName {
			if ch, ok := chunks[fmt.Sprintf("%x", s.Input.Ref)]; ok {
				running += int64(len(ch.Data))
			}
			out.QuadraticEstimate += running
		}
	}
	return nil
}

// turnTimes reads turn durations from the model calls' schedule times.
func turnTimes(evs []history.Event, turns int) (exact, median, mean map[string]float64) {
	var at []time.Time
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.ActivityType == llm.ActivityName {
			at = append(at, ev.Time)
		}
	}
	dur := func(k int) float64 { // turn k, 1-based
		if k < 1 || k >= len(at) {
			return 0
		}
		return ms(at[k].Sub(at[k-1]))
	}
	window := func(lo, hi int) []float64 {
		lo, hi = max(1, lo), min(turns, hi)
		lo = max(1, min(lo, hi-(hi-lo))) // keep the window inside 1..turns
		var w []float64
		for j := lo; j <= hi; j++ {
			w = append(w, dur(j))
		}
		return w
	}
	exact, median, mean = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, k := range []int{1, 10, turns / 2, turns} {
		key := strconv.Itoa(k)
		exact[key] = dur(k)
		lo := k - 4
		if k == turns {
			lo = k - 8
		}
		w := window(lo, lo+8)
		slices.Sort(w)
		median[key] = w[len(w)/2]
		lo50 := k - 25
		switch k {
		case 1, 10:
			lo50 = k
		case turns:
			lo50 = k - 49
		}
		var sum float64
		w50 := window(lo50, lo50+49)
		for _, v := range w50 {
			sum += v
		}
		mean[key] = sum / float64(len(w50))
	}
	return exact, median, mean
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// peakRSS reads a process's peak resident set (VmHWM) in MiB.
func peakRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
