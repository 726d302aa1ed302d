package engine

import (
	"fmt"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
)

// TestQuarantinedRunsAreCountedApart: a run quarantined while running is
// counted as quarantined, not among the running runs, and a list by status
// leaves it out; the list of quarantined runs has it. Total counts both.
func TestQuarantinedRunsAreCountedApart(t *testing.T) {
	h := newHarness(t)
	h.start("bad", "W")
	h.start("ok", "W")
	h.start("other", "V")
	ref := history.RunRef{WorkflowID: "bad", RunID: h.runID("bad")}
	remove := h.fault.Inject(faultstore.Rule{Op: faultstore.OpReadEvents, Match: faultstore.RunIs(ref), Err: faultstore.Corrupt("event checksum mismatch")})
	_, err := h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: "bad"})
	wantErr(t, err, api.ErrDataCorrupt)
	remove()

	for _, c := range []struct {
		name string
		req  api.CountWorkflowsRequest
		want string
	}{
		{"all", api.CountWorkflowsRequest{}, "total 3, running 2, quarantined 1"},
		{"by type", api.CountWorkflowsRequest{WorkflowType: "W"}, "total 2, running 1, quarantined 1"},
		{"by prefix", api.CountWorkflowsRequest{WorkflowIDPrefix: "o"}, "total 2, running 2, quarantined 0"},
	} {
		resp, err := h.eng.CountWorkflows(h.ctx(), &c.req)
		if err != nil {
			t.Fatal(err)
		}
		var running int64
		for _, s := range resp.ByStatus {
			if s.Status == api.StatusRunning {
				running = s.Count
			} else {
				t.Errorf("%s: counted %d runs %s", c.name, s.Count, s.Status)
			}
		}
		if got := fmtCount(resp.Total, running, resp.Quarantined); got != c.want {
			t.Errorf("count %s: %s, want %s", c.name, got, c.want)
		}
	}
	for _, status := range []api.Status{api.StatusRunning, api.StatusUnspecified} {
		resp, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{Status: status})
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]bool{}
		for _, w := range resp.Workflows {
			listed[w.WorkflowID] = true
		}
		if want := status == api.StatusUnspecified; listed["bad"] != want || !listed["ok"] || !listed["other"] {
			t.Errorf("list by status %s: %v; the quarantined run listed %v, want %v", status, listed, listed["bad"], want)
		}
	}
	resp, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{Corrupt: true})
	if err != nil || len(resp.Workflows) != 1 || resp.Workflows[0].WorkflowID != "bad" {
		t.Fatalf("list of the quarantined runs: %+v %v", resp, err)
	}
}

func fmtCount(total, running, quarantined int64) string {
	return fmt.Sprintf("total %d, running %d, quarantined %d", total, running, quarantined)
}
