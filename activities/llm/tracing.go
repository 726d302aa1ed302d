package llm

import (
	"context"
	"errors"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/internal/tracing"
)

// The model call's span follows the OpenTelemetry GenAI semantic
// conventions (a client span "chat <model>", gen_ai.* attributes). It is
// made with the tracer provider of the context's span — the worker's
// activity attempt — so that it is a no-op when the attempt is not traced.

// callSpan starts the span of one call of the endpoint.
func (m *Model) callSpan(ctx context.Context, req *request) (context.Context, trace.Span) {
	ctx, span := tracing.FromContext(ctx).Start(ctx, "chat "+req.settings.Model, trace.WithSpanKind(trace.SpanKindClient))
	if !span.IsRecording() {
		return ctx, span
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		// The endpoint speaks OpenAI's API (OpenAI itself, vLLM, Ollama…);
		// gen_ai.system is the attribute's older name.
		attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.system", "openai"),
		attribute.String("gen_ai.request.model", req.settings.Model),
	}
	if u, err := url.Parse(m.cfg.BaseURL); err == nil && u.Hostname() != "" {
		attrs = append(attrs, attribute.String("server.address", u.Hostname()))
	}
	span.SetAttributes(attrs...)
	return ctx, span
}

// endCall ends a call's span with its answer's usage, or its error.
func endCall(span trace.Span, r Result, err error) {
	if span.IsRecording() {
		if err != nil {
			typ := "error"
			var app *activities.ApplicationError
			if errors.As(err, &app) && app.Type != "" {
				typ = app.Type
			}
			span.SetAttributes(attribute.String("error.type", typ))
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		attrs := []attribute.KeyValue{
			attribute.Int64("gen_ai.usage.input_tokens", r.Usage.PromptTokens),
			attribute.Int64("gen_ai.usage.output_tokens", r.Usage.CompletionTokens),
		}
		if r.Model != "" {
			attrs = append(attrs, attribute.String("gen_ai.response.model", r.Model))
		}
		if r.ID != "" {
			attrs = append(attrs, attribute.String("gen_ai.response.id", r.ID))
		}
		if r.FinishReason != "" {
			attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{r.FinishReason}))
		}
		if r.Usage.CachedTokens > 0 {
			attrs = append(attrs, attribute.Int64("gen_ai.usage.cache_read.input_tokens", r.Usage.CachedTokens))
		}
		if r.Usage.CostUSD > 0 {
			attrs = append(attrs, tracing.Cost.Float64(r.Usage.CostUSD))
		}
		span.SetAttributes(attrs...)
	}
	span.End()
}
