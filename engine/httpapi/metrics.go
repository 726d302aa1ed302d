package httpapi

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairnflow/cairn/engine/api"
)

type httpMetrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) *httpMetrics {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cairn_api_requests_total", Help: "API requests by method and result code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cairn_api_request_seconds", Help: "API request latency by method (long polls include their wait).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 12),
		}, []string{"method"}),
	}
	m.requests = register(reg, m.requests)
	m.latency = register(reg, m.latency)
	return m
}

// register adds c to reg; when reg already holds an equal collector (a
// second handler on one registry) that one is used instead. It never
// panics.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
	}
	return c
}

func (m *httpMetrics) observe(method string, code api.Code, d time.Duration) {
	c := string(code)
	if c == "" {
		c = "ok"
	}
	m.requests.WithLabelValues(method, c).Inc()
	m.latency.WithLabelValues(method).Observe(d.Seconds())
}
