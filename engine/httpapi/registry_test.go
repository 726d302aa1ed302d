package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Two handlers on one metrics registry (a restart in the same process, a
// second listener) share the metrics instead of panicking; a collector that
// cannot be registered is logged, not fatal.
func TestHandlersShareARegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	dup := prometheus.NewCounter(prometheus.CounterOpts{Name: "cairn_test_total", Help: "test"})
	a := NewHandler(&stubService{}, Options{Registry: reg, Collectors: []prometheus.Collector{dup}})
	b := NewHandler(&stubService{}, Options{Registry: reg, Collectors: []prometheus.Collector{dup}})
	for _, h := range []http.Handler{a, b} {
		srv := newTestServer(t, h)
		resp, err := http.Post(srv.URL+Prefix+"DescribeWorkflow", ContentJSON, strings.NewReader(`{"WorkflowID":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "cairn_api_requests_total" {
			var n float64
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
			if n != 2 {
				t.Fatalf("requests counted %v, want 2 (one per handler, shared)", n)
			}
			return
		}
	}
	t.Fatal("cairn_api_requests_total not gathered")
}
