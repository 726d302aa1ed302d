package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// --- continue-as-new and run timeouts ---

func TestContinueAsNewLinksRuns(t *testing.T) {
	h := newHarness(t)
	first := h.start("wf", "W")
	task := h.pollWFT("q")
	h.complete(task, continueAsNewCmd(`"round-2"`))

	old := h.historyOf("wf", first)
	wantTypes(t, old, "WorkflowStarted WorkflowTaskCompleted WorkflowContinuedAsNew")
	can, _ := find[*history.WorkflowContinuedAsNew](t, old)
	if can.NewRunID == "" || can.NewRunID == first || can.WorkflowType != "W" || can.TaskQueue != "q" {
		t.Fatalf("continued as new %+v", can)
	}
	r := h.result("wf", first)
	if !r.Closed || r.Status != api.StatusContinuedAsNew || r.ContinuedAsNewRunID != can.NewRunID {
		t.Fatalf("old run result %+v", r)
	}

	next := h.pollWFT("q")
	if next.RunID != can.NewRunID {
		t.Fatalf("task for run %s, want %s", next.RunID, can.NewRunID)
	}
	ws, _ := find[*history.WorkflowStarted](t, next.Events)
	if ws.ContinuedFromRunID != first || ws.FirstRunID != first || string(ws.Input.Data) != `"round-2"` {
		t.Fatalf("new run started %+v", ws)
	}
	d := h.describe("wf")
	if d.Info.RunID != can.NewRunID || d.Info.Status != api.StatusRunning {
		t.Fatalf("current run %+v", d.Info)
	}
	od, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: "wf", RunID: first})
	if err != nil || od.Info.ContinuedAsNewRunID != can.NewRunID {
		t.Fatalf("old run describe %+v %v", od, err)
	}
	h.complete(next, completeWF(`"end"`))
	if r := h.result("wf", ""); r.RunID != can.NewRunID || r.Status != api.StatusCompleted {
		t.Fatalf("current result %+v", r)
	}
}

func TestExecutionTimeoutSpansContinueAsNew(t *testing.T) {
	h := newHarness(t)
	h.startWith(api.StartWorkflowRequest{WorkflowID: "wf", ExecutionTimeout: 2 * time.Minute, RunTimeout: 90 * time.Second})
	h.advance(time.Minute)
	h.complete(h.pollWFT("q"), continueAsNewCmd(`2`))
	second := h.pollWFT("q")
	h.complete(second, startTimer("t", time.Hour))
	// The second run's own run timeout (90 s) would be at 2m30s; the
	// execution timeout of the chain comes first, at 2m.
	h.advance(time.Minute - time.Millisecond)
	if r := h.result("wf", ""); r.Closed {
		t.Fatal("closed early")
	}
	h.advance(time.Millisecond)
	evs := h.history("wf")
	to, ev := find[*history.WorkflowTimedOut](t, evs)
	if to.Timeout != "execution" || !ev.Time.Equal(testStart.Add(2*time.Minute)) {
		t.Fatalf("timed out %+v at %v", to, ev.Time)
	}
	if r := h.result("wf", ""); r.Status != api.StatusTimedOut || r.RunID != second.RunID {
		t.Fatalf("result %+v", r)
	}
}

// --- describe, history, result, list, query ---

func TestDescribePendingWork(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	retry := &history.RetryPolicy{InitialInterval: 5 * time.Second, MaximumAttempts: 3}
	h.complete(h.pollWFT("q"),
		schedule("a1", "Fetch", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry}),
		schedule("a2", "Other", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, TaskQueue: "other"}),
		startTimer("t1", time.Hour),
		childCmd("kid", "K", history.ParentCloseAbandon))
	act := h.pollActivity("q")
	h.failActivity(act, history.Failure{Type: "Flaky", Message: "try again"})
	h.advance(5 * time.Second)
	act = h.pollActivity("q")

	d := h.describe("wf")
	if d.Info.Status != api.StatusRunning || d.Info.WorkflowType != "W" || d.Info.TaskQueue != "q" || d.Info.HistoryLength != 6 {
		t.Fatalf("info %+v", d.Info)
	}
	if len(d.PendingActivities) != 2 {
		t.Fatalf("pending activities %+v", d.PendingActivities)
	}
	a := d.PendingActivities[0]
	if a.ActivityID != "a1" || a.State != api.ActivityStateStarted || a.Attempt != 2 || a.LeaseEpoch != act.LeaseEpoch ||
		!a.LeaseExpires.Equal(h.clk.Now().Add(time.Minute)) || a.LastFailure == nil || a.LastFailure.Type != "Flaky" {
		t.Fatalf("pending activity a1 %+v", a)
	}
	if b := d.PendingActivities[1]; b.ActivityID != "a2" || b.State != api.ActivityStateScheduled || b.Attempt != 1 {
		t.Fatalf("pending activity a2 %+v", b)
	}
	if len(d.PendingTimers) != 1 || d.PendingTimers[0].TimerID != "t1" || !d.PendingTimers[0].FireAt.Equal(testStart.Add(time.Hour)) {
		t.Fatalf("pending timers %+v", d.PendingTimers)
	}
	if len(d.PendingChildren) != 1 || d.PendingChildren[0].WorkflowID != "kid" || d.PendingChildren[0].WorkflowType != "K" {
		t.Fatalf("pending children %+v", d.PendingChildren)
	}
	if d.WorkflowTask != nil {
		t.Fatalf("workflow task %+v", d.WorkflowTask)
	}
	_, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: "none"})
	wantErr(t, err, api.ErrNotFound)
}

