// Package otlpenv turns Cairn's traces on the standard OpenTelemetry way:
// from the environment. `cairn server`, `cairn dev` and worker binaries
// (worker/workercli) call Setup at start.
//
// Traces are on when OTEL_TRACES_EXPORTER is "otlp", or when it is unset
// and OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is
// set; off with OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true. The
// exporter is OTLP over HTTP/protobuf, or gRPC with
// OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL=grpc, and reads its own variables
// (endpoint, headers, timeout, compression, certificates); the SDK reads
// OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_* and OTEL_RESOURCE_ATTRIBUTES;
// OTEL_SERVICE_NAME overrides the service name the caller gives.
//
//	shutdown, err := otlpenv.Setup(ctx, "cairn-server")
//	if err != nil {
//		return err
//	}
//	defer shutdown(context.Background()) // flushes the spans still queued
//
// Setup installs the provider as OpenTelemetry's global one (and the W3C
// trace-context and baggage propagators), which Cairn's clients and
// workers use unless given another.
package otlpenv
