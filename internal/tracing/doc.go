// Package tracing holds what Cairn's OpenTelemetry traces share: the
// tracer name, the span names and cairn.* attribute keys, and the W3C trace
// context a run carries in its history (WorkflowStarted.TraceParent and
// TraceState) turned into a parent context and back. It links only the
// OpenTelemetry API (go.opentelemetry.io/otel/trace), never the SDK: a
// program that configures no tracer provider pays one interface call per
// span (the no-op tracer). Package internal/tracing/otlpenv builds the SDK's
// provider from the standard environment variables for the binaries.
//
// A client starting a run:
//
//	ctx, span := tracing.Tracer(tp).Start(ctx, tracing.SpanWorkflowStart, trace.WithSpanKind(trace.SpanKindProducer))
//	defer span.End()
//	req.TraceParent, req.TraceState = tracing.Inject(ctx)
//
// A worker running one of its tasks:
//
//	ctx := tracing.Extract(context.Background(), task.TraceParent, task.TraceState)
//	ctx, span := tracing.Tracer(tp).Start(ctx, tracing.SpanWorkflowTask)
//	defer span.End()
//
// Replay never reaches these calls: workers start spans only for the work
// they do now (a workflow task, an activity attempt), never while
// rebuilding a run's state from its history.
package tracing
