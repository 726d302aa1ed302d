package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/cairnflow/cairn/engine/api"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cairnflow/cairn/activities"
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
// answers ~500 bytes), for N turns and a final answer, with the server in
// this process, and the worker and the model (the fake) each in a process
// of its own, on fsynced storage. It measures what a turn costs as the
// conversation grows — wall time, the model server's own time, and the CPU
// of each process — the bytes stored for the run, and what a replay of the
// whole history costs.

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

// ToolEffects maps the names --tool-effect accepts to the effect class the
// benchmark's tool is registered with.
var ToolEffects = map[string]activities.Effect{
	"read": activities.Read, "idempotent": activities.Idempotent, "side-effect": activities.SideEffect,
}

// RegisterAgentWorker registers the benchmark agent on a worker, its tool
// Pad with the effect class named by toolEffect (ToolEffects; "" is read).
// A side-effecting Pad is keyed on its arguments, which differ every turn:
// every call is a new action with its own idempotency key.
func RegisterAgentWorker(w *worker.Worker, modelURL, toolEffect string) error {
	effect, ok := ToolEffects[toolEffect]
	if !ok && toolEffect != "" {
		return fmt.Errorf("bench: unknown tool effect %q (read, idempotent or side-effect)", toolEffect)
	}
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
	return w.RegisterActivity(Pad, activities.Options{Effect: effect})
}

// RunAgentWorker is the worker process of `cairn bench agent` (cairn's
// hidden `bench agent-worker`): it serves the benchmark's task queue from
// the server at address, with the model at modelURL, until SIGTERM.
func RunAgentWorker(address, modelURL, toolEffect string) error {
	c, err := client.Dial(address, client.Options{}, client.DialOptions{})
	if err != nil {
		return err
	}
	w, err := worker.New(c, worker.Options{TaskQueue: AgentTaskQueue, StopOnSignals: true})
	if err != nil {
		return err
	}
	if err := RegisterAgentWorker(w, modelURL, toolEffect); err != nil {
		return err
	}
	return w.Run(context.Background())
}

// AgentOptions configure RunAgent.
type AgentOptions struct {
	Out   io.Writer
	Turns int
	// WorkerCommand builds the worker process's command.
	WorkerCommand func(args ...string) *exec.Cmd
	// ModelCommand builds the model process's command (cairn's hidden
	// `bench agent-model`: ServeAgentModel).
	ModelCommand func(args ...string) *exec.Cmd
	// Dir holds the data (default: a temporary directory).
	Dir string
	// ToolEffect is the effect class of the tool (ToolEffects; default
	// read).
	ToolEffect string
}

