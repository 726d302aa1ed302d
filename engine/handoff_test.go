package engine

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// gatedStore holds the first Commit after holdNext until release says
// how it ends (nil: it commits; an error: it fails with it).
type gatedStore struct {
	history.Store
	hold    atomic.Bool
	held    chan struct{} // one value per held commit
	release chan error
}

// holdNext makes the next commit wait; <-g.held then says it is waiting.
func (g *gatedStore) holdNext() { g.hold.Store(true) }

func (g *gatedStore) Commit(ctx context.Context, b *history.Batch) error {
	if g.hold.CompareAndSwap(true, false) {
		g.held <- struct{}{}
		if err := <-g.release; err != nil {
			return err
		}
	}
	return g.Store.Commit(ctx, b)
}

// openGated opens an engine over a gatedStore.
func openGated(t *testing.T) (*Engine, *gatedStore) {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedStore{Store: st, held: make(chan struct{}, 1), release: make(chan error)}
	eng, err := Open(Options{Store: g})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	// Runs first: a test that failed while a commit was held lets it go.
	t.Cleanup(func() {
		select {
		case g.release <- errors.New("test over"):
		default:
		}
	})
	return eng, g
}

// waitPoller starts a workflow-task poll on queue and returns once it is
// waiting.
func waitPoller(t *testing.T, eng *Engine, queue string) <-chan *api.PollWorkflowTaskResponse {
	t.Helper()
	got := make(chan *api.PollWorkflowTaskResponse, 1)
	go func() {
		resp, err := eng.PollWorkflowTask(context.Background(), &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: "w"})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	for eng.wftQ.Waiting(queue) == 0 {
		runtime.Gosched()
	}
	return got
}

// startHeld starts workflow "wf" with a poller waiting on its queue and
// its commit held; it returns what the start will answer and what the
// poller got meanwhile.
func startHeld(t *testing.T, eng *Engine, g *gatedStore) (<-chan error, *api.PollWorkflowTaskResponse) {
	t.Helper()
	polled := waitPoller(t, eng, "q")
	g.holdNext()
	started := make(chan error, 1)
	go func() {
		_, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"})
		started <- err
	}()
	<-g.held // the start's commit is held
	return started, awaitPoll(t, polled)
}

// awaitPoll returns the poll's answer, failing after a generous deadline
// (without the hand-off the poll would wait for the held commit forever).
func awaitPoll(t *testing.T, polled <-chan *api.PollWorkflowTaskResponse) *api.PollWorkflowTaskResponse {
	t.Helper()
	select {
	case resp := <-polled:
		return resp
	case <-time.After(30 * time.Second):
		t.Fatal("the waiting poller got no task while the commit that scheduled it was held")
		return nil
	}
}

// TestWorkflowTaskHandedOffBeforeDurable: a poller waiting for a run's
// workflow task receives it while the transaction that scheduled it is
// still being committed; the caller of that transaction is answered only
// once it is durable, and the task's completion then goes through.
func TestWorkflowTaskHandedOffBeforeDurable(t *testing.T) {
	eng, g := openGated(t)
	started, resp := startHeld(t, eng, g)
	if resp.Task == nil || resp.Task.WorkflowID != "wf" || resp.Task.NextEventID != 2 {
		t.Fatalf("poll during the held commit: %+v, want the run's first task", resp.Task)
	}
	select {
	case err := <-started:
		t.Fatalf("StartWorkflow answered (%v) before its commit was durable", err)
	default:
	}
	g.release <- nil
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if _, err := eng.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: resp.Task.TaskToken,
		Commands: []api.Command{completeWF(`1`)}}); err != nil {
		t.Fatalf("completing the handed-off task: %v", err)
	}
	r, err := eng.GetResult(context.Background(), &api.GetResultRequest{WorkflowID: "wf"})
	if err != nil || !r.Closed || string(r.Result.Data) != `1` {
		t.Fatalf("result: %+v %v", r, err)
	}
	if s := eng.Stats(); s.WorkflowTasksHandedOff != 1 {
		t.Fatalf("handed off %d tasks, want 1", s.WorkflowTasksHandedOff)
	}
}

