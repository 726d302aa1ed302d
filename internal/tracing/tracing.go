package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of Cairn's spans.
const Name = "github.com/cairnflow/cairn"

// Span names.
const (
	// SpanWorkflowStart is a client's start of a run (the root of its
	// trace when the caller has none).
	SpanWorkflowStart = "cairn.workflow.start"
	// SpanWorkflowTask is one workflow task a worker ran (its new
	// decisions).
	SpanWorkflowTask = "cairn.workflow.task"
	// SpanActivity is one activity attempt a worker ran.
	SpanActivity = "cairn.activity"
)

// The cairn.* attribute keys.
const (
	WorkflowID     = attribute.Key("cairn.workflow.id")
	RunID          = attribute.Key("cairn.run.id")
	WorkflowType   = attribute.Key("cairn.workflow.type")
	ActivityType   = attribute.Key("cairn.activity.type")
	EffectClass    = attribute.Key("cairn.effect_class")
	IdempotencyKey = attribute.Key("cairn.idempotency_key")
	Attempt        = attribute.Key("cairn.attempt")
	// Verdict is what the engine answered the attempt's report: recorded
	// (it is the activity's outcome), stale (the attempt no longer held
	// its lease: the engine judged it against the effects ledger),
	// refused, abandoned (the worker stopped before delivering it),
	// given_back (the lease ended before the attempt began: it never ran)
	// or pending (asynchronous completion: someone else reports it).
	Verdict = attribute.Key("cairn.verdict")
	// Reconcile marks an attempt that ran the activity's Reconcile lookup.
	Reconcile = attribute.Key("cairn.reconcile")
	// Replayed says a workflow task rebuilt its run from the whole history
	// first (a sticky-cache miss, a restart) — replay itself makes no span.
	Replayed = attribute.Key("cairn.replayed")
	// Cost is a model call's cost in the run's budget unit.
	Cost = attribute.Key("cairn.cost")
)

// Verdicts (the values of Verdict).
const (
	VerdictRecorded  = "recorded"
	VerdictStale     = "stale"
	VerdictRefused   = "refused"
	VerdictAbandoned = "abandoned"
	VerdictGivenBack = "given_back"
	// VerdictPending: the activity returned activities.ErrResultPending;
	// someone else reports its outcome (asynchronous completion).
	VerdictPending = "pending"
)

// Tracer returns Cairn's tracer of tp, or of the global provider when tp
// is nil (a no-op until a program installs one).
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(Name)
}

// FromContext returns Cairn's tracer of the provider that made ctx's span:
// code that only gets a context (an activity) traces with the worker's
// provider, and with nothing (a no-op) when ctx has no span.
func FromContext(ctx context.Context) trace.Tracer {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(Name)
}

// w3c is the W3C Trace Context format (traceparent, tracestate).
var w3c propagation.TraceContext

// Inject returns the W3C trace context of ctx's span, or empty strings
// when ctx has no valid span (nothing to propagate).
func Inject(ctx context.Context) (traceParent, traceState string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	c := carrier{}
	w3c.Inject(ctx, &c)
	return c.parent, c.state
}

// Extract returns ctx with the remote span context traceParent and
// traceState name as its parent; ctx itself when traceParent is empty or
// malformed (a span started from it is then a root).
func Extract(ctx context.Context, traceParent, traceState string) context.Context {
	if traceParent == "" {
		return ctx
	}
	return w3c.Extract(ctx, &carrier{parent: traceParent, state: traceState})
}

// carrier is a propagation.TextMapCarrier of the two W3C fields only.
type carrier struct{ parent, state string }

func (c *carrier) Get(key string) string {
	switch key {
	case "traceparent":
		return c.parent
	case "tracestate":
		return c.state
	}
	return ""
}

func (c *carrier) Set(key, value string) {
	switch key {
	case "traceparent":
		c.parent = value
	case "tracestate":
		c.state = value
	}
}

func (c *carrier) Keys() []string { return []string{"traceparent", "tracestate"} }
