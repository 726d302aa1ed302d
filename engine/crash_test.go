package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Crash and recovery: the engine is closed (or its process killed) in the
// middle of runs and opened again over the same directory.

func TestReopenKeepsAcknowledgedTransitions(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.start("wf-out", "W")
	task := h.pollWFT("q")
	if task.WorkflowID != "wf" {
		t.Fatalf("task for %s", task.WorkflowID)
	}
	h.complete(task, schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}),
		startTimer("t", time.Hour))
	out := h.pollWFT("q") // wf-out's task is out at the crash
	if out.WorkflowID != "wf-out" {
		t.Fatalf("task for %s", out.WorkflowID)
	}
	before := types(h.history("wf"))

	h.reopen()
	if got := types(h.history("wf")); got != before {
		t.Fatalf("history after reopen:\n%s\nwant:\n%s", got, before)
	}
	d := h.describe("wf")
	if len(d.PendingActivities) != 1 || d.PendingActivities[0].State != api.ActivityStateScheduled || len(d.PendingTimers) != 1 {
		t.Fatalf("pending after reopen %+v", d)
	}
	// The workflow task that was out is handed out again, in full; the old
	// token is stale.
	again := h.pollWFT("q")
	if again.WorkflowID != "wf-out" || again.FirstEventID != 1 || again.Attempt != 1 {
		t.Fatalf("re-dispatched task %+v", again)
	}
	wantErr(t, h.completeErr(out, completeWF(`1`)), api.ErrStaleTask)
	h.complete(again, completeWF(`1`))
	// The scheduled activity is dispatched after the restart.
	act := h.pollActivity("q")
	if act.WorkflowID != "wf" || act.Attempt != 1 {
		t.Fatalf("activity %+v", act)
	}
	h.completeActivity(act, `1`)
	h.complete(h.pollWFT("q"), cancelTimerCmd("t"), completeWF(`"done"`))
	if r := h.result("wf", ""); r.Status != api.StatusCompleted {
		t.Fatalf("result %+v", r)
	}
	// Closed runs stay closed and listed after another restart.
	h.reopen()
	resp, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{Status: api.StatusCompleted})
	if err != nil || len(resp.Workflows) != 2 {
		t.Fatalf("list %+v %v", resp, err)
	}
	if s := h.eng.Stats(); s.OpenRuns != 0 {
		t.Fatalf("%d open runs after reopen", s.OpenRuns)
	}
}

func TestReopenRedispatchesLeasedReadActivity(t *testing.T) {
	h := newHarness(t)
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour})
	old := h.pollActivity("q")
	h.reopen()
	// A Read lease lives in memory: the attempt is dispatched again at once.
	act := h.pollActivity("q")
	if act.Attempt != 1 || act.LeaseEpoch == old.LeaseEpoch || string(act.Input.Data) != `{"invoice":"INV-9"}` {
		t.Fatalf("re-dispatch %+v (old epoch %d)", act, old.LeaseEpoch)
	}
	_, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: old.TaskToken})
	wantErr(t, err, api.ErrStaleAttempt)
	h.completeActivity(act, `"ok"`)
	task := h.pollWFT("q")
	wantTypes(t, task.Events, "WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityCompleted")
}

func TestReopenLeasedIdempotentActivityExpires(t *testing.T) {
	h := newHarness(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second}
	h.startWithActivity("wf", history.Idempotent, history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
	old := h.pollActivity("q")
	h.reopen()
	// Its intent was recorded: the lease runs out on its deadline, then
	// the retry uses the same idempotency key.
	h.noActivity("q")
	if a := h.describe("wf").PendingActivities[0]; a.State != api.ActivityStateStarted || a.LeaseEpoch != old.LeaseEpoch {
		t.Fatalf("after reopen %+v", a)
	}
	h.advance(time.Minute)
	h.advance(time.Second)
	act := h.pollActivity("q")
	if act.Attempt != 2 || act.IdempotencyKey != old.IdempotencyKey {
		t.Fatalf("retry %+v", act)
	}
	h.completeActivity(act, `1`)
}

func TestReopenFiresTimersThatCameDue(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Minute))
	h.startWith(api.StartWorkflowRequest{WorkflowID: "short", RunTimeout: 30 * time.Second})
	h.close()
	h.clk.Advance(2 * time.Minute) // the engine is down
	h.open()
	h.settleAll()
	fired, ev := find[*history.TimerFired](t, h.history("wf"))
	if fired.TimerID != "t" || !ev.Time.Equal(testStart.Add(2*time.Minute)) {
		t.Fatalf("fired %+v at %v", fired, ev.Time)
	}
	if r := h.result("short", ""); r.Status != api.StatusTimedOut {
		t.Fatalf("run timeout after reopen: %+v", r)
	}
	task := h.pollWFT("q")
	if task.WorkflowID != "wf" || task.Events[len(task.Events)-1].Type() != history.TypeTimerFired {
		t.Fatalf("task %+v", task)
	}
}

