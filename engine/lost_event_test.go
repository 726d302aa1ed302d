package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// lossyStore loses the last event of the first append it commits, as a
// damaged store might.
type lossyStore struct {
	history.Store
	lost bool
}

func (l *lossyStore) Commit(ctx context.Context, b *history.Batch) error {
	if !l.lost && len(b.Appends) > 0 && len(b.Appends[0].Events) > 1 {
		l.lost = true
		a := &b.Appends[0]
		a.Events = a.Events[:len(a.Events)-1]
	}
	return l.Store.Commit(ctx, b)
}

// TestLostLastEventIsNoticed: the store knows a history only by its
// events; the engine's run state, committed with them, says where it must
// end. A lost last event is reported, never handed to a worker as a
// shorter history nor silently written over.
func TestLostLastEventIsNoticed(t *testing.T) {
	dir := t.TempDir()
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := Open(Options{Store: &lossyStore{Store: st}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx := context.Background()
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	// WorkflowTaskCompleted and TimerStarted: the store keeps only the first.
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken,
		Commands: []api.Command{startTimer("t", time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "wf"}); !errors.Is(err, history.ErrCorrupt) {
		t.Fatalf("GetHistory of a history missing its last event: %v, want ErrCorrupt", err)
	}
	_, err = eng.SignalWorkflow(ctx, &api.SignalWorkflowRequest{WorkflowID: "wf", SignalName: "s"})
	if err == nil {
		t.Fatal("a signal appended after a lost event without complaint")
	}
}
