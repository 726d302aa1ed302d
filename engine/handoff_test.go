package engine

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// gatedStore holds the next Commit until released, then commits it (or
// fails it with failWith).
type gatedStore struct {
	history.Store
	armed    chan struct{} // receives once per held commit
	release  chan error
	failWith error
}

func (g *gatedStore) Commit(ctx context.Context, b *history.Batch) error {
	select {
	case g.armed <- struct{}{}:
		if err := <-g.release; err != nil {
			return err
		}
	default:
	}
	return g.Store.Commit(ctx, b)
}

// openGated opens an engine over a gatedStore; hold makes the next commit
// wait for release.
func openGated(t *testing.T) (*Engine, *gatedStore) {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	g := &gatedStore{Store: st, release: make(chan error)}
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
	g.armed = make(chan struct{})
	started := make(chan error, 1)
	go func() {
		_, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"})
		started <- err
	}()
	<-g.armed // the start's commit is held
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
	g.armed = nil // commits go through from now on
	_, err := eng.CompleteWorkflowTask(context.Background(), &api.CompleteWorkflowTaskRequest{TaskToken: resp.Task.TaskToken,
		Commands: []api.Command{completeWF(`1`)}})
	if !errors.Is(err, api.ErrStaleTask) && !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("completing a task of a transaction that failed: %v, want stale or not found", err)
	}
	if _, err := eng.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "wf"}); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("describe after the failed start: %v, want ErrNotFound", err)
	}
}