func TestGetHistoryLongPoll(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	ch := async(func() (*api.GetHistoryResponse, error) {
		return h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: "wf", FromEventID: 4, WaitNewEvents: true})
	})
	h.signal("wf", "s", `1`)
	resp := await(t, ch)
	if len(resp.Events) != 1 || resp.Events[0].ID != 4 || resp.Events[0].Type() != history.TypeSignalReceived || resp.NextEventID != 5 || resp.Closed {
		t.Fatalf("long poll %+v", resp)
	}
	// Paging: MaxEvents and FromEventID.
	page, err := h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: "wf", FromEventID: 2, MaxEvents: 2})
	if err != nil || len(page.Events) != 2 || page.Events[0].ID != 2 || page.Events[1].ID != 3 {
		t.Fatalf("page %+v %v", page, err)
	}
	// Without waiting, nothing new returns at once.
	none, err := h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: "wf", FromEventID: 5})
	if err != nil || len(none.Events) != 0 || none.NextEventID != 5 {
		t.Fatalf("empty read %+v %v", none, err)
	}
	// A long poll on a run that closes returns with Closed set.
	ch = async(func() (*api.GetHistoryResponse, error) {
		return h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: "wf", FromEventID: 5, WaitNewEvents: true})
	})
	h.terminate("wf")
	resp = await(t, ch)
	if len(resp.Events) != 1 || resp.Events[0].Type() != history.TypeWorkflowTerminated || !resp.Closed {
		t.Fatalf("long poll at close %+v", resp)
	}
}

// TestLongPollsEndWithTheCallersContext: a long poll (GetHistory with
// WaitNewEvents, WatchStream with Wait) whose caller's context has ended
// returns the context's error, not an empty answer: a loop polling on that
// context would otherwise spin (it did, in the agent kit's own tests). The
// poll's own timeout still answers "nothing new yet".
func TestLongPollsEndWithTheCallersContext(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	ctx, cancel := context.WithCancel(h.ctx())
	cancel()
	if resp, err := h.eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "wf", FromEventID: 4, WaitNewEvents: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("GetHistory on an ended context: %+v, %v", resp, err)
	}
	if resp, err := h.eng.WatchStream(ctx, &api.WatchStreamRequest{WorkflowID: "wf", Wait: true}); !errors.Is(err, context.Canceled) {
		t.Fatalf("WatchStream on an ended context: %+v, %v", resp, err)
	}
}

func TestGetResultLongPoll(t *testing.T) {
	h := newHarness(t)
	run := h.start("wf", "W")
	ch := async(func() (*api.GetResultResponse, error) {
		return h.eng.GetResult(h.ctx(), &api.GetResultRequest{WorkflowID: "wf", Wait: true})
	})
	task := h.pollWFT("q")
	h.complete(task, schedule("a", "A", history.Read, history.ActivityOptions{}))
	h.completeActivity(h.pollActivity("q"), `1`)
	h.complete(h.pollWFT("q"), completeWF(`"answer"`))
	r := await(t, ch)
	if !r.Closed || r.RunID != run || r.Status != api.StatusCompleted || string(r.Result.Data) != `"answer"` {
		t.Fatalf("result %+v", r)
	}
	// Without Wait an open run answers at once.
	h.start("open", "W")
	r, err := h.eng.GetResult(h.ctx(), &api.GetResultRequest{WorkflowID: "open"})
	if err != nil || r.Closed || r.Status != api.StatusRunning {
		t.Fatalf("open result %+v %v", r, err)
	}
	// A failed run reports its failure.
	h.start("bad", "W")
	for task = h.pollWFT("q"); task.WorkflowID != "bad"; task = h.pollWFT("q") {
	}
	h.complete(task, failWF("Boom", "it broke"))
	if r := h.result("bad", ""); r.Status != api.StatusFailed || r.Failure == nil || r.Failure.Type != "Boom" {
		t.Fatalf("failed result %+v", r)
	}
}

