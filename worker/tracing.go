package worker

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/tracing"
)

// The worker's spans (docs/observability.md). A span is started only for
// work done now — a workflow task's new decisions, an activity attempt
// actually run — never while a run's state is rebuilt from its history (a
// sticky-cache miss replays inside the task's span and adds none; the
// Replayer and query answers make none).

// workflowTaskSpan starts the span of a workflow task, a child of the
// run's trace context.
func (w *Worker) workflowTaskSpan(task *api.WorkflowTask) (context.Context, trace.Span) {
	ctx := tracing.Extract(context.Background(), task.TraceParent, task.TraceState)
	ctx, span := w.tracer.Start(ctx, tracing.SpanWorkflowTask, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		// Few attributes: each costs its share of every span exported.
		span.SetAttributes(tracing.WorkflowID.String(task.WorkflowID), tracing.RunID.String(task.RunID),
			tracing.WorkflowType.String(task.WorkflowType))
		if task.Attempt > 1 {
			span.SetAttributes(tracing.Attempt.Int(int(task.Attempt)))
		}
	}
	return ctx, span
}

// stampCommands gives the activities and children the task decided its
// span's trace context, so that they are traced as its children.
func stampCommands(span trace.Span, cmds []api.Command) {
	if !span.IsRecording() {
		return
	}
	var parent string
	for i := range cmds {
		c := &cmds[i]
		if c.ScheduleActivity == nil && c.StartChildWorkflow == nil {
			continue
		}
		if parent == "" {
			parent, _ = tracing.Inject(trace.ContextWithSpan(context.Background(), span))
		}
		if c.ScheduleActivity != nil {
			c.ScheduleActivity.TraceParent = parent
		}
		if c.StartChildWorkflow != nil {
			c.StartChildWorkflow.TraceParent = parent
		}
	}
}

// endSpan ends span, recording err as its error when set.
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// attemptSpans are the spans of one activity attempt: the attempt's, and
// for an agent's tool call a GenAI execute_tool span inside it.
type attemptSpans struct {
	attempt, tool trace.Span
}

// activitySpans starts the spans of an attempt, children of the trace
// context the task carries (the workflow task that scheduled it).
func (w *Worker) activitySpans(ctx context.Context, task *api.ActivityTask) (context.Context, attemptSpans) {
	ctx = tracing.Extract(ctx, task.TraceParent, task.TraceState)
	ctx, span := w.tracer.Start(ctx, tracing.SpanActivity, trace.WithSpanKind(trace.SpanKindConsumer))
	s := attemptSpans{attempt: span}
	if !span.IsRecording() {
		return ctx, s
	}
	attrs := []attribute.KeyValue{tracing.WorkflowID.String(task.WorkflowID), tracing.RunID.String(task.RunID),
		tracing.ActivityType.String(task.ActivityType), tracing.EffectClass.String(task.Effect.String()),
		tracing.Attempt.Int(int(task.Attempt))}
	if task.IdempotencyKey != "" {
		attrs = append(attrs, tracing.IdempotencyKey.String(task.IdempotencyKey))
	}
	if task.Reconcile {
		attrs = append(attrs, tracing.Reconcile.Bool(true))
	}
	span.SetAttributes(attrs...)
	if call, ok := strings.CutPrefix(task.ActivityID, history.ToolActivityPrefix); ok && !task.Reconcile {
		// The GenAI semantic conventions' tool execution span.
		ctx, s.tool = w.tracer.Start(ctx, "execute_tool "+task.ActivityType, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(append(attrs,
				attribute.String("gen_ai.operation.name", "execute_tool"),
				attribute.String("gen_ai.tool.name", task.ActivityType),
				attribute.String("gen_ai.tool.call.id", call),
			)...))
	}
	return ctx, s
}

// usage puts what a metered attempt (a model call) consumed on its span,
// as the GenAI conventions name tokens, with the cost the engine's price
// table put on it (cairn.cost): the model call's own span, made inside the
// activity, knows the tokens but not the price.
func (s attemptSpans) usage(u history.Usage, cost float64) {
	if u.IsZero() || !s.attempt.IsRecording() {
		return
	}
	s.attempt.SetAttributes(attribute.Int64("gen_ai.usage.input_tokens", u.PromptTokens),
		attribute.Int64("gen_ai.usage.output_tokens", u.CompletionTokens), tracing.Cost.Float64(cost))
	if u.Model != "" {
		s.attempt.SetAttributes(attribute.String("gen_ai.response.model", u.Model))
	}
}

// end ends the attempt's spans with its error and the engine's answer to
// its report (tracing.Verdict).
func (s attemptSpans) end(err error, verdict string) {
	for _, span := range []trace.Span{s.tool, s.attempt} {
		if span == nil {
			continue
		}
		if span.IsRecording() && verdict != "" {
			span.SetAttributes(tracing.Verdict.String(verdict))
		}
		endSpan(span, err)
	}
}