// TestHandedOffTaskStaleWhenCommitFails: if the transaction fails after
// its task was handed off, the run never existed and the task's completion
// is refused.
func TestHandedOffTaskStaleWhenCommitFails(t *testing.T) {
	eng, g := openGated(t)
	started, resp := startHeld(t, eng, g)
	if resp.Task == nil {
		t.Fatal("no task handed off")
	}
	disk := errors.New("disk on fire")
	g.release <- disk
	if err := <-started; err == nil {
		t.Fatal("StartWorkflow succeeded although its commit failed")
	}
	_, err := eng.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: resp.Task.TaskToken,
		Commands: []api.Command{completeWF(`1`)}})
	if !errors.Is(err, api.ErrStaleTask) && !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("completing a task of a transaction that failed: %v, want stale or not found", err)
	}
	if _, err := eng.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "wf"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("describe after the failed start: %v, want ErrNotFound", err)
	}
}

// waitActivityPoller starts an activity poll on queue and returns once it
// is waiting.
func waitActivityPoller(t *testing.T, eng *Engine, queue string) <-chan *api.PollActivityTaskResponse {
	t.Helper()
	got := make(chan *api.PollActivityTaskResponse, 1)
	go func() {
		resp, err := eng.PollActivityTask(context.Background(), &api.PollActivityTaskRequest{TaskQueue: queue, Identity: "act-worker"})
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	for eng.actQ.Waiting(queue) == 0 {
		runtime.Gosched()
	}
	return got
}

// scheduleHeld starts "wf", then completes its first task with cmd while
// an activity poller waits and the completion's commit is held. It returns
// what the completion will answer.
func scheduleHeld(t *testing.T, eng *Engine, g *gatedStore, cmd api.Command) (<-chan error, <-chan *api.PollActivityTaskResponse, []byte) {
	t.Helper()
	if _, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(context.Background(), &api.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	polled := waitActivityPoller(t, eng, "q")
	g.holdNext()
	completed := make(chan error, 1)
	go func() {
		_, err := eng.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken,
			Commands: []api.Command{cmd}})
		completed <- err
	}()
	<-g.held // the completion's commit is held
	return completed, polled, wft.Task.TaskToken
}

// TestReadActivityHandedOffBeforeDurable: a Read activity reaches a waiting
// poller while the commit that schedules it is held, with the poller's
// identity on its attempt; the activity's completion then goes through.
func TestReadActivityHandedOffBeforeDurable(t *testing.T) {
	eng, g := openGated(t)
	completed, polled, _ := scheduleHeld(t, eng, g, schedule("a", "Search", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	var resp *api.PollActivityTaskResponse
	select {
	case resp = <-polled:
	case <-time.After(30 * time.Second):
		t.Fatal("the Read activity was not handed over while its schedule was being committed")
	}
	if resp.Task == nil || resp.Task.ActivityType != "Search" || string(resp.Task.Input.Data) != `{"invoice":"INV-9"}` {
		t.Fatalf("handed-off task: %+v", resp.Task)
	}
	select {
	case err := <-completed:
		t.Fatalf("CompleteWorkflowTask answered (%v) before its commit was durable", err)
	default:
	}
	g.release <- nil
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	d, err := eng.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "wf"})
	if err != nil || len(d.PendingActivities) != 1 || d.PendingActivities[0].State != api.ActivityStateStarted ||
		d.PendingActivities[0].LeaseEpoch != resp.Task.LeaseEpoch {
		t.Fatalf("describe after the hand-off: %+v %v", d, err)
	}
	if _, err := eng.CompleteActivity(context.Background(), &api.CompleteActivityRequest{TaskToken: resp.Task.TaskToken,
		Result: jsonPayload(`"found"`)}); err != nil {
		t.Fatalf("completing the handed-off activity: %v", err)
	}
	if s := eng.Stats(); s.ActivityTasksHandedOff != 1 {
		t.Fatalf("%d activity tasks handed off, want 1", s.ActivityTasksHandedOff)
	}
}