func TestReopenKeepsScheduleToStartTimeout(t *testing.T) {
	h := newHarness(t)
	h.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToStartTimeout: 10 * time.Second})
	h.advance(5 * time.Second)
	h.reopen()
	h.advance(5*time.Second - time.Millisecond)
	h.noWFT("q")
	h.advance(time.Millisecond)
	task := h.pollWFT("q")
	if to, _ := find[*history.ActivityTimedOut](t, task.Events); to.Timeout != "schedule_to_start" {
		t.Fatalf("timed out %+v", to)
	}
}

// TestConcurrentPollers runs M workflows (start → activity → complete)
// through N workflow-task pollers and N activity pollers at once and checks
// that every task is delivered exactly once.
func TestConcurrentPollers(t *testing.T) {
	const workflows, pollers = 60, 6
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu        sync.Mutex
		tokens    = map[string]bool{}
		wfTasks   = map[string]int{}
		actTasks  = map[string]int{}
		completed atomic.Int64
		done      = make(chan struct{})
		errs      = make(chan error, 2*pollers)
	)
	seen := func(tok []byte, byWF map[string]int, wf string) error {
		mu.Lock()
		defer mu.Unlock()
		if tokens[string(tok)] {
			return fmt.Errorf("task token delivered twice (workflow %s)", wf)
		}
		tokens[string(tok)] = true
		byWF[wf]++
		return nil
	}
	var wg sync.WaitGroup
	for i := range pollers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := h.eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: fmt.Sprint("w", i)})
				if err != nil || resp.Task == nil {
					if err != nil && ctx.Err() == nil {
						errs <- err
					}
					return
				}
				task := resp.Task
				if err := seen(task.TaskToken, wfTasks, task.WorkflowID); err != nil {
					errs <- err
					return
				}
				var cmd api.Command
				if count(task.Events, history.TypeActivityCompleted) == 0 {
					cmd = schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour})
				} else {
					cmd = completeWF(`"ok"`)
				}
				if _, err := h.eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken,
					Commands: []api.Command{cmd}}); err != nil {
					errs <- fmt.Errorf("complete %s: %w", task.WorkflowID, err)
					return
				}
				if cmd.Type == api.CommandCompleteWorkflow && completed.Add(1) == workflows {
					close(done)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				resp, err := h.eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q"})
				if err != nil || resp.Task == nil {
					if err != nil && ctx.Err() == nil {
						errs <- err
					}
					return
				}
				if err := seen(resp.Task.TaskToken, actTasks, resp.Task.WorkflowID); err != nil {
					errs <- err
					return
				}
				if _, err := h.eng.CompleteActivity(ctx, &api.CompleteActivityRequest{TaskToken: resp.Task.TaskToken}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var starters sync.WaitGroup
	for s := range 3 {
		starters.Add(1)
		go func() {
			defer starters.Done()
			for i := s; i < workflows; i += 3 {
				if _, err := h.eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: fmt.Sprint("wf-", i), WorkflowType: "W",
					TaskQueue: "q"}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	starters.Wait()
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(60 * time.Second):
		t.Fatalf("only %d of %d workflows completed", completed.Load(), workflows)
	}
	cancel()
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for i := range workflows {
		id := fmt.Sprint("wf-", i)
		if wfTasks[id] != 2 || actTasks[id] != 1 {
			t.Fatalf("%s: %d workflow tasks, %d activity tasks", id, wfTasks[id], actTasks[id])
		}
		if r := h.result(id, ""); r.Status != api.StatusCompleted {
			t.Fatalf("%s: %s", id, r.Status)
		}
	}
}

// TestCloseDuringCalls closes the engine while calls, long polls and timer
// work are in flight: waiting pollers return empty, later calls fail with
// api.ErrUnavailable, and nothing races.
func TestCloseDuringCalls(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Millisecond))
	var wg sync.WaitGroup
	polled := make(chan *api.PollWorkflowTaskResponse, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		resp, err := h.eng.PollWorkflowTask(context.Background(), &api.PollWorkflowTaskRequest{TaskQueue: "idle"})
		if err != nil {
			t.Errorf("poll: %v", err)
		}
		polled <- resp
	}()
	var signaled atomic.Int64
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				_, err := h.eng.SignalWorkflow(context.Background(), &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "s"})
				if errors.Is(err, api.ErrUnavailable) {
					return
				}
				if err == nil {
					signaled.Add(1)
				}
				if err != nil && !errors.Is(err, api.ErrLimitExceeded) {
					t.Errorf("signal %d/%d: %v", i, n, err)
					return
				}
			}
		}()
	}
	for h.eng.wftQ.Waiting("idle") == 0 || signaled.Load() < 4 {
		runtime.Gosched()
	}
	h.clk.Advance(time.Millisecond) // timer work in flight too
	eng := h.eng
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if resp := <-polled; resp == nil || resp.Task != nil {
		t.Fatalf("poll at close: %+v", resp)
	}
	_, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "x", WorkflowType: "W", TaskQueue: "q"})
	wantErr(t, err, api.ErrUnavailable)
	if err := eng.Close(); err != nil {
		t.Fatal(err)
	}
	// Everything acknowledged before the close is there after a reopen.
	h.eng = nil
	h.reopen()
	evs := h.history("wf")
	if evs[0].Type() != history.TypeWorkflowStarted || count(evs, history.TypeSignalReceived) == 0 {
		t.Fatalf("history after close and reopen:\n%s", types(evs))
	}
}