// AgentResult is what RunAgent measured.
type AgentResult struct {
	Turns int `json:"turns"`
	// HistoryBytes is every byte stored for the run: its events (encoded)
	// and the payload chunks they reference (key and value).
	HistoryBytes int64 `json:"history_bytes"`
	EventBytes   int64 `json:"event_bytes"`
	// EventBytesByType splits EventBytes by event type.
	EventBytesByType map[string]int64 `json:"event_bytes_by_type"`
	ChunkBytes       int64            `json:"chunk_bytes"`
	Events           int              `json:"events"`
	TranscriptBytes  int64            `json:"transcript_bytes"` // the last model call's request body
	// QuadraticEstimate is what the model calls' inputs alone would store
	// if each carried the whole conversation: the sum of the requests'
	// sizes.
	QuadraticEstimate int64 `json:"whole_transcript_every_turn_bytes"`
	// TurnMS is the time of turns 1, 10, N/2 and N: a turn is from the
	// schedule of model call k to the schedule of model call k+1 (the
	// history's event times), and turn k's time is the median of the 50
	// turns of its window (turns 1–50, 10–59, N/2−25…N/2+24, N−49…N): a
	// single turn of a few milliseconds on a shared machine varies 2×, so
	// one turn's time is TurnSingleMS. TurnMeanMS is the mean over the same
	// windows (it counts the rare slow turn: a sync, a collection).
	TurnMS       map[string]float64 `json:"turn_ms"`
	TurnSingleMS map[string]float64 `json:"turn_ms_single"`
	TurnMeanMS   map[string]float64 `json:"turn_ms_mean50"`
	// ModelMeanMS is the model server's own time per call (from its
	// request's headers to its answer written: receiving the request body
	// included), mean over the same 50-turn windows; TurnMeanMS minus it
	// is TurnWithoutModelMeanMS.
	ModelMeanMS            map[string]float64 `json:"model_ms_mean50"`
	TurnWithoutModelMeanMS map[string]float64 `json:"turn_ms_without_model_mean50"`
	// CPUPerTurnMS is the CPU time (user+system) per turn of each process —
	// "server" (this one: engine and HTTP API), "worker", "model" — over
	// an early and a late window of turns (CPUWindows).
	CPUPerTurnMS       map[string]map[string]float64 `json:"cpu_ms_per_turn"`
	CPUWindows         map[string]string             `json:"cpu_windows"`
	ModelCalls         int64                         `json:"model_calls"`
	ModelCallsOnReplay int64                         `json:"model_calls_on_replay"`
	ReplayMS           float64                       `json:"replay_ms"`
	PeakRSSMB          float64                       `json:"peak_rss_mb"`
	TotalSeconds       float64                       `json:"total_s"`
	// ToolEffect is the tool's effect class.
	ToolEffect string `json:"tool_effect"`
	// RunStateBytes is the size of the run's state record at the end (its
	// value, as the engine encodes it); RecordBytesWritten adds up the
	// records (key and value) the engine committed while the benchmark
	// ran, by record space (events and the store's own framing not
	// included), and Commits counts the batches.
	RunStateBytes int64 `json:"run_state_bytes"`
	// Branches are a reset of the finished run to its last workflow task
	// and a fork at turn N/2 (docs/performance.md, "Reset and fork").
	Branches           map[string]BranchFigures `json:"branches,omitempty"`
	RecordBytesWritten map[string]int64         `json:"record_bytes_written"`
	Commits            int64                    `json:"commits"`
}

// cpuWindows returns the early and late windows of turns CPU is measured
// over: the CPU between the model requests that start turns lo and hi
// covers turns lo..hi-1.
func cpuWindows(turns int) map[string][2]int64 {
	w := int64(min(200, max(1, turns/4)))
	lo := int64(min(10, turns/4))
	return map[string][2]int64{"early": {lo + 1, lo + 1 + w}, "late": {int64(turns) + 1 - w, int64(turns) + 1}}
}

// AgentModelStats is what the benchmark's model process reports.
type AgentModelStats struct {
	Calls    int64
	LastSize int64
	Timings  []fakellm.Timing
	// CPU holds, per mark (the turn whose model request it was taken at),
	// the CPU time each watched process had used, in ms.
	CPU map[int64]map[string]float64
}

// agentModel is the benchmark's model server: the scripted fake, which
// keeps only the heads of the requests (it answers by request number) and
// times each one, plus two routes of its own: POST /bench/watch names the
// processes whose CPU it samples at the marks (JSON {"name": pid}), GET
// /bench/stats answers an AgentModelStats.
type agentModel struct {
	fake  *fakellm.Server
	marks map[int64]bool
	mu    sync.Mutex
	pids  map[string]int
	cpu   map[int64]map[string]float64
}

func newAgentModel(turns int) *agentModel {
	m := &agentModel{marks: map[int64]bool{}, pids: map[string]int{"model": os.Getpid()}, cpu: map[int64]map[string]float64{}}
	for _, w := range cpuWindows(turns) {
		m.marks[w[0]], m.marks[w[1]] = true, true
	}
	script := agentScript(turns)
	m.fake = fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		if turn := r.Seq + 1; m.marks[turn] {
			m.sample(turn)
		}
		return script(r)
	}).BySequence().HeadOnly().KeepTimings()
	return m
}

