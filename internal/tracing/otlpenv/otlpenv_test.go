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
