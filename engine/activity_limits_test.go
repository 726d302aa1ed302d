package engine

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

func (h *harness) setLimit(l api.ActivityLimit) {
	h.t.Helper()
	if l.TaskQueue == "" {
		l.TaskQueue = "q"
	}
	if _, err := h.eng.SetActivityLimit(h.ctx(), &api.SetActivityLimitRequest{Limit: l}); err != nil {
		h.t.Fatalf("set limit %+v: %v", l, err)
	}
}

// startScheduling starts workflow id and completes its first task by
// scheduling n activities of type typ with limit key key.
func (h *harness) startScheduling(id, typ, key string, effect history.EffectClass, n int) {
	h.t.Helper()
	h.start(id, "W")
	task := h.pollWFT("q")
	if task.WorkflowID != id {
		h.t.Fatalf("task for %s, want %s", task.WorkflowID, id)
	}
	opts := history.ActivityOptions{StartToCloseTimeout: time.Minute, LimitKey: key,
		RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 5}}
	var cmds []api.Command
	for i := range n {
		cmds = append(cmds, schedule(fmt.Sprint(i), typ, effect, opts))
	}
	h.complete(task, cmds...)
}

// vendor is the fake provider the activities call: it counts the calls in
// flight and remembers the most at once.
type vendor struct{ now, most int }

func (v *vendor) begin() {
	v.now++
	v.most = max(v.most, v.now)
}

// waitingPoll starts an activity poll by worker identity and returns its
// outcome; it returns once the poll waits on the queue.
func (h *harness) waitingPoll(identity string) <-chan *api.ActivityTask {
	h.t.Helper()
	before := h.eng.actQ.Waiting("q")
	ch := make(chan *api.ActivityTask, 1)
	go func() {
		resp, err := h.eng.PollActivityTask(h.ctx(), &api.PollActivityTaskRequest{TaskQueue: "q", Identity: identity})
		if err != nil {
			h.t.Errorf("poll: %v", err)
		}
		ch <- resp.Task
	}()
	for h.eng.actQ.Waiting("q") == before {
		runtime.Gosched()
	}
	return ch
}

func (h *harness) queueInfo() api.TaskQueueInfo {
	h.t.Helper()
	resp, err := h.eng.DescribeTaskQueue(h.ctx(), &api.DescribeTaskQueueRequest{TaskQueue: "q"})
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.Queue
}