// sample records the watched processes' CPU at the start of turn's model
// request.
func (m *agentModel) sample(turn int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	at := map[string]float64{}
	for name, pid := range m.pids {
		at[name] = ms(processCPU(pid))
	}
	m.cpu[turn] = at
}

func (m *agentModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/bench/watch":
		var pids map[string]int
		if err := json.NewDecoder(r.Body).Decode(&pids); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m.mu.Lock()
		maps.Copy(m.pids, pids)
		m.mu.Unlock()
	case "/bench/stats":
		m.mu.Lock()
		st := AgentModelStats{Calls: m.fake.Calls(), LastSize: m.fake.LastSize(), Timings: m.fake.Timings(), CPU: m.cpu}
		b, err := json.Marshal(st)
		m.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	default:
		m.fake.ServeHTTP(w, r)
	}
}

// ServeAgentModel is the model process of `cairn bench agent` (cairn's
// hidden `bench agent-model`): it serves the benchmark's script on a
// loopback port, prints "listening <URL>" to out, and serves until ctx
// ends.
func ServeAgentModel(ctx context.Context, out io.Writer, turns int) error {
	srv, addr, err := listen(newAgentModel(turns))
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "listening", addr)
	<-ctx.Done()
	return srv.Close()
}

// startModel starts the model process and returns its URL.
func startModel(opts AgentOptions) (*exec.Cmd, string, error) {
	cmd := opts.ModelCommand("--turns", strconv.Itoa(opts.Turns))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		stopWorker(cmd)
		return nil, "", fmt.Errorf("bench: the model process said %q (%v)", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return cmd, addr, nil
}

// modelRequest calls one of the model process's /bench routes.
func modelRequest(ctx context.Context, addr, route string, in, out any) error {
	method, body := http.MethodGet, io.Reader(nil)
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		method, body = http.MethodPost, bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, addr+route, body)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: model process %s: %w", route, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: model process %s: %s", route, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
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
	if opts.WorkerCommand == nil || opts.ModelCommand == nil {
		return nil, errors.New("bench: RunAgent needs a WorkerCommand and a ModelCommand")
	}
	if _, ok := ToolEffects[opts.ToolEffect]; !ok && opts.ToolEffect != "" {
		return nil, fmt.Errorf("bench: unknown tool effect %q (read, idempotent or side-effect)", opts.ToolEffect)
	}
	if opts.ToolEffect == "" {
		opts.ToolEffect = "read"
	}
	written := &countingStore{bytes: map[history.Space]int64{}}
	eng, addr, closeServer, err := serve(opts.Dir, "cairn-bench-agent-", engine.Limits{SuggestContinueAsNewAt: 1 << 40}, written.wrap)
	if err != nil {
		return nil, err
	}
	defer closeServer()
	mcmd, maddr, err := startModel(opts)
	if err != nil {
		return nil, err
	}
	defer stopWorker(mcmd)
	cmd := opts.WorkerCommand("--address", addr, "--model-url", maddr+"/v1", "--tool-effect", opts.ToolEffect)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer stopWorker(cmd)
	if err := modelRequest(ctx, maddr, "/bench/watch", map[string]int{"server": os.Getpid(), "worker": cmd.Process.Pid}, nil); err != nil {
		return nil, err
	}
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
	var mstats AgentModelStats
	if err := modelRequest(ctx, maddr, "/bench/stats", nil, &mstats); err != nil {
		return nil, err
	}
	out := &AgentResult{Turns: opts.Turns, ModelCalls: mstats.Calls, TotalSeconds: time.Since(start).Seconds(),
		PeakRSSMB: peakRSS(cmd.Process.Pid), TranscriptBytes: mstats.LastSize}
	out.CPUPerTurnMS, out.CPUWindows = cpuPerTurn(mstats.CPU, opts.Turns)
	out.ToolEffect = opts.ToolEffect
	out.RecordBytesWritten, out.Commits = written.snapshot()
	state, err := written.Get(ctx, history.SpaceRunState, history.Key().Str("bench-agent").Str(run.RunID()).Bytes())
	if err != nil {
		return nil, fmt.Errorf("bench: read the run state: %w", err)
	}
	out.RunStateBytes = int64(len(state))
	for _, t := range mstats.Timings {
		out.QuadraticEstimate += t.Size
	}
	evs, err := c.GetHistory(ctx, "bench-agent", run.RunID())
	if err != nil {
		return nil, err
	}
	if err := measureHistory(ctx, out, c, evs); err != nil {
		return nil, err
	}
	out.TurnSingleMS, out.TurnMS, out.TurnMeanMS = turnTimes(evs, opts.Turns)
	out.ModelMeanMS, out.TurnWithoutModelMeanMS = modelTimes(mstats.Timings, opts.Turns, out.TurnMeanMS)
	// A replay of the whole history, as a worker rebuilding the run does:
	// no model call.
	r := worker.NewReplayer(worker.ReplayerOptions{})
	if err := r.RegisterWorkflow(GrowingAgent); err != nil {
		return nil, err
	}
	before := mstats.Calls
	t0 := time.Now()
	ro := worker.ReplayOptions{Chunks: client.NewChunkCache(c.Service(), 0)} // a cold cache, as a fresh worker's
	if err := r.ReplayHistory(history.RunRef{WorkflowID: "bench-agent", RunID: run.RunID()}, evs, ro); err != nil {
		return nil, fmt.Errorf("replay: %w", err)
	}
	out.ReplayMS = ms(time.Since(t0))
	if err := modelRequest(ctx, maddr, "/bench/stats", nil, &mstats); err != nil {
		return nil, err
	}
	out.ModelCallsOnReplay = mstats.Calls - before
	stopWorker(cmd) // the new runs' first tasks are for the bench to take
	if out.Branches, err = measureBranches(ctx, eng, written, run.RunID(), evs, out.HistoryBytes); err != nil {
		return nil, err
	}
	if opts.Out != nil {
		b, _ := json.Marshal(out)
		fmt.Fprintln(opts.Out, string(b))
	}
	return out, nil
}

