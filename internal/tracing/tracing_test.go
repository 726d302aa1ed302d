package tracing_test

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnflow/cairn/internal/tracing"
)

// TestContextRoundTrip: the trace context a span injects is the parent a
// task extracted from it gets; nothing to inject without a span, and an
// empty or malformed traceparent extracts to no parent.
func TestContextRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	ctx, span := tracing.Tracer(tp).Start(context.Background(), tracing.SpanWorkflowStart)
	defer span.End()
	parent, _ := tracing.Inject(ctx)
	if len(parent) != 55 {
		t.Fatalf("traceparent %q", parent)
	}
	got := trace.SpanContextFromContext(tracing.Extract(context.Background(), parent, "vendor=1"))
	if !got.IsRemote() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() ||
		got.TraceState().Get("vendor") != "1" {
		t.Fatalf("extracted %+v from %q", got, parent)
	}
	if p, s := tracing.Inject(context.Background()); p != "" || s != "" {
		t.Fatalf("injected %q %q without a span", p, s)
	}
	for _, bad := range []string{"", "00-zz-11-01", "garbage"} {
		if sc := trace.SpanContextFromContext(tracing.Extract(context.Background(), bad, "")); sc.IsValid() {
			t.Errorf("%q extracted to %+v", bad, sc)
		}
	}
	// FromContext traces with the provider of ctx's span, a no-op without.
	if _, s := tracing.FromContext(ctx).Start(ctx, "child"); !s.IsRecording() {
		t.Error("a child of a recording span does not record")
	}
	if _, s := tracing.FromContext(context.Background()).Start(context.Background(), "x"); s.IsRecording() {
		t.Error("a span without a traced parent records")
	}
}