func TestListWorkflows(t *testing.T) {
	h := newHarness(t)
	// Five runs, one second apart, of two types; two complete.
	for i, typ := range []string{"A", "B", "A", "B", "A"} {
		h.start(string(rune('1'+i)), typ)
		h.advance(time.Second)
	}
	for range 5 {
		task := h.pollWFT("q")
		if task.WorkflowID == "2" || task.WorkflowID == "3" {
			h.complete(task, completeWF(`1`))
		} else {
			h.complete(task, startTimer("t", time.Hour))
		}
	}
	list := func(req api.ListWorkflowsRequest) ([]string, []byte) {
		t.Helper()
		resp, err := h.eng.ListWorkflows(h.ctx(), &req)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, w := range resp.Workflows {
			ids = append(ids, w.WorkflowID)
		}
		return ids, resp.NextPageToken
	}
	if ids, tok := list(api.ListWorkflowsRequest{}); strings.Join(ids, ",") != "5,4,3,2,1" || tok != nil {
		t.Fatalf("all: %v %x", ids, tok)
	}
	if ids, _ := list(api.ListWorkflowsRequest{Status: api.StatusRunning}); strings.Join(ids, ",") != "5,4,1" {
		t.Fatalf("running: %v", ids)
	}
	if ids, _ := list(api.ListWorkflowsRequest{Status: api.StatusCompleted}); strings.Join(ids, ",") != "3,2" {
		t.Fatalf("completed: %v", ids)
	}
	if ids, _ := list(api.ListWorkflowsRequest{WorkflowType: "A"}); strings.Join(ids, ",") != "5,3,1" {
		t.Fatalf("type A: %v", ids)
	}
	if ids, _ := list(api.ListWorkflowsRequest{WorkflowType: "B", Status: api.StatusRunning}); strings.Join(ids, ",") != "4" {
		t.Fatalf("type B running: %v", ids)
	}
	if ids, _ := list(api.ListWorkflowsRequest{StartedAfter: testStart.Add(time.Second), StartedBefore: testStart.Add(4 * time.Second)}); strings.Join(ids, ",") != "4,3" {
		t.Fatalf("time window: %v", ids)
	}
	// Pagination.
	var all []string
	var tok []byte
	pages := 0
	for {
		ids, next := list(api.ListWorkflowsRequest{PageSize: 2, NextPageToken: tok})
		pages++
		all = append(all, ids...)
		if next == nil {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		tok = next
	}
	if strings.Join(all, ",") != "5,4,3,2,1" || pages != 3 {
		t.Fatalf("paged: %v in %d pages", all, pages)
	}
	// Filtered pages skip what does not match.
	all, tok = nil, nil
	for {
		ids, next := list(api.ListWorkflowsRequest{PageSize: 1, WorkflowType: "A", NextPageToken: tok})
		all = append(all, ids...)
		if next == nil {
			break
		}
		tok = next
	}
	if strings.Join(all, ",") != "5,3,1" {
		t.Fatalf("paged type A: %v", all)
	}
	resp, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{WorkflowType: "B"})
	if err != nil || len(resp.Workflows) != 2 || resp.Workflows[0].Status != api.StatusRunning || resp.Workflows[1].Status != api.StatusCompleted ||
		!resp.Workflows[0].StartTime.Equal(testStart.Add(3*time.Second)) {
		t.Fatalf("infos %+v %v", resp, err)
	}
}

