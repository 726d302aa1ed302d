// Package clienttest is the conformance suite of sdk/client: one set of
// tests that every way of reaching an engine (client.NewLocal over an
// embedded engine, client.Dial over HTTP) must pass identically — results,
// typed errors, long polls and all.
//
//	func TestLocal(t *testing.T) {
//		clienttest.Run(t, func(t *testing.T) clienttest.Env {
//			eng := openEngine(t) // a fresh engine, closed by t.Cleanup
//			return clienttest.Env{Client: client.NewLocal(eng, client.Options{})}
//		})
//	}
//
// The suite runs real worker.Workers over the Env's client (so, for the
// HTTP transport, workers long-poll the server like remote worker
// processes). It imports no engine and no store: it sees only the Client.
package clienttest

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

func (s *suite) pollActivity(queue string) *api.ActivityTask {
	s.t.Helper()
	for {
		resp, err := s.svc.PollActivityTask(s.ctx, &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "by-hand"})
		if err != nil {
			s.t.Fatal(err)
		}
		if resp.Task != nil {
			return resp.Task
		}
	}
}

// testTypedErrors checks that each typed error of the contract reaches the
// caller as the same sentinel, whatever the transport.
func testTypedErrors(t *testing.T, s *suite) {
	_, err := s.c.DescribeWorkflow(s.ctx, "missing", "")
	wantCode(t, "describe a missing workflow", err, api.ErrNotFound)
	err = s.c.GetWorkflow(s.ctx, "missing", "").Get(s.ctx, nil)
	wantCode(t, "Get a missing workflow", err, api.ErrNotFound)
	err = s.c.SignalWorkflow(s.ctx, "missing", "", "s", nil)
	wantCode(t, "signal a missing workflow", err, api.ErrNotFound)
	err = s.c.CancelWorkflow(s.ctx, "missing", "", "")
	wantCode(t, "cancel a missing workflow", err, api.ErrNotFound)
	_, err = s.c.GetHistory(s.ctx, "missing", "")
	wantCode(t, "history of a missing workflow", err, api.ErrNotFound)

	_, err = s.c.StartWorkflow(s.ctx, s.opts(""), "Idle", nil)
	wantCode(t, "start without an id", err, api.ErrInvalidArgument)
	_, err = s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "no-queue"}, "Idle", nil)
	wantCode(t, "start without a task queue", err, api.ErrInvalidArgument)
	_, err = s.c.StartWorkflow(s.ctx, s.opts(strings.Repeat("x", 4<<10)), "Idle", nil)
	wantCode(t, "start with an oversized id", err, api.ErrLimitExceeded)

	r := s.start(s.opts("errs"), "Idle", nil)
	_, err = s.c.StartWorkflow(s.ctx, s.opts("errs"), "Idle", nil)
	wantCode(t, "start an open workflow", err, api.ErrAlreadyStarted)
	err = s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "errs", Resolution: history.ResolvedHappened})
	wantCode(t, "resolve a run that is not paused", err, api.ErrNotPaused)
	_, err = s.c.DescribeWorkflow(s.ctx, "errs", "no-such-run")
	wantCode(t, "describe a missing run", err, api.ErrNotFound)

	if err := s.c.TerminateWorkflow(s.ctx, "errs", r.RunID(), "done"); err != nil {
		t.Fatal(err)
	}
	err = s.c.SignalWorkflow(s.ctx, "errs", r.RunID(), "s", nil)
	wantCode(t, "signal a closed run", err, api.ErrWorkflowClosed)
	err = s.c.TerminateWorkflow(s.ctx, "errs", "", "again")
	wantCode(t, "terminate a closed run", err, api.ErrWorkflowClosed)
	err = r.Get(s.ctx, nil)
	if !errors.Is(err, client.ErrTerminated) {
		t.Fatalf("Get of a terminated run: %v", err)
	}
}

