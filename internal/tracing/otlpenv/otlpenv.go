package otlpenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// ErrConfig is wrapped by Setup's errors about the environment.
var ErrConfig = errors.New("otlpenv: invalid OpenTelemetry configuration")

// Enabled reports whether the environment (lookup, os.LookupEnv's shape)
// asks for traces, and which OTLP protocol ("http/protobuf" or "grpc").
func Enabled(lookup func(string) (string, bool)) (on bool, protocol string, err error) {
	get := func(k string) string { v, _ := lookup(k); return strings.TrimSpace(v) }
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return false, "", nil
	}
	switch exp := strings.ToLower(get("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return false, "", nil
	case "":
		if get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return false, "", nil
		}
	case "otlp":
	default:
		return false, "", fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: Cairn exports traces with otlp (or none)", ErrConfig, exp)
	}
	protocol = get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = get("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf":
		return true, "http/protobuf", nil
	case "grpc":
		return true, "grpc", nil
	}
	return false, "", fmt.Errorf("%w: OTLP protocol %q: use http/protobuf or grpc", ErrConfig, protocol)
}

// Setup installs a tracer provider exporting to OTLP as the global one
// when the environment asks for traces (see the package doc), and returns
// the function that flushes and stops it; without, it installs nothing and
// shutdown does nothing. service is the default service.name.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	tp, err := New(ctx, service, os.LookupEnv)
	if err != nil || tp == nil {
		return func(context.Context) error { return nil }, err
	}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown, nil
}

// New returns the SDK tracer provider the environment (lookup) asks for,
// batching its spans to an OTLP exporter, or nil when it asks for none.
// The exporters read their variables from the process's environment.
func New(ctx context.Context, service string, lookup func(string) (string, bool)) (*sdktrace.TracerProvider, error) {
	on, protocol, err := Enabled(lookup)
	if err != nil || !on {
		return nil, err
	}
	var exp sdktrace.SpanExporter
	if protocol == "grpc" {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: OTLP %s exporter: %w", ErrConfig, protocol, err)
	}
	// The service name first: OTEL_SERVICE_NAME and
	// OTEL_RESOURCE_ATTRIBUTES (WithFromEnv) override it.
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("%w: resource: %w", ErrConfig, err)
	}
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}
