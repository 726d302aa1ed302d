package main

import (
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/internal/clock"
)

// TestDescribeSaysNoWorkerPollsTheQueue: describe of a run whose workflow
// task waits on a queue no worker has polled says so, with where to look.
func TestDescribeSaysNoWorkerPollsTheQueue(t *testing.T) {
	clk := clock.NewFake(time.Now())
	s := newTestServer(t, false, func(o *engine.Options) { o.Clock = clk })
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "lonely", "--task-queue", "nobody-polls", "--input", `"x"`)
	if out := s.must(t, "workflow", "describe", "lonely"); strings.Contains(out, "WAITING") {
		t.Fatalf("describe of a run started just now says it waits for a worker:\n%s", out)
	}
	clk.Advance(30 * time.Second)
	out := s.must(t, "workflow", "describe", "lonely")
	for _, want := range []string{`WAITING: no worker has ever polled task queue "nobody-polls" for workflow tasks (since the engine started 30 s ago)`,
		"is a worker running on task queue nobody-polls? cairn task-queue describe nobody-polls"} {
		if !strings.Contains(out, want) {
			t.Errorf("describe does not say %q:\n%s", want, out)
		}
	}
}