// TestSideEffectActivityWaitsForDurability: a SideEffect activity is never
// handed over before its schedule and intent are durable.
func TestSideEffectActivityWaitsForDurability(t *testing.T) {
	eng, g := openGated(t)
	completed, polled, _ := scheduleHeld(t, eng, g, schedule("pay", "SendPayment", history.SideEffect,
		history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	select {
	case resp := <-polled:
		t.Fatalf("a SideEffect activity reached a worker before its schedule was durable: %+v", resp.Task)
	default:
	}
	g.release <- nil
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	resp := <-polled
	if resp.Task == nil || resp.Task.Effect != history.SideEffect || resp.Task.IdempotencyKey == "" {
		t.Fatalf("task after the commit: %+v", resp.Task)
	}
	if s := eng.Stats(); s.ActivityTasksHandedOff != 0 {
		t.Fatalf("%d activity tasks handed off, want 0", s.ActivityTasksHandedOff)
	}
}

// TestLostHandOffCannotReportForAnotherActivity: a Read attempt handed
// over by a transaction that then failed names an event id the run later
// gives to another activity (here a SideEffect). Its report is refused and
// nothing is recorded against the other activity.
func TestLostHandOffCannotReportForAnotherActivity(t *testing.T) {
	eng, g := openGated(t)
	completed, polled, wftToken := scheduleHeld(t, eng, g, schedule("a", "Search", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute}))
	read := (<-polled).Task
	if read == nil {
		t.Fatal("the Read activity was not handed over")
	}
	g.release <- errors.New("disk on fire")
	if err := <-completed; err == nil {
		t.Fatal("the completion succeeded although its commit failed")
	}
	// The commit's outcome was unknown: the run was read back from the
	// store, and its workflow task goes out again (the old token is
	// stale). This time it completes, and the event id the lost schedule
	// had goes to a payment.
	_, err := eng.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: wftToken})
	if !errors.Is(err, api.ErrStaleTask) {
		t.Fatalf("the task of the failed commit: %v, want ErrStaleTask", err)
	}
	again, err := eng.PollWorkflowTask(context.Background(), &api.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil || again.Task == nil {
		t.Fatalf("poll: %+v %v", again, err)
	}
	if _, err := eng.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: again.Task.TaskToken,
		Commands: []api.Command{schedule("pay", "SendPayment", history.SideEffect, history.ActivityOptions{StartToCloseTimeout: time.Minute})}}); err != nil {
		t.Fatal(err)
	}
	h, err := eng.GetHistory(context.Background(), &api.GetHistoryRequest{WorkflowID: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := h.Events[len(h.Events)-1].Attrs.(*history.ActivityScheduled); !ok || h.Events[len(h.Events)-1].ID != read.ScheduledEventID ||
		s.ActivityType != "SendPayment" {
		t.Fatalf("the payment is not scheduled at event %d:\n%s", read.ScheduledEventID, types(h.Events))
	}
	_, err = eng.CompleteActivity(context.Background(), &api.CompleteActivityRequest{TaskToken: read.TaskToken, Result: jsonPayload(`"found"`)})
	if !errors.Is(err, api.ErrStaleAttempt) {
		t.Fatalf("report of the lost Read attempt: %v, want ErrStaleAttempt", err)
	}
	after, err := eng.GetHistory(context.Background(), &api.GetHistoryRequest{WorkflowID: "wf"})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Events) != len(h.Events) {
		t.Fatalf("the stale report wrote events:\n%s", types(after.Events))
	}
}

