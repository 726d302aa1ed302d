package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// workflow update: the handler's result, a validator's rejection (exit 1,
// nothing recorded), an update id sent twice, --no-wait, --json, and
// update-with-start.
func TestWorkflowUpdate(t *testing.T) {
	s := newTestServer(t, true)
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "hold-u", "--task-queue", testQueue, "--input", `"box"`)
	if out := s.must(t, "workflow", "update", "hold-u", "--name", "relabel", "--input", `"crate"`, "--update-id", "u-1"); strings.TrimSpace(out) != `"holding box"` {
		t.Fatalf("update: %q", out)
	}
	// The same id again: the first outcome, not applied twice.
	if out := s.must(t, "workflow", "update", "hold-u", "--name", "relabel", "--input", `"bag"`, "--update-id", "u-1"); strings.TrimSpace(out) != `"holding box"` {
		t.Fatalf("update sent again: %q", out)
	}
	before := s.must(t, "workflow", "show", "hold-u")
	if _, errs, code := s.run(t, "", "workflow", "update", "hold-u", "--name", "relabel", "--input", `""`); code != 1 ||
		!strings.Contains(errs, "update rejected") || !strings.Contains(errs, "an empty label") {
		t.Fatalf("a rejected update: exit %d, %s", code, errs)
	}
	if _, errs, code := s.run(t, "", "workflow", "update", "hold-u", "--name", "nope"); code != 1 || !strings.Contains(errs, "unknown update") {
		t.Fatalf("an unknown update: exit %d, %s", code, errs)
	}
	if after := s.must(t, "workflow", "show", "hold-u"); after != before {
		t.Fatalf("rejections changed the history:\n%s\n%s", before, after)
	}
	if out := s.must(t, "workflow", "update", "hold-u", "--name", "relabel", "--input", `"tin"`, "--no-wait"); !strings.Contains(out, "accepted") {
		t.Fatalf("update --no-wait: %q", out)
	}
	out := s.must(t, "workflow", "update", "hold-u", "--name", "relabel", "--input", `"jar"`, "--json")
	var r struct {
		WorkflowID, UpdateID, Stage string
		Result                      struct{ JSON string }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.WorkflowID != "hold-u" || r.Stage != "completed" || r.UpdateID == "" ||
		r.Result.JSON != "holding tin" {
		t.Fatalf("update --json: %s (%v)", out, err)
	}
	// Update-with-start: the run is started, then updated.
	if _, errs, code := s.run(t, "", "workflow", "update", "hold-s", "--name", "relabel", "--input", `"x"`, "--type", "Hold"); code != 2 {
		t.Fatalf("--type without --start: exit %d, %s", code, errs)
	}
	if out := s.must(t, "workflow", "update", "hold-s", "--name", "relabel", "--input", `"sack"`, "--start", "--type", "Hold",
		"--task-queue", testQueue, "--start-input", `"bag"`); strings.TrimSpace(out) != `"holding bag"` {
		t.Fatalf("update --start: %q", out)
	}
	s.must(t, "workflow", "signal", "hold-s", "--name", "go", "--input", `"ann"`)
	if out := s.must(t, "workflow", "result", "hold-s"); !strings.Contains(out, "bag released by ann") {
		t.Fatalf("result after update-with-start: %q", out)
	}
}