// serve opens a durable engine over dir (a fresh temporary directory named
// after prefix when dir is empty) and serves its HTTP API on a loopback
// port. closeAll stops the server, the engine and the store and removes a
// temporary directory.
func serve(dir, prefix string, limits engine.Limits, wrap func(history.Store) history.Store) (eng *engine.Engine, addr string, closeAll func(), err error) {
	var undo []func()
	closeAll = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	if dir == "" {
		if dir, err = os.MkdirTemp("", prefix); err != nil {
			return nil, "", nil, err
		}
		tmp := dir
		undo = append(undo, func() { _ = os.RemoveAll(tmp) })
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: filepath.Join(dir, "data")})
	if err != nil {
		return nil, "", nil, err
	}
	undo = append(undo, func() { _ = st.Close() })
	var store history.Store = st
	if wrap != nil {
		store = wrap(st)
	}
	if eng, err = engine.Open(engine.Options{Store: store, Limits: limits}); err != nil {
		return nil, "", nil, err
	}
	undo = append(undo, func() { _ = eng.Close() })
	srv, addr, err := listen(httpapi.NewHandler(eng, httpapi.Options{}))
	if err != nil {
		return nil, "", nil, err
	}
	undo = append(undo, func() { _ = srv.Close() })
	return eng, addr, closeAll, nil
}