// A limit of 2 holds across two workers: the third attempt waits while
// two are in flight; when a worker dies without reporting, its slot is
// freed when the attempt's lease ends (start-to-close, on the engine's
// clock) and the waiting attempt is dispatched; the limit and the slots of
// the attempts still leased survive a restart.
func TestActivityLimitAcrossWorkersAndACrash(t *testing.T) {
	h := newHarness(t)
	h.setLimit(api.ActivityLimit{ActivityType: "llm", MaxInFlight: 2})
	for i := range 3 {
		h.startScheduling(fmt.Sprintf("wf%d", i), "llm", "", history.Idempotent, 1)
	}
	var v vendor
	h.pollActivityAs("worker-a") // worker-a will die holding it
	v.begin()
	h.advance(30 * time.Second)
	b1 := h.pollActivityAs("worker-b")
	v.begin()
	waiting := h.waitingPoll("worker-b") // the third attempt is held back
	if n := h.eng.actQ.Len("q"); n != 1 {
		t.Fatalf("%d attempts queued, want 1 held back", n)
	}
	q := h.queueInfo()
	if len(q.ActivityLimits) != 1 || q.ActivityLimits[0].InFlight != 2 || q.ActivityLimits[0].Waiting != 1 {
		t.Fatalf("describe: %+v", q.ActivityLimits)
	}
	if p := h.describe("wf2").PendingActivities[0]; p.WaitsForLimit != "limit on type llm: 2 of 2 in flight" {
		t.Fatalf("wf2's held-back activity: %q", p.WaitsForLimit)
	}
	if p := h.describe("wf0").PendingActivities[0]; p.WaitsForLimit != "" {
		t.Fatalf("wf0's dispatched activity: %q", p.WaitsForLimit)
	}

	// worker-a dies holding a1: nothing reports it. Its lease ends after
	// the start-to-close timeout and the held-back attempt goes out.
	h.advance(30 * time.Second)
	v.now-- // a1's call is gone with its worker
	c1 := <-waiting
	if c1 == nil || c1.WorkflowID != "wf2" {
		t.Fatalf("after a1's lease ended the waiting poll got %+v, want wf2's attempt", c1)
	}
	v.begin()
	if v.most > 2 {
		t.Fatalf("%d calls in flight at once, limit 2", v.most)
	}
	if q := h.queueInfo(); q.ActivityLimits[0].InFlight != 2 {
		t.Fatalf("in flight: %+v", q.ActivityLimits)
	}

	// a1's retry (after its backoff) waits for a slot: two are in flight.
	h.advance(time.Second)
	if n := h.eng.actQ.Len("q"); n != 1 {
		t.Fatalf("%d attempts queued, want a1's retry held back", n)
	}

	// A restart keeps the limit, and the two attempts still leased hold
	// their slots: the retry is still held back.
	h.reopen()
	q = h.queueInfo()
	if len(q.ActivityLimits) != 1 || q.ActivityLimits[0].Limit.MaxInFlight != 2 || q.ActivityLimits[0].InFlight != 2 ||
		q.ActivityLimits[0].Waiting != 1 {
		t.Fatalf("describe after restart: %+v", q.ActivityLimits)
	}
	waiting = h.waitingPoll("worker-c")
	h.completeActivity(b1, `"b1"`)
	v.now--
	r := <-waiting
	if r == nil || r.WorkflowID != "wf0" || r.Attempt != 2 {
		t.Fatalf("after b1 completed the waiting poll got %+v, want wf0's retry", r)
	}
	v.begin()
	if v.most > 2 {
		t.Fatalf("%d calls in flight at once, limit 2", v.most)
	}
}

func (h *harness) pollActivityAs(identity string) *api.ActivityTask {
	h.t.Helper()
	resp, err := h.eng.PollActivityTask(h.ctx(), &api.PollActivityTaskRequest{TaskQueue: "q", Identity: identity})
	if err != nil || resp.Task == nil {
		h.t.Fatalf("poll as %s: %+v %v", identity, resp, err)
	}
	return resp.Task
}

// A heartbeat timeout frees the slot of a Read attempt whose worker
// stopped heartbeating (its lease lives in memory only).
func TestActivityLimitHeartbeatTimeoutFreesSlot(t *testing.T) {
	h := newHarness(t)
	h.setLimit(api.ActivityLimit{LimitKey: "openai/gpt-4o", MaxInFlight: 1})
	h.start("wf", "W")
	task := h.pollWFT("q")
	opts := history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second, LimitKey: "openai/gpt-4o,tenant/a",
		RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 5}}
	h.complete(task, schedule("1", "llm", history.Read, opts), schedule("2", "llm", history.Read, opts))
	first := h.pollActivityAs("w1")
	waiting := h.waitingPoll("w2")
	h.advance(10 * time.Second) // no heartbeat: the lease ends
	second := <-waiting
	if second == nil || second.ActivityID == first.ActivityID {
		t.Fatalf("second attempt %+v", second)
	}
}

// Keys are served in turn: tenant b's one task is not queued behind
// tenant a's hundred.
func TestActivityFairnessBetweenKeys(t *testing.T) {
	h := newHarness(t)
	h.startScheduling("wf-a", "llm", "tenant/a", history.Read, 100)
	h.startScheduling("wf-b", "llm", "tenant/b", history.Read, 1)
	q := h.queueInfo()
	if len(q.ActivityKeys) != 2 || q.ActivityKeys[0].Waiting != 100 || q.ActivityKeys[1].Waiting != 1 {
		t.Fatalf("backlog by key: %+v", q.ActivityKeys)
	}
	for i := range 3 {
		if task := h.pollActivityAs("w"); task.WorkflowID == "wf-b" {
			t.Logf("tenant b served at poll %d", i+1)
			return
		}
	}
	t.Fatal("tenant b's task not served within the first 3 polls")
}

