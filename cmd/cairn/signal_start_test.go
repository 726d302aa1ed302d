package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// workflow signal --start is signal-with-start: it starts a run when none
// is open and signals it atomically, or signals the open run; --json says
// which (issue 20, point 5).
func TestSignalWithStart(t *testing.T) {
	s := newTestServer(t, true)
	type out struct {
		WorkflowID string `json:"workflowId"`
		RunID      string `json:"runId"`
		Signal     string `json:"signal"`
		Started    *bool  `json:"started"`
	}
	signal := func(id, by string, extra ...string) out {
		t.Helper()
		args := append([]string{"workflow", "signal", id, "--name", "go", "--input", `"` + by + `"`, "--start", "--type", "Hold",
			"--task-queue", testQueue, "--json"}, extra...)
		var o out
		if err := json.Unmarshal([]byte(s.must(t, args...)), &o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	result := func(id string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var got string
		if err := s.c.GetWorkflow(ctx, id, "").Get(ctx, &got); err != nil {
			t.Fatal(err)
		}
		return got
	}

	// No run: one is started with --workflow-input, and its first task
	// sees the signal.
	o := signal("sws-new", "ann", "--workflow-input", `"box"`)
	if o.WorkflowID != "sws-new" || o.RunID == "" || o.Signal != "go" || o.Started == nil || !*o.Started {
		t.Fatalf("signal --start of a new id: %+v", o)
	}
	if got := result("sws-new"); got != "box released by ann" {
		t.Fatalf("result %q", got)
	}

	// An open run: it gets the signal; nothing is started.
	started := s.must(t, "workflow", "start", "--type", "Hold", "--id", "sws-open", "--task-queue", testQueue, "--input", `"crate"`, "--json")
	var first runRefJSON
	if err := json.Unmarshal([]byte(started), &first); err != nil {
		t.Fatal(err)
	}
	o = signal("sws-open", "bob", "--workflow-input", `"ignored"`)
	if o.RunID != first.RunID || o.Started == nil || *o.Started {
		t.Fatalf("signal --start of an open run %s: %+v", first.RunID, o)
	}
	if got := result("sws-open"); got != "crate released by bob" {
		t.Fatalf("result %q", got)
	}

	// The human form says which happened.
	if got := s.must(t, "workflow", "signal", "sws-text", "--name", "go", "--input", `"cy"`, "--start", "--type", "Hold",
		"--task-queue", testQueue); !strings.HasPrefix(got, "started sws-text run ") {
		t.Fatalf("human output %q", got)
	}

	// A closed id whose reuse policy refuses: nothing is started or signalled.
	result("sws-text")
	if _, errs, code := s.run(t, "", "workflow", "signal", "sws-text", "--name", "go", "--start", "--type", "Hold", "--task-queue", testQueue,
		"--reject-duplicate"); code != 1 || !strings.Contains(errs, "already") {
		t.Fatalf("--reject-duplicate on a closed id: exit %d, %s", code, errs)
	}

	// Plain signal's --json has no "started".
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "plain", "--task-queue", testQueue, "--input", `"p"`)
	if got := s.must(t, "workflow", "signal", "plain", "--name", "go", "--json"); strings.Contains(got, "started") {
		t.Fatalf("plain signal --json: %s", got)
	}

	// Flags that belong to --start are refused without it, and --start
	// needs the run's type and queue.
	for _, args := range [][]string{
		{"workflow", "signal", "x", "--name", "go", "--type", "Hold"},
		{"workflow", "signal", "x", "--name", "go", "--workflow-input", `"y"`},
		{"workflow", "signal", "x", "--name", "go", "--start", "--type", "Hold"},
		{"workflow", "signal", "x", "--name", "go", "--start", "--task-queue", testQueue},
		{"workflow", "signal", "x", "--name", "go", "--start", "--type", "Hold", "--task-queue", testQueue, "--run", "r"},
	} {
		if _, errs, code := s.run(t, "", args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage): %s", args, code, errs)
		}
	}
}

// runRefJSON is start's --json.
type runRefJSON struct {
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId"`
}
