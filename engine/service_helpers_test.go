package engine

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Helpers for the service-level scenario tests (service_*_test.go,
// crash_test.go). They extend the harness in harness_test.go.

// startWith starts a run with the given request, filling the task queue
// ("q") and the workflow type when unset.
func (h *harness) startWith(req api.StartWorkflowRequest) *api.StartWorkflowResponse {
	h.t.Helper()
	if req.TaskQueue == "" {
		req.TaskQueue = "q"
	}
	if req.WorkflowType == "" {
		req.WorkflowType = "Flow"
	}
	resp, err := h.eng.StartWorkflow(h.ctx(), &req)
	if err != nil {
		h.t.Fatalf("start %s: %v", req.WorkflowID, err)
	}
	return resp
}

// settleAll waits for due timer work and for background work such as
// parent-close policies (which may cause more of each) to finish. Call it
// only when no other goroutine is calling the engine.
func (h *harness) settleAll() {
	for range 4 {
		h.settle()
		h.eng.bg.Wait() // background work such as parent-close policies
	}
}

// completeErr completes a workflow task and returns the error.
func (h *harness) completeErr(task *api.WorkflowTask, cmds ...api.Command) error {
	_, err := h.eng.CompleteWorkflowTask(h.ctx(), &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, Commands: cmds,
		Identity: "test-worker"})
	return err
}

// completeSticky completes a workflow task and asks for the next one on a
// sticky queue.
func (h *harness) completeSticky(task *api.WorkflowTask, sticky string, cmds ...api.Command) {
	h.t.Helper()
	if _, err := h.eng.CompleteWorkflowTask(h.ctx(), &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, Commands: cmds,
		StickyQueue: sticky, Identity: "test-worker"}); err != nil {
		h.t.Fatalf("complete workflow task: %v", err)
	}
}

func (h *harness) completeActivity(task *api.ActivityTask, result string) {
	h.t.Helper()
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(result)}); err != nil {
		h.t.Fatalf("complete activity: %v", err)
	}
}

func (h *harness) failActivity(task *api.ActivityTask, f history.Failure) {
	h.t.Helper()
	if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: task.TaskToken, Failure: f}); err != nil {
		h.t.Fatalf("fail activity: %v", err)
	}
}

func (h *harness) heartbeat(task *api.ActivityTask, details string) *api.HeartbeatResponse {
	h.t.Helper()
	resp, err := h.eng.RecordActivityHeartbeat(h.ctx(), &api.HeartbeatRequest{TaskToken: task.TaskToken, Details: jsonPayload(details)})
	if err != nil {
		h.t.Fatalf("heartbeat: %v", err)
	}
	return resp
}

func (h *harness) signal(id, name, input string) {
	h.t.Helper()
	if _, err := h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: id, SignalName: name, Input: jsonPayload(input)}); err != nil {
		h.t.Fatalf("signal %s: %v", id, err)
	}
}

func (h *harness) result(id, runID string) *api.GetResultResponse {
	h.t.Helper()
	resp, err := h.eng.GetResult(h.ctx(), &api.GetResultRequest{WorkflowID: id, RunID: runID})
	if err != nil {
		h.t.Fatalf("result of %s: %v", id, err)
	}
	return resp
}

func (h *harness) historyOf(id, runID string) []history.Event {
	h.t.Helper()
	resp, err := h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: id, RunID: runID})
	if err != nil {
		h.t.Fatalf("history of %s/%s: %v", id, runID, err)
	}
	return resp.Events
}

// historyLen is the number of events in the current run of id.
func (h *harness) historyLen(id string) int { return len(h.history(id)) }

// noActivity asserts that no activity task is ready on queue.
func (h *harness) noActivity(queue string) {
	h.t.Helper()
	if n := h.eng.actQ.Len(queue); n != 0 {
		h.t.Fatalf("%d activity tasks ready on %q, want none", n, queue)
	}
}

// wantTypes compares a history's event types with want, given as type
// names separated by spaces.
func wantTypes(t *testing.T, evs []history.Event, want string) {
	t.Helper()
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type().String())
	}
	if g := strings.Join(got, " "); g != strings.Join(strings.Fields(want), " ") {
		t.Fatalf("history:\n  got  %s\n  want %s", g, strings.Join(strings.Fields(want), " "))
	}
}

// find returns the first event of type T in evs (failing the test if none).
func find[T history.Attributes](t *testing.T, evs []history.Event) (T, history.Event) {
	t.Helper()
	for _, ev := range evs {
		if a, ok := ev.Attrs.(T); ok {
			return a, ev
		}
	}
	var zero T
	t.Fatalf("no %T in history:\n%s", zero, types(evs))
	return zero, history.Event{}
}

// count returns the number of events of type typ in evs.
func count(evs []history.Event, typ history.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
}

// cmd helpers.

func signalCmd(id, name string) api.Command {
	return api.Command{Type: api.CommandSignalExternalWorkflow, SignalExternalWorkflow: &api.SignalExternalWorkflowCommand{
		WorkflowID: id, SignalName: name}}
}

func cancelTimerCmd(id string) api.Command {
	return api.Command{Type: api.CommandCancelTimer, CancelTimer: &api.CancelTimerCommand{TimerID: id}}
}

func failWF(typ, msg string) api.Command {
	return api.Command{Type: api.CommandFailWorkflow, FailWorkflow: &api.FailWorkflowCommand{Failure: history.Failure{Type: typ, Message: msg}}}
}

func cancelWF() api.Command {
	return api.Command{Type: api.CommandCancelWorkflow, CancelWorkflow: &api.CancelWorkflowCommand{}}
}

func childCmd(id, typ string, policy history.ParentClosePolicy) api.Command {
	return api.Command{Type: api.CommandStartChildWorkflow, StartChildWorkflow: &api.StartChildWorkflowCommand{
		WorkflowID: id, WorkflowType: typ, Input: jsonPayload(`"child-in"`), ParentClosePolicy: policy}}
}

func continueAsNewCmd(input string) api.Command {
	return api.Command{Type: api.CommandContinueAsNew, ContinueAsNew: &api.ContinueAsNewCommand{Input: jsonPayload(input)}}
}

func markerCmd(name string, data []byte) api.Command {
	return api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: name, Data: history.Payload{Data: data}}}
}

// async runs f in a goroutine and returns a channel with its result.
func async[T any](f func() (T, error)) <-chan asyncRes[T] {
	ch := make(chan asyncRes[T], 1)
	go func() {
		v, err := f()
		ch <- asyncRes[T]{v, err}
	}()
	return ch
}

type asyncRes[T any] struct {
	v   T
	err error
}

// await waits for an async result with a generous real-time deadline (it
// guards against a hang; the result is expected at once).
func await[T any](t *testing.T, ch <-chan asyncRes[T]) T {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("async call: %v", r.err)
		}
		return r.v
	case <-time.After(30 * time.Second):
		t.Fatal("async call did not return")
	}
	panic("unreachable")
}