// A family limit ("tenant/*") bounds each key apart.
func TestActivityLimitFamily(t *testing.T) {
	h := newHarness(t)
	h.setLimit(api.ActivityLimit{LimitKey: "tenant/*", MaxInFlight: 1})
	h.startScheduling("wf-a", "llm", "openai/gpt-4o,tenant/a", history.Read, 3)
	h.startScheduling("wf-b", "llm", "openai/gpt-4o,tenant/b", history.Read, 1)
	got := map[string]int{}
	for range 2 {
		got[h.pollActivityAs("w").WorkflowID]++
	}
	if got["wf-a"] != 1 || got["wf-b"] != 1 {
		t.Fatalf("dispatched %v, want one per tenant", got)
	}
	if n := h.eng.actQ.Len("q"); n != 2 {
		t.Fatalf("%d queued, want tenant a's other two held back", n)
	}
	q := h.queueInfo()
	l := q.ActivityLimits[0]
	if l.InFlight != 2 || l.Waiting != 2 || len(l.Keys) != 2 || l.Keys[0] != (api.LimitKeyInfo{Key: "tenant/a", InFlight: 1, Waiting: 2}) {
		t.Fatalf("describe: %+v", l)
	}
}

// A rate lets a burst through, then one attempt per token, on the
// engine's clock.
func TestActivityLimitRate(t *testing.T) {
	h := newHarness(t)
	h.setLimit(api.ActivityLimit{ActivityType: "llm", RatePerSecond: 2, Burst: 2})
	h.startScheduling("wf", "llm", "", history.Read, 5)
	h.pollActivityAs("w")
	h.pollActivityAs("w")
	waiting := h.waitingPoll("w")
	held := 0
	for _, p := range h.describe("wf").PendingActivities {
		if p.WaitsForLimit == "limit on type llm: rate 2/s used up" {
			held++
		}
	}
	if held != 3 {
		t.Fatalf("%d activities shown waiting for the rate, want 3", held)
	}
	h.advance(499 * time.Millisecond)
	select {
	case task := <-waiting:
		t.Fatalf("dispatched %+v before a token was due", task)
	default:
	}
	h.advance(time.Millisecond)
	if task := <-waiting; task == nil {
		t.Fatal("no task once a token was due")
	}
	waiting = h.waitingPoll("w")
	h.advance(500 * time.Millisecond)
	if task := <-waiting; task == nil {
		t.Fatal("no task at the next token")
	}
}

// Clearing a limit lets the held-back attempts go; bad limits are refused.
func TestActivityLimitClearAndValidation(t *testing.T) {
	h := newHarness(t)
	h.setLimit(api.ActivityLimit{ActivityType: "llm", MaxInFlight: 1})
	h.startScheduling("wf", "llm", "", history.Read, 2)
	h.pollActivityAs("w")
	waiting := h.waitingPoll("w")
	resp, err := h.eng.SetActivityLimit(h.ctx(), &api.SetActivityLimitRequest{Limit: api.ActivityLimit{TaskQueue: "q", ActivityType: "llm"}, Clear: true})
	if err != nil || len(resp.Limits) != 0 {
		t.Fatalf("clear: %+v %v", resp, err)
	}
	if task := <-waiting; task == nil {
		t.Fatal("held-back attempt not dispatched after the limit was cleared")
	}
	for _, bad := range []api.ActivityLimit{
		{TaskQueue: "q", ActivityType: "llm"},
		{TaskQueue: "q", MaxInFlight: -1},
		{TaskQueue: "q", LimitKey: "a,b", MaxInFlight: 1},
		{TaskQueue: "q", LimitKey: "a*b", MaxInFlight: 1},
		{TaskQueue: "", MaxInFlight: 1},
	} {
		if _, err := h.eng.SetActivityLimit(h.ctx(), &api.SetActivityLimitRequest{Limit: bad}); !errors.Is(err, api.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", bad, err)
		}
	}
}