// testTaskErrors drives the worker side of the contract by hand (no
// Worker) to reach the task errors: stale tasks and attempts, bad tokens.
func testTaskErrors(t *testing.T, s *suite) {
	const queue = "raw-tasks"
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "raw", TaskQueue: queue}, "Raw", nil); err != nil {
		t.Fatal(err)
	}
	wft := s.pollWFT(queue)
	if wft.WorkflowID != "raw" || wft.WorkflowType != "Raw" || wft.FirstEventID != 1 || len(wft.Events) == 0 ||
		wft.Events[0].Type() != history.TypeWorkflowStarted || len(wft.TaskToken) == 0 {
		t.Fatalf("workflow task: %+v", wft)
	}
	schedule := api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "1", ActivityType: "RawActivity", Options: api.ActivityOptions{StartToCloseTimeout: time.Minute}}}
	if _, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken,
		Commands: []api.Command{schedule}, Identity: "by-hand"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken})
	wantCode(t, "complete a workflow task twice", err, api.ErrStaleTask)
	_, err = s.svc.FailWorkflowTask(s.ctx, &api.FailWorkflowTaskRequest{TaskToken: wft.TaskToken, Cause: "panic"})
	wantCode(t, "fail a completed workflow task", err, api.ErrStaleTask)
	_, err = s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: []byte("not a token")})
	wantCode(t, "complete with a garbage token", err, api.ErrInvalidArgument)

	var at *api.ActivityTask
	for at == nil {
		resp, err := s.svc.PollActivityTask(s.ctx, &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "by-hand"})
		if err != nil {
			t.Fatal(err)
		}
		at = resp.Task
	}
	if at.ActivityType != "RawActivity" || at.ActivityID != "1" || at.Attempt != 1 || at.Deadline.IsZero() || at.WorkflowID != "raw" {
		t.Fatalf("activity task: %+v", at)
	}
	hb, err := s.svc.RecordActivityHeartbeat(s.ctx, &api.HeartbeatRequest{TaskToken: at.TaskToken})
	if err != nil || hb.CancelRequested || hb.Deadline.IsZero() {
		t.Fatalf("heartbeat: %+v, %v", hb, err)
	}
	if _, err := s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: at.TaskToken, Identity: "by-hand"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: at.TaskToken})
	wantCode(t, "complete an activity attempt twice", err, api.ErrStaleAttempt)
	_, err = s.svc.RecordActivityHeartbeat(s.ctx, &api.HeartbeatRequest{TaskToken: at.TaskToken})
	wantCode(t, "heartbeat a finished attempt", err, api.ErrStaleAttempt)
	_, err = s.svc.FailActivity(s.ctx, &api.FailActivityRequest{TaskToken: []byte{0xc1}})
	wantCode(t, "fail with a garbage token", err, api.ErrInvalidArgument)

	// Completing the run closes it; a later complete is stale.
	wft = s.pollWFT(queue)
	done := api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{}}
	if _, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken, Commands: []api.Command{done}}); err != nil {
		t.Fatal(err)
	}
	_, err = s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken, Commands: []api.Command{done}})
	wantCode(t, "complete a closed run's task", err, api.ErrStaleTask)
	if err := s.c.GetWorkflow(s.ctx, "raw", "").Get(s.ctx, nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.svc.PollWorkflowTask(s.ctx, &api.PollWorkflowTaskRequest{})
	wantCode(t, "poll without a task queue", err, api.ErrInvalidArgument)
}

func (s *suite) pollWFT(queue string) *api.WorkflowTask {
	s.t.Helper()
	for {
		resp, err := s.svc.PollWorkflowTask(s.ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "by-hand"})
		if err != nil {
			s.t.Fatal(err)
		}
		if resp.Task != nil {
			return resp.Task
		}
	}
}

// waitPollers waits until n workflow-task polls are parked on queue, when
// the Env can tell; it reports whether it could.
func (s *suite) waitPollers(queue string, n int) bool {
	if s.env.WaitingPollers == nil {
		return false
	}
	for s.env.WaitingPollers(queue) < n {
		if s.ctx.Err() != nil {
			s.t.Fatalf("no poll parked on %q", queue)
		}
		runtime.Gosched()
	}
	return true
}

