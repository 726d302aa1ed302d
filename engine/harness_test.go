package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/internal/clock"
	"github.com/cairnflow/cairn/internal/storetest"
)

// testStart is the fake clock's start: a fixed instant, so histories are
// reproducible.
var testStart = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// harness is an engine over an on-disk store with a fake clock, and helpers
// that act as scripted workers. The store is Badger, or Postgres with
// CAIRN_TEST_STORE=postgres (internal/storetest): there the engine serves
// every shard under a lease, so every commit is fenced.
type harness struct {
	t     *testing.T
	data  *storetest.Data
	clk   *clock.Fake
	store history.Store
	// fault wraps store: the engine's store. Its rules survive a reopen.
	fault *faultstore.Store
	rules []faultstore.Rule // injected at every open, before the engine opens
	eng   *Engine
	ids   atomic.Int64
	opts  Options
}

func newHarness(t *testing.T, mod ...func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, data: storetest.New(t), clk: clock.NewFake(testStart)}
	h.opts = Options{Clock: h.clk, PollTimeout: 5 * time.Second, NewRunID: func() string {
		return fmt.Sprintf("run-%d", h.ids.Add(1))
	}}
	for _, f := range mod {
		f(&h.opts)
	}
	h.open()
	t.Cleanup(h.close)
	return h
}

func (h *harness) open() {
	h.t.Helper()
	st, err := h.data.Open(context.Background())
	if err != nil {
		h.t.Fatalf("open store: %v", err)
	}
	h.store = st
	h.fault = faultstore.New(st)
	for _, r := range h.rules {
		h.fault.Inject(r)
	}
	opts := h.opts
	opts.Store = h.fault
	var owner *storetest.Owner
	if pg, ok := st.(*pgstore.Store); ok {
		if owner, err = storetest.AcquireAll(context.Background(), pg, "engine-test"); err != nil {
			h.t.Fatal(err)
		}
		opts.Shards = owner
	}
	eng, err := Open(opts)
	if err != nil {
		h.t.Fatalf("open engine: %v", err)
	}
	if owner != nil {
		if err := eng.Acquire(context.Background(), owner.All()); err != nil {
			h.t.Fatalf("acquire the shards: %v", err)
		}
	}
	h.eng = eng
}

func (h *harness) close() {
	if h.eng != nil {
		_ = h.eng.Close()
		h.eng = nil
	}
	if h.store != nil {
		_ = h.store.Close()
		h.store = nil
	}
}

// reopen closes engine and store and opens them again over the same
// directory, as a restart would.
func (h *harness) reopen() {
	h.t.Helper()
	h.close()
	h.open()
}

func (h *harness) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	h.t.Cleanup(cancel)
	return ctx
}

func (h *harness) start(id, typ string) string {
	h.t.Helper()
	resp, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: typ, TaskQueue: "q",
		Input: jsonPayload(`"in"`)})
	if err != nil {
		h.t.Fatalf("start %s: %v", id, err)
	}
	return resp.RunID
}

func jsonPayload(s string) history.Payload { return history.Payload{Encoding: "json", Data: []byte(s)} }

// pollWFT waits for a workflow task on queue (failing the test after a
// generous deadline).
func (h *harness) pollWFT(queue string) *api.WorkflowTask {
	h.t.Helper()
	resp, err := h.eng.PollWorkflowTask(h.ctx(), &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "test-worker"})
	if err != nil {
		h.t.Fatalf("poll workflow task: %v", err)
	}
	if resp.Task == nil {
		h.t.Fatalf("no workflow task on %q", queue)
	}
	return resp.Task
}

// noWFT asserts that no workflow task is ready on queue right now.
func (h *harness) noWFT(queue string) {
	h.t.Helper()
	if n := h.eng.wftQ.Len(queue); n != 0 {
		h.t.Fatalf("%d workflow tasks ready on %q, want none", n, queue)
	}
}

func (h *harness) complete(task *api.WorkflowTask, cmds ...api.Command) {
	h.t.Helper()
	if _, err := h.eng.CompleteWorkflowTask(h.ctx(), &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, Commands: cmds,
		Identity: "test-worker"}); err != nil {
		h.t.Fatalf("complete workflow task: %v", err)
	}
}

func (h *harness) pollActivity(queue string) *api.ActivityTask {
	h.t.Helper()
	resp, err := h.eng.PollActivityTask(h.ctx(), &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "test-worker"})
	if err != nil {
		h.t.Fatalf("poll activity task: %v", err)
	}
	if resp.Task == nil {
		h.t.Fatalf("no activity task on %q", queue)
	}
	return resp.Task
}

// advance moves the fake clock and waits until the timer goroutines it
// triggered have committed.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	h.clk.Advance(d)
	h.settle()
}

// settle waits for background timer work to finish.
func (h *harness) settle() {
	h.eng.Settle()
}

func (h *harness) history(id string) []history.Event {
	h.t.Helper()
	resp, err := h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: id})
	if err != nil {
		h.t.Fatalf("history of %s: %v", id, err)
	}
	return resp.Events
}

func (h *harness) describe(id string) *api.DescribeWorkflowResponse {
	h.t.Helper()
	resp, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: id})
	if err != nil {
		h.t.Fatalf("describe %s: %v", id, err)
	}
	return resp
}

// types renders a history as its event type names, one per line.
func types(evs []history.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d %s\n", ev.ID, ev.Type())
	}
	return b.String()
}

func schedule(id, typ string, effect history.EffectClass, opts history.ActivityOptions) api.Command {
	return api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: id, ActivityType: typ, Input: jsonPayload(`{"invoice":"INV-9"}`), Effect: effect, Options: opts}}
}

func completeWF(result string) api.Command {
	return api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: jsonPayload(result)}}
}

func startTimer(id string, d time.Duration) api.Command {
	return api.Command{Type: api.CommandStartTimer, StartTimer: &api.StartTimerCommand{TimerID: id, Duration: d}}
}
