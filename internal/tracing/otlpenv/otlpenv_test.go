package otlpenv_test

import (
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/tracing"
	"github.com/cairnflow/cairn/internal/tracing/otlpenv"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestEnabled(t *testing.T) {
	for _, c := range []struct {
		vars     map[string]string
		on       bool
		protocol string
		err      bool
	}{
		{vars: nil},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, on: true, protocol: "http/protobuf"},
		{vars: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, on: true, protocol: "http/protobuf"},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, on: true, protocol: "http/protobuf"},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, on: true, protocol: "grpc"},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, on: true, protocol: "http/protobuf"},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{vars: map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, err: true},
		{vars: map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, err: true},
	} {
		on, protocol, err := otlpenv.Enabled(env(c.vars))
		if on != c.on || protocol != c.protocol || (err != nil) != c.err || (err != nil && !errors.Is(err, otlpenv.ErrConfig)) {
			t.Errorf("%v: on %v, protocol %q, err %v", c.vars, on, protocol, err)
		}
	}
}

// collector is an in-process OTLP/HTTP trace receiver.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	svc   []string // service.name of each batch
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		http.Error(w, "not OTLP/HTTP protobuf traces", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				c.svc = append(c.svc, kv.Value.GetStringValue())
			}
		}
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func Greet(_ context.Context, name string) (string, error) { return "Hello, " + name + "!", nil }

func Hello(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
}

// TestExportOTLP configures tracing from the environment the standard way
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME), runs a workflow, and
// checks what an OTLP/HTTP collector received: the start, the workflow
// tasks under it and the activity attempt under a task, in one trace.
func TestExportOTLP(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	col := &collector{}
	hs := httptest.NewServer(col)
	defer hs.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", hs.URL)
	t.Setenv("OTEL_SERVICE_NAME", "payables-worker")
	tp, err := otlpenv.New(ctx, "cairn-test", os.LookupEnv)
	if err != nil || tp == nil {
		t.Fatalf("provider %v, %v", tp, err)
	}

	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	c := client.NewLocal(eng, client.Options{TracerProvider: tp})
	w, err := worker.New(c, worker.Options{TaskQueue: "otlp", TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(w.RegisterWorkflow(Hello), w.RegisterActivity(Greet)); err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	var out string
	if _, err := c.ExecuteWorkflow(ctx, client.StartOptions{ID: "otlp-1", TaskQueue: "otlp"}, Hello, "Ada", &out); err != nil || out != "Hello, Ada!" {
		t.Fatalf("run: %q, %v", out, err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := tp.Shutdown(ctx); err != nil { // flushes the batch to the collector
		t.Fatal(err)
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	for _, s := range col.spans {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	var root *tracepb.Span
	n := map[string]int{}
	for _, s := range col.spans {
		n[s.Name]++
		if s.Name == tracing.SpanWorkflowStart {
			root = s
		}
	}
	if root == nil || len(root.ParentSpanId) != 0 || n[tracing.SpanWorkflowTask] != 2 || n[tracing.SpanActivity] != 1 {
		t.Fatalf("collector received %v", n)
	}
	for _, s := range col.spans {
		if string(s.TraceId) != string(root.TraceId) {
			t.Errorf("%s in another trace", s.Name)
		}
		p := byID[hex.EncodeToString(s.ParentSpanId)]
		switch s.Name {
		case tracing.SpanWorkflowTask:
			if p != root {
				t.Errorf("workflow task under %v", p)
			}
		case tracing.SpanActivity:
			if p == nil || p.Name != tracing.SpanWorkflowTask {
				t.Errorf("activity attempt under %v", p)
			}
		}
	}
	for _, svc := range col.svc {
		if svc != "payables-worker" {
			t.Errorf("service.name %q, want OTEL_SERVICE_NAME's", svc)
		}
	}
}

// BenchmarkWorkflowSpans is the tracing work of one one-activity workflow
// alone — the client's start, two workflow tasks, one attempt, with the
// attributes and the trace context in and out as Cairn makes them —
// recorded only ("record") or also batched to the OTLP/HTTP exporter and
// sent to an in-process server that discards it ("export"):
//
//	go test -run '^$' -bench WorkflowSpans -benchtime 50000x ./internal/tracing/otlpenv
func BenchmarkWorkflowSpans(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(io.Discard, r.Body) }))
	defer sink.Close()
	for _, export := range []bool{false, true} {
		name := "record"
		var opts []sdktrace.TracerProviderOption
		if export {
			name = "export"
			exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(sink.URL+"/v1/traces"))
			if err != nil {
				b.Fatal(err)
			}
			opts = append(opts, sdktrace.WithBatcher(exp))
		}
		b.Run(name, func(b *testing.B) {
			tp := sdktrace.NewTracerProvider(opts...)
			defer func() { _ = tp.Shutdown(context.Background()) }()
			tr := tracing.Tracer(tp)
			const wf, run = "bench-123456", "0123456789abcdef0123456789abcdef"
			b.ReportAllocs()
			for b.Loop() {
				ctx, s := tr.Start(context.Background(), tracing.SpanWorkflowStart, trace.WithSpanKind(trace.SpanKindProducer))
				s.SetAttributes(tracing.WorkflowID.String(wf), tracing.WorkflowType.String("Hello"))
				parent, state := tracing.Inject(ctx)
				s.SetAttributes(tracing.RunID.String(run))
				s.End()
				for task := range 2 {
					ctx, w := tr.Start(tracing.Extract(context.Background(), parent, state), tracing.SpanWorkflowTask,
						trace.WithSpanKind(trace.SpanKindConsumer))
					w.SetAttributes(tracing.WorkflowID.String(wf), tracing.RunID.String(run), tracing.WorkflowType.String("Hello"))
					if task == 0 {
						p, _ := tracing.Inject(ctx)
						_, a := tr.Start(tracing.Extract(context.Background(), p, state), tracing.SpanActivity,
							trace.WithSpanKind(trace.SpanKindConsumer))
						a.SetAttributes(tracing.WorkflowID.String(wf), tracing.RunID.String(run), tracing.ActivityType.String("Greet"),
							tracing.EffectClass.String("Read"), tracing.Attempt.Int(1))
						a.SetAttributes(tracing.Verdict.String(tracing.VerdictRecorded))
						a.End()
					}
					w.End()
				}
			}
		})
	}
}