func testLongPoll(t *testing.T, s *suite) {
	const queue = "long-poll"
	type result struct {
		task *api.WorkflowTask
		err  error
	}
	got := make(chan result, 1)
	poll := func() {
		resp, err := s.svc.PollWorkflowTask(s.ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "poller"})
		if err != nil {
			got <- result{nil, err}
			return
		}
		got <- result{resp.Task, nil}
	}
	go poll()
	if !s.waitPollers(queue, 1) {
		t.Log("the Env cannot tell when a poll is parked: checking only that the poll gets the task")
	}
	r := s.start(client.StartOptions{ID: "woken", TaskQueue: queue}, "Raw", nil)
	for {
		res := <-got
		if res.err != nil {
			t.Fatal(res.err)
		}
		if res.task != nil {
			if res.task.WorkflowID != "woken" || res.task.RunID != r.RunID() {
				t.Fatalf("poll returned task %+v", res.task)
			}
			return
		}
		go poll() // the server's poll limit ended the wait first
	}
}

func testLongPollCancel(t *testing.T, s *suite) {
	const queue = "long-poll-cancel"
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	type result struct {
		resp *api.PollWorkflowTaskResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := s.svc.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue})
		got <- result{resp, err}
	}()
	s.waitPollers(queue, 1)
	canceled := time.Now()
	cancel()
	// Promptly: far sooner than the server's poll limit (a minute by
	// default), generously for a loaded machine.
	const prompt = 10 * time.Second
	select {
	case res := <-got:
		if res.err != nil && !errors.Is(res.err, context.Canceled) {
			t.Fatalf("canceled poll: %v, want nil or context.Canceled", res.err)
		}
		if res.err == nil && res.resp.Task != nil {
			t.Fatalf("canceled poll returned a task: %+v", res.resp.Task)
		}
		if d := time.Since(canceled); d > prompt {
			t.Fatalf("canceled poll returned after %s", d)
		}
	case <-time.After(prompt):
		t.Fatalf("poll still running %s after its context was canceled", prompt)
	}
	if s.env.WaitingPollers != nil {
		// The canceled poll left the engine's queue.
		for s.env.WaitingPollers(queue) != 0 {
			if s.ctx.Err() != nil {
				t.Fatal("the canceled poll is still parked in the engine")
			}
			runtime.Gosched()
		}
	}
}

// testChunks: a result above the inline threshold is stored as a chunk;
// the client reads the run's result whole, and GetChunks returns the chunk
// the history references (ErrNotFound for one it does not hold).
func testChunks(t *testing.T, s *suite) {
	s.startWorker()
	const n = 200 << 10
	var got string
	if _, err := s.c.ExecuteWorkflow(s.ctx, s.opts("bulky"), Bulky, n, &got); err != nil || len(got) != n {
		t.Fatalf("result of %d bytes, %v", len(got), err)
	}
	evs, err := s.c.GetHistory(s.ctx, "bulky", "")
	if err != nil {
		t.Fatal(err)
	}
	var ref []byte
	for _, ev := range evs {
		if c, ok := ev.Attrs.(*history.WorkflowCompleted); ok {
			ref = c.Result.Ref
		}
	}
	if len(ref) != history.HashSize {
		t.Fatalf("the result was recorded inline, not by reference")
	}
	resp, err := s.svc.GetChunks(s.ctx, &api.GetChunksRequest{Hashes: [][]byte{ref}, Ancestors: true})
	if err != nil || len(resp.Chunks) != 1 || !bytes.Equal(resp.Chunks[0].Hash(), ref) {
		t.Fatalf("GetChunks: %v, %v", resp, err)
	}
	_, err = s.svc.GetChunks(s.ctx, &api.GetChunksRequest{Hashes: [][]byte{history.ChunkHash(nil, []byte("absent"))}})
	if !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("GetChunks of an absent chunk: %v, want ErrNotFound", err)
	}
}
