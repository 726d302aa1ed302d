package httpapi

import (
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
	reg.MustRegister(m.requests, m.latency)
	return m
}

func (m *httpMetrics) observe(method string, code api.Code, d time.Duration) {
	c := string(code)
	if c == "" {
		c = "ok"
	}
	m.requests.WithLabelValues(method, c).Inc()
	m.latency.WithLabelValues(method).Observe(d.Seconds())
}