// TestHandedOffTaskGivenBackIsDispatchedAfresh: a handed-off workflow task
// that its poller could not take (it left as the task arrived) goes back
// through the run: the next poller gets a fresh dispatch, not the task as
// it was built.
func TestHandedOffTaskGivenBackIsDispatchedAfresh(t *testing.T) {
	eng, _ := openGated(t)
	got := make(chan wftItem, 1)
	go func() {
		item, _ := eng.wftQ.Poll(context.Background(), "q") // a poller that will not take it
		got <- item
	}()
	for eng.wftQ.Waiting("q") == 0 {
		runtime.Gosched()
	}
	if _, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	item := <-got
	if item.task == nil {
		t.Fatal("the first task was not handed off")
	}
	eng.wftQ.GiveBack("q", item)
	resp, err := eng.PollWorkflowTask(context.Background(), &api.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil || resp.Task == nil {
		t.Fatalf("poll after the give-back: %+v %v", resp, err)
	}
	if bytes.Equal(resp.Task.TaskToken, item.task.TaskToken) {
		t.Fatal("the task given back was handed out again as it was built")
	}
	if _, err := eng.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: resp.Task.TaskToken,
		Commands: []api.Command{completeWF(`1`)}}); err != nil {
		t.Fatalf("completing the fresh dispatch: %v", err)
	}
}

// TestChunkWritingTransactionHandsNothingOff: a transaction that writes
// payload chunks hands no task to a waiting poller before it is durable —
// neither the activity whose input is a new chunk nor the workflow task
// whose new events reference one — since the worker would ask for chunks
// not stored yet. After the commit the tasks are dispatched as usual, and
// their chunks are there.
func TestChunkWritingTransactionHandsNothingOff(t *testing.T) {
	eng, g := openGated(t)
	input := history.Payload{Encoding: "t", Ref: history.RootRef, Data: []byte("turn 1")} // a new chunk
	completed, polled, _ := scheduleHeld(t, eng, g, scheduleInput("1", input))
	if n, s := eng.actQ.Waiting("q"), eng.Stats(); n != 1 || s.ActivityTasksHandedOff != 0 {
		t.Fatalf("an activity whose input is a chunk being written was handed over before the commit (%d pollers left waiting, %d handed off)",
			n, s.ActivityTasksHandedOff)
	}
	g.release <- nil
	if err := <-completed; err != nil {
		t.Fatal(err)
	}
	var act *api.ActivityTask
	select {
	case resp := <-polled:
		act = resp.Task
	case <-time.After(30 * time.Second):
		t.Fatal("the activity was not dispatched after its commit")
	}
	if _, err := eng.GetChunks(context.Background(), &api.GetChunksRequest{Hashes: [][]byte{act.Input.Ref}}); err != nil {
		t.Fatalf("the dispatched activity's input chunk: %v", err)
	}

	// The activity answers with a chunk extending its input (a model call's
	// answer): the workflow task it makes ready waits for the commit too.
	wft := waitPoller(t, eng, "q")
	g.holdNext()
	answer := history.Payload{Encoding: "t", Ref: input.StoredRef(), Data: []byte("answer 1")}
	done := make(chan error, 1)
	go func() {
		_, err := eng.CompleteActivity(context.Background(), &api.CompleteActivityRequest{TaskToken: act.TaskToken, Result: answer})
		done <- err
	}()
	<-g.held
	if n := eng.wftQ.Waiting("q"); n != 1 {
		t.Fatal("a workflow task whose events reference a chunk being written was handed over before the commit")
	}
	g.release <- nil
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var task *api.WorkflowTask
	select {
	case resp := <-wft:
		task = resp.Task
	case <-time.After(30 * time.Second):
		t.Fatal("the workflow task was not dispatched after the commit")
	}
	var result history.Payload
	for _, ev := range task.Events {
		if c, ok := ev.Attrs.(*history.ActivityCompleted); ok {
			result = c.Result
		}
	}
	if !result.ByRef() {
		t.Fatalf("the task's ActivityCompleted result %+v is not a reference", result)
	}
	if _, err := eng.GetChunks(context.Background(), &api.GetChunksRequest{Hashes: [][]byte{result.Ref}}); err != nil {
		t.Fatalf("the answer's chunk: %v", err)
	}
}