func TestQueryWorkflow(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), startTimer("t", time.Hour))
	before := h.history("wf")

	ch := async(func() (*api.QueryWorkflowResponse, error) {
		return h.eng.QueryWorkflow(h.ctx(), &api.QueryWorkflowRequest{WorkflowID: "wf", QueryType: "status", Args: jsonPayload(`"x"`)})
	})
	task := h.pollWFT("q")
	if task.Query == nil || task.Query.QueryType != "status" || string(task.Query.Args.Data) != `"x"` || task.WorkflowID != "wf" {
		t.Fatalf("query task %+v", task)
	}
	if task.FirstEventID != 1 || len(task.Events) != len(before) {
		t.Fatalf("query task events %d from %d", len(task.Events), task.FirstEventID)
	}
	// A query task is not a workflow task.
	wantErr(t, h.completeErr(task), api.ErrInvalidArgument)
	if _, err := h.eng.RespondQueryTask(h.ctx(), &api.RespondQueryTaskRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"fine"`)}); err != nil {
		t.Fatal(err)
	}
	resp := await(t, ch)
	if string(resp.Result.Data) != `"fine"` {
		t.Fatalf("answer %q", resp.Result.Data)
	}
	after := h.history("wf")
	if len(after) != len(before) {
		t.Fatalf("the query wrote %d events", len(after)-len(before))
	}
	if d := h.describe("wf"); d.WorkflowTask != nil {
		t.Fatalf("the query left a workflow task: %+v", d.WorkflowTask)
	}

	// A failing handler.
	errCh := make(chan error, 1)
	go func() {
		_, err := h.eng.QueryWorkflow(h.ctx(), &api.QueryWorkflowRequest{WorkflowID: "wf", QueryType: "missing"})
		errCh <- err
	}()
	task = h.pollWFT("q")
	if _, err := h.eng.RespondQueryTask(h.ctx(), &api.RespondQueryTaskRequest{TaskToken: task.TaskToken,
		Failure: &history.Failure{Type: "UnknownQuery", Message: "no handler"}}); err != nil {
		t.Fatal(err)
	}
	wantErr(t, <-errCh, api.ErrQueryFailed)
	_, err := h.eng.RespondQueryTask(h.ctx(), &api.RespondQueryTaskRequest{TaskToken: task.TaskToken})
	wantErr(t, err, api.ErrNotFound)
}

// --- limits ---

// --- bad input ---

func TestBadInput(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	task := h.pollWFT("q")
	for _, tok := range [][]byte{nil, []byte("garbage"), {0xc1}} {
		_, err := h.eng.CompleteWorkflowTask(h.ctx(), &api.CompleteWorkflowTaskRequest{TaskToken: tok})
		wantErr(t, err, api.ErrInvalidArgument)
		_, err = h.eng.FailWorkflowTask(h.ctx(), &api.FailWorkflowTaskRequest{TaskToken: tok})
		wantErr(t, err, api.ErrInvalidArgument)
		_, err = h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: tok})
		wantErr(t, err, api.ErrInvalidArgument)
		_, err = h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: tok})
		wantErr(t, err, api.ErrInvalidArgument)
		_, err = h.eng.RecordActivityHeartbeat(h.ctx(), &api.HeartbeatRequest{TaskToken: tok})
		wantErr(t, err, api.ErrInvalidArgument)
	}
	// Malformed commands: see TestBadCommandsFailTheTask.
	h.complete(task, completeWF(`1`))

	_, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: "", WorkflowType: "W", TaskQueue: "q"})
	wantErr(t, err, api.ErrInvalidArgument)
	_, err = h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: "x", WorkflowType: "W", TaskQueue: "q", RunTimeout: -1})
	wantErr(t, err, api.ErrInvalidArgument)
	_, err = h.eng.PollActivityTask(h.ctx(), &api.PollActivityTaskRequest{})
	wantErr(t, err, api.ErrInvalidArgument)
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// TestRecentClosedRunsStayExact: results of closed runs are answered from
// memory (Engine.recent); a later run of the same id, or a reopened
// engine, must still get exact answers for each run.
func TestRecentClosedRunsStayExact(t *testing.T) {
	h := newHarness(t)
	result := func(runID string) *api.GetResultResponse {
		t.Helper()
		r, err := h.eng.GetResult(h.ctx(), &api.GetResultRequest{WorkflowID: "wf", RunID: runID})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := h.start("wf", "W")
	h.complete(h.pollWFT("q"), completeWF(`1`))
	if r := result(""); r.RunID != first || !r.Closed || string(r.Result.Data) != `1` {
		t.Fatalf("first run: %+v", r)
	}
	second, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q", ReusePolicy: api.AllowDuplicate})
	if err != nil {
		t.Fatal(err)
	}
	if r := result(""); r.RunID != second.RunID || r.Closed {
		t.Fatalf("current run after a second start: %+v, want the open run %s", r, second.RunID)
	}
	if r := result(first); r.RunID != first || string(r.Result.Data) != `1` {
		t.Fatalf("first run by id: %+v", r)
	}
	h.complete(h.pollWFT("q"), completeWF(`2`))
	for _, tc := range []struct{ run, want string }{{"", `2`}, {second.RunID, `2`}, {first, `1`}} {
		if r := result(tc.run); !r.Closed || string(r.Result.Data) != tc.want {
			t.Fatalf("run %q: %+v, want result %s", tc.run, r, tc.want)
		}
	}
	h.reopen()
	if r := result(""); r.RunID != second.RunID || string(r.Result.Data) != `2` {
		t.Fatalf("after reopen: %+v", r)
	}
}