// BranchFigures measure one reset or fork: ms from the call to its new
// run's first workflow task in a poller's hands, and the bytes it
// committed (events, records, chunks), also as a share of the base run's
// history_bytes.
type BranchFigures struct {
	AtEventID      int64   `json:"at_event"`
	CopiedEvents   int64   `json:"copied_events"`
	MS             float64 `json:"ms_to_first_task"`
	Bytes          int64   `json:"bytes_written"`
	PctOfHistory   float64 `json:"pct_of_history_bytes"`
	ChunkBytes     int64   `json:"chunk_bytes_written"`
	LedgerAnswered int32   `json:"ledger_answers"`
}

// measureBranches resets the finished agent run to its last workflow
// task and forks it at its middle one, timing each to its first workflow
// task and counting the bytes each commits.
func measureBranches(ctx context.Context, eng *engine.Engine, written *countingStore, baseRun string, evs []history.Event, historyBytes int64) (map[string]BranchFigures, error) {
	var tasks []int64
	for _, ev := range evs {
		if _, ok := ev.Attrs.(*history.WorkflowTaskCompleted); ok {
			tasks = append(tasks, ev.ID)
		}
	}
	if len(tasks) == 0 {
		return nil, errors.New("bench: the agent run completed no workflow task")
	}
	out := map[string]BranchFigures{}
	branch := func(name string, at int64, call func() (string, string, error)) error {
		before := written.total()
		t0 := time.Now()
		id, runID, err := call()
		if err != nil {
			return fmt.Errorf("bench: %s: %w", name, err)
		}
		task, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: AgentTaskQueue, Identity: "bench"})
		if err != nil || task.Task == nil || task.Task.WorkflowID != id {
			return fmt.Errorf("bench: %s: no first task (%v)", name, err)
		}
		f := BranchFigures{AtEventID: at, CopiedEvents: at - 1, MS: ms(time.Since(t0))}
		after := written.total()
		f.Bytes, f.ChunkBytes = after.all-before.all, after.chunks-before.chunks
		f.PctOfHistory = 100 * float64(f.Bytes) / float64(max(historyBytes, 1))
		d, err := eng.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: id, RunID: runID})
		if err == nil {
			f.LedgerAnswered = d.Info.LedgerAnswers
		}
		out[name] = f
		return nil
	}
	last, mid := tasks[len(tasks)-1], tasks[len(tasks)/2]
	if err := branch("reset", last, func() (string, string, error) {
		r, err := eng.ResetWorkflow(ctx, &api.ResetWorkflowRequest{WorkflowID: "bench-agent", ToLastTask: true, Reason: "bench"})
		if err != nil {
			return "", "", err
		}
		return "bench-agent", r.RunID, nil
	}); err != nil {
		return nil, err
	}
	if err := branch("fork", mid, func() (string, string, error) {
		f, err := eng.ForkWorkflow(ctx, &api.ForkWorkflowRequest{WorkflowID: "bench-agent", RunID: baseRun, AtEventID: mid,
			NewWorkflowID: "bench-agent-fork", Reason: "bench"})
		if err != nil {
			return "", "", err
		}
		return f.WorkflowID, f.RunID, nil
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// countingStore adds up the record bytes (key and value) the engine
// commits, by space, and the encoded events it appends.
type countingStore struct {
	history.Store
	mu         sync.Mutex
	bytes      map[history.Space]int64
	eventBytes int64
	commits    int64
}

// written is what a countingStore counted, in all and in chunks.
type written struct{ all, chunks int64 }

// total returns the bytes committed so far: records, chunks and events.
func (c *countingStore) total() written {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := written{all: c.eventBytes, chunks: c.bytes[history.SpaceChunk]}
	for _, n := range c.bytes {
		w.all += n
	}
	return w
}

func (c *countingStore) wrap(s history.Store) history.Store {
	c.Store = s
	return c
}

// Commit counts b's record values and commits it.
func (c *countingStore) Commit(ctx context.Context, b *history.Batch) error {
	err := c.Store.Commit(ctx, b)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.commits++
	for _, p := range b.Puts {
		c.bytes[p.Space] += int64(len(p.Key) + len(p.Value))
	}
	for _, a := range b.Appends {
		for _, ev := range a.Events {
			if enc, err := history.AppendEvent(nil, ev); err == nil {
				c.eventBytes += int64(len(enc))
			}
		}
	}
	return nil
}

// snapshot returns the bytes committed by space name, and the commits.
func (c *countingStore) snapshot() (map[string]int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int64{}
	for sp, n := range c.bytes {
		out[sp.String()] = n
	}
	return out, c.commits
}

// listen serves h on a loopback port.
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
	for _, ch := range chunks {
		out.ChunkBytes += int64(len(history.EncodeChunk(ch))) + history.HashSize + 1
	}
	out.HistoryBytes = out.EventBytes + out.ChunkBytes
	return nil
}

// turnTimes reads turn durations from the model calls' schedule times: for
// turns 1, 10, N/2 and N, the single turn, and the median and the mean of
// its 50-turn window (mean50Window).
func turnTimes(evs []history.Event, turns int) (single, median, mean map[string]float64) {
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
	single, median, mean = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, k := range []int{1, 10, turns / 2, turns} {
		key := strconv.Itoa(k)
		single[key] = dur(k)
		lo, hi := mean50Window(k, turns)
		var w []float64
		for j := max(1, lo); j <= min(turns, hi); j++ {
			w = append(w, dur(j))
		}
		if len(w) == 0 {
			continue
		}
		var sum float64
		for _, v := range w {
			sum += v
		}
		mean[key] = sum / float64(len(w))
		slices.Sort(w)
		median[key] = (w[(len(w)-1)/2] + w[len(w)/2]) / 2
	}
	return single, median, mean
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

// mean50Window returns the 50 turns turn_ms and turn_ms_mean50 stand on
// for turn k:
// k..k+49 for turns 1 and 10, N−49..N for N, k−25..k+24 otherwise.
func mean50Window(k, turns int) (lo, hi int) {
	lo = k - 25
	switch k {
	case 1, 10:
		lo = k
	case turns:
		lo = k - 49
	}
	return lo, lo + 49
}

// modelTimes returns the model server's mean time per call over the
// mean50 windows, and the turn time without it.
func modelTimes(ts []fakellm.Timing, turns int, turnMean map[string]float64) (model, without map[string]float64) {
	bySeq := map[int64]time.Duration{}
	for _, t := range ts {
		if _, seen := bySeq[t.Seq]; !seen {
			bySeq[t.Seq] = t.Total
		}
	}
	model, without = map[string]float64{}, map[string]float64{}
	for _, k := range []int{1, 10, turns / 2, turns} {
		lo, hi := mean50Window(k, turns)
		lo, hi = max(1, lo), min(turns, hi)
		var sum float64
		n := 0
		for turn := lo; turn <= hi; turn++ {
			if d, ok := bySeq[int64(turn-1)]; ok { // turn t's model request is request t−1
				sum += ms(d)
				n++
			}
		}
		key := strconv.Itoa(k)
		if n > 0 {
			model[key] = sum / float64(n)
			without[key] = turnMean[key] - model[key]
		}
	}
	return model, without
}

// cpuPerTurn turns the model process's CPU samples into CPU per turn of
// each process over the early and late windows.
func cpuPerTurn(samples map[int64]map[string]float64, turns int) (map[string]map[string]float64, map[string]string) {
	out, names := map[string]map[string]float64{}, map[string]string{}
	for name, w := range cpuWindows(turns) {
		a, b := samples[w[0]], samples[w[1]]
		if a == nil || b == nil {
			continue
		}
		per := map[string]float64{}
		for proc, end := range b {
			per[proc] = (end - a[proc]) / float64(w[1]-w[0])
		}
		out[name] = per
		names[name] = fmt.Sprintf("turns %d-%d", w[0], w[1]-1)
	}
	return out, names
}
