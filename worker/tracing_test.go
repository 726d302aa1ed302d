package worker_test

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/internal/tracing"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// Note is the traced agent's tool: a side effect.
func Note(_ context.Context, in NoteInput) (string, error) { return "noted " + in.Text, nil }

// NoteInput is Note's argument.
type NoteInput struct {
	Text string `json:"text"`
}

// TracedAgent greets, starts a child, asks an agent (one tool call, then
// an answer), then waits for a "go" signal before it ends.
func TracedAgent(ctx sdk.Context, name string) (string, error) {
	actx := sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	g, err := sdk.ExecuteActivity(actx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	cctx := sdk.WithChildWorkflowOptions(ctx, sdk.ChildWorkflowOptions{WorkflowID: sdk.GetInfo(ctx).WorkflowID + "-child"})
	c, err := sdk.ExecuteChildWorkflow(cctx, Hello, name).Get(ctx)
	if err != nil {
		return "", err
	}
	a := agent.New(ctx, agent.Options{Model: "fake-1", System: "You take notes.",
		Tools: []agent.Tool{agent.NewTool(Note, "Take a note")}})
	res, err := a.Run(ctx, "Note the greeting")
	if err != nil {
		return "", err
	}
	sdk.GetSignalChannel[string](ctx, "go").Receive(ctx)
	return g + " " + c + " " + res.Final, nil
}

// tracedWorld is an engine, a client and a worker tracing into one span
// recorder, and the fake model the agent calls.
type tracedWorld struct {
	eng   *engine.Engine
	rec   *tracetest.SpanRecorder
	tp    *sdktrace.TracerProvider
	c     client.Client
	model *llm.Model
}

func newTracedWorld(t *testing.T) *tracedWorld {
	t.Helper()
	opts := engine.Options{Pricing: engine.Pricing{"fake-1": {Input: 2, Output: 8}}} // USD per million tokens
	if st, owner := storetest.Embedded(t, "worker"); st != nil {
		opts.Store, opts.Shards = st, owner
	} else {
		st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
		must(t, err)
		t.Cleanup(func() { _ = st.Close() })
		opts.Store = st
	}
	eng, err := engine.Open(opts)
	must(t, err)
	t.Cleanup(func() { _ = eng.Close() })
	if opts.Shards != nil { // Postgres: serve every shard of the test's schema
		must(t, eng.Acquire(context.Background(), opts.Shards.(*storetest.Owner).All()))
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	fake := fakellm.New(fakellm.Script{fakellm.CallTool("Note", `{"text":"hello"}`), fakellm.Say("Done.")})
	hs := httptest.NewServer(fake)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", Model: "fake-1"})
	must(t, err)
	return &tracedWorld{eng: eng, rec: rec, tp: tp, c: client.NewLocal(eng, client.Options{TracerProvider: tp}), model: m}
}

// worker starts a worker on the world's queue, tracing with tp.
func (tw *tracedWorld) worker(t *testing.T, tp trace.TracerProvider, opts worker.Options) *worker.Worker {
	t.Helper()
	opts.TaskQueue, opts.TracerProvider = "traced", tp
	w, err := worker.New(tw.c, opts)
	must(t, err)
	must(t, w.RegisterWorkflow(TracedAgent))
	must(t, w.RegisterWorkflow(Hello))
	must(t, w.RegisterActivity(Greet))
	must(t, w.RegisterActivity(Note, activities.Options{Effect: activities.SideEffect}))
	must(t, tw.model.Register(w))
	return w
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func str(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	v, _ := attr(s, key)
	return v.AsString()
}

// TestTraceTree runs an agent workflow with a child and checks the tree of
// spans: the client's start, then each workflow task under it, each
// activity attempt under the workflow task that scheduled it, the model
// call and the tool call inside theirs, the child's tasks under the
// parent's; all in one trace.
func TestTraceTree(t *testing.T) {
	ctx := testCtx(t)
	tw := newTracedWorld(t)
	stop := runUntil(t, tw.worker(t, tw.tp, worker.Options{}))
	run := start(t, ctx, tw.c, "traced", "trace-1", TracedAgent, "Ada")
	must(t, tw.c.SignalWorkflow(ctx, "trace-1", "", "go", "now"))
	var out string
	must(t, run.Get(ctx, &out))
	if out != "Hello, Ada! Hello, Ada! Done." {
		t.Fatalf("result %q", out)
	}
	stop() // every task's span has ended once Run returns
	spans := tw.rec.Ended()
	byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID()] = s
	}
	parent := func(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan { return byID[s.Parent().SpanID()] }
	var root sdktrace.ReadOnlySpan
	count := map[string]int{}
	for _, s := range spans {
		count[s.Name()]++
		if s.Name() == tracing.SpanWorkflowStart {
			root = s
		}
	}
	if root == nil || root.Parent().IsValid() || str(root, tracing.WorkflowID) != "trace-1" || str(root, tracing.RunID) != run.RunID() {
		t.Fatalf("no root start span (spans %v)", count)
	}
	for _, s := range spans {
		if s.SpanContext().TraceID() != root.SpanContext().TraceID() {
			t.Errorf("span %s is in another trace", s.Name())
		}
		if s != root && parent(s) == nil {
			t.Errorf("span %s (%v) has no recorded parent", s.Name(), s.Attributes())
		}
	}
	var greets, chats, tools, childTasks int
	for _, s := range spans {
		p := parent(s)
		switch {
		case s.Name() == tracing.SpanWorkflowTask && str(s, tracing.WorkflowID) == "trace-1":
			if p != root {
				t.Errorf("a workflow task of the run is not under its start: %v", p)
			}
		case s.Name() == tracing.SpanWorkflowTask:
			childTasks++
			if str(s, tracing.WorkflowID) != "trace-1-child" || p == nil || p.Name() != tracing.SpanWorkflowTask ||
				str(p, tracing.WorkflowID) != "trace-1" {
				t.Errorf("child task %v under %v", s.Attributes(), p)
			}
		case s.Name() == tracing.SpanActivity:
			if p == nil || p.Name() != tracing.SpanWorkflowTask {
				t.Errorf("activity %s not under a workflow task", str(s, tracing.ActivityType))
			}
			if str(s, tracing.Verdict) != tracing.VerdictRecorded {
				t.Errorf("activity %s verdict %q", str(s, tracing.ActivityType), str(s, tracing.Verdict))
			}
			if str(s, tracing.ActivityType) == "Greet" && str(p, tracing.WorkflowID) == "trace-1" {
				greets++
			}
			if str(s, tracing.ActivityType) == llm.ActivityName {
				cost, _ := attr(s, tracing.Cost)
				in, _ := attr(s, "gen_ai.usage.input_tokens")
				if cost.AsFloat64() <= 0 || in.AsInt64() <= 0 {
					t.Errorf("model call attempt without its usage and cost: %v", s.Attributes())
				}
			}
		case s.Name() == "chat fake-1":
			chats++
			in, _ := attr(s, "gen_ai.usage.input_tokens")
			outTok, _ := attr(s, "gen_ai.usage.output_tokens")
			if p == nil || str(p, tracing.ActivityType) != llm.ActivityName || in.AsInt64() <= 0 || outTok.AsInt64() <= 0 ||
				str(s, "gen_ai.request.model") != "fake-1" || str(s, "gen_ai.operation.name") != "chat" {
				t.Errorf("model call span %v under %v", s.Attributes(), p)
			}
		case s.Name() == "execute_tool Note":
			tools++
			a, _ := attr(s, tracing.Attempt)
			if p == nil || p.Name() != tracing.SpanActivity || str(s, tracing.EffectClass) != "SideEffect" ||
				str(s, tracing.IdempotencyKey) == "" || a.AsInt64() != 1 || str(s, tracing.Verdict) != tracing.VerdictRecorded ||
				str(s, "gen_ai.tool.name") != "Note" {
				t.Errorf("tool span %v under %v", s.Attributes(), p)
			}
		}
	}
	if greets != 1 || chats != 2 || tools != 1 || childTasks < 1 {
		t.Fatalf("greets %d, model calls %d, tool calls %d, child tasks %d (spans %v)", greets, chats, tools, childTasks, count)
	}
}

// TracedWait greets, then waits for a "go" signal; its "state" query
// answers what it has so far.
func TracedWait(ctx sdk.Context, name string) (string, error) {
	var got string
	if err := sdk.SetQueryHandler(ctx, "state", func() (string, error) { return got, nil }); err != nil {
		return "", err
	}
	actx := sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	g, err := sdk.ExecuteActivity(actx, Greet, name).Get(ctx)
	if err != nil {
		return "", err
	}
	got = g
	sdk.GetSignalChannel[string](ctx, "go").Receive(ctx)
	return got, nil
}

// runUntil runs w until the returned function is called (it waits for Run
// to return), or the test ends.
func runUntil(t *testing.T, w *worker.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil {
			t.Errorf("worker: %v", err)
		}
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// waitQuiet waits until the run's activity completed and a workflow task
// decided after it: the run is quiet, waiting for a signal.
func waitQuiet(t *testing.T, ctx context.Context, c client.Client, id string) {
	t.Helper()
	done := false
	for from := int64(1); ; {
		resp, err := c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, FromEventID: from, WaitNewEvents: true})
		must(t, err)
		from += int64(len(resp.Events))
		for _, ev := range resp.Events {
			switch ev.Type() {
			case history.TypeActivityCompleted:
				done = true
			case history.TypeWorkflowTaskCompleted:
				if done && from == resp.NextEventID {
					return
				}
			}
		}
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) map[string]int {
	m := map[string]int{}
	for _, s := range spans {
		m[s.Name()]++
	}
	return m
}

// TestReplayEmitsNoSpan: a run's history replayed — by a worker that did
// not run it (restart, sticky-cache miss), to answer a query, by the
// Replayer — makes no span and counts no task twice. Only the new workflow
// task gets a span (marked cairn.replayed); the activity that ran before
// is neither run nor traced again.
func TestReplayEmitsNoSpan(t *testing.T) {
	ctx := testCtx(t)
	tw := newTracedWorld(t)
	// What uses the global provider (the Replayer, anything defaulted)
	// records too.
	otel.SetTracerProvider(tw.tp)
	t.Cleanup(func() { otel.SetTracerProvider(noop.NewTracerProvider()) })

	first := tw.worker(t, tw.tp, worker.Options{})
	must(t, first.RegisterWorkflow(TracedWait))
	stop := runUntil(t, first)
	start(t, ctx, tw.c, "traced", "replay-1", TracedWait, "Ada")
	waitQuiet(t, ctx, tw.c, "replay-1")
	stop()
	before := spanNames(tw.rec.Ended())
	if before[tracing.SpanActivity] != 1 || before[tracing.SpanWorkflowTask] != 2 {
		t.Fatalf("before the restart: spans %v", before)
	}

	// The Replayer replays the whole history: no span.
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(TracedWait))
	must(t, r.ReplayWorkflow(ctx, tw.c, "replay-1", "", worker.ReplayOptions{}))

	// A new worker (nothing cached) answers a query and takes the
	// signal's task, replaying the history for each.
	second := tw.worker(t, tw.tp, worker.Options{DisableSticky: true})
	must(t, second.RegisterWorkflow(TracedWait))
	stopSecond := runUntil(t, second)
	var state string
	must(t, tw.c.QueryWorkflow(ctx, "replay-1", "", "state", nil, &state))
	if state != "Hello, Ada!" {
		t.Fatalf("query answered %q", state)
	}
	if got := spanNames(tw.rec.Ended()); got[tracing.SpanWorkflowTask] != 2 || len(tw.rec.Ended()) != len(flatten(before)) {
		t.Fatalf("after the replay and the query: spans %v, before %v", got, before)
	}
	must(t, tw.c.SignalWorkflow(ctx, "replay-1", "", "go", "now"))
	var out string
	must(t, tw.c.GetWorkflow(ctx, "replay-1", "").Get(ctx, &out))
	stopSecond()
	after := tw.rec.Ended()
	got := spanNames(after)
	if got[tracing.SpanActivity] != 1 || got[tracing.SpanWorkflowTask] != 3 || len(after) != len(flatten(before))+1 {
		t.Fatalf("after the signal: spans %v, before %v", got, before)
	}
	if v, _ := attr(after[len(after)-1], tracing.Replayed); !v.AsBool() {
		t.Errorf("the new task's span does not say it replayed: %v", after[len(after)-1].Attributes())
	}
	s := second.Stats()
	if s.ActivityTasks.Load() != 0 || s.WorkflowTasks.Load() != 1 || s.FullReplays.Load() != 1 {
		t.Fatalf("second worker's counters: %d activity tasks, %d workflow tasks, %d full replays",
			s.ActivityTasks.Load(), s.WorkflowTasks.Load(), s.FullReplays.Load())
	}
}

func flatten(m map[string]int) []string {
	var out []string
	for k, n := range m {
		for range n {
			out = append(out, k)
		}
	}
	return out
}
