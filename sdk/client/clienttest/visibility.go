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
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

func testHistory(t *testing.T, s *suite) {
	s.startWorker()
	var out Receipt
	r, err := s.c.ExecuteWorkflow(s.ctx, s.opts("hist"), Checkout, Order{ID: "h-1", Amount: 5}, &out)
	if err != nil {
		t.Fatal(err)
	}
	events, err := s.c.GetHistory(s.ctx, "hist", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(events) < 7 {
		t.Fatalf("history has %d events: %v", len(events), events)
	}
	var types []string
	for i, ev := range events {
		if ev.ID != int64(i+1) || ev.Time.IsZero() || ev.Attrs == nil {
			t.Fatalf("event %d: %+v", i, ev)
		}
		types = append(types, ev.Type().String())
	}
	ws, ok := events[0].Attrs.(*history.WorkflowStarted)
	if !ok || ws.WorkflowType != "Checkout" || ws.TaskQueue != TaskQueue {
		t.Fatalf("first event %v %+v", events[0], events[0].Attrs)
	}
	var in Order
	if err := s.c.Converter().FromPayload(ws.Input, &in); err != nil || in != (Order{ID: "h-1", Amount: 5}) {
		t.Fatalf("started input %+v, %v", in, err)
	}
	var sched *history.ActivityScheduled
	var done *history.ActivityCompleted
	for _, ev := range events {
		switch a := ev.Attrs.(type) {
		case *history.ActivityScheduled:
			sched = a
		case *history.ActivityCompleted:
			done = a
		}
	}
	if sched == nil || sched.ActivityType != "Stamp" || done == nil || done.ScheduledEventID <= 0 {
		t.Fatalf("activity events: %v", types)
	}
	var note string
	if err := s.c.Converter().FromPayload(done.Result, &note); err != nil || note != "stamped h-1" {
		t.Fatalf("activity result %q, %v", note, err)
	}
	wc, ok := events[len(events)-1].Attrs.(*history.WorkflowCompleted)
	if !ok {
		t.Fatalf("last event %v, want WorkflowCompleted (history %v)", events[len(events)-1], types)
	}
	var res Receipt
	if err := s.c.Converter().FromPayload(wc.Result, &res); err != nil || res != out {
		t.Fatalf("completed result %+v, %v", res, err)
	}

	// GetHistory pages: MaxEvents at a time, resuming at FromEventID.
	var paged []history.Event
	from := int64(1)
	for pages := 0; ; pages++ {
		if pages > len(events) {
			t.Fatal("paging does not end")
		}
		resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hist", FromEventID: from, MaxEvents: 2})
		if err != nil {
			t.Fatal(err)
		}
		if resp.RunID != r.RunID() || !resp.Closed || resp.NextEventID != int64(len(events))+1 || len(resp.Events) > 2 {
			t.Fatalf("page from %d: run %q closed %v next %d, %d events", from, resp.RunID, resp.Closed, resp.NextEventID, len(resp.Events))
		}
		if len(resp.Events) == 0 {
			break
		}
		paged = append(paged, resp.Events...)
		from += int64(len(resp.Events))
	}
	if len(paged) != len(events) {
		t.Fatalf("paged %d events, want %d", len(paged), len(events))
	}
	for i := range events {
		a, err1 := history.EncodeEvent(events[i])
		b, err2 := history.EncodeEvent(paged[i])
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Fatalf("event %d differs between GetHistory and paging: %v / %v (%v %v)", i+1, events[i], paged[i], err1, err2)
		}
	}
	_, err = s.c.GetHistory(s.ctx, "hist", "no-such-run")
	wantCode(t, "history of a missing run", err, api.ErrNotFound)
}

func testHistoryLongPoll(t *testing.T, s *suite) {
	// No worker: the run's history only grows when the test signals it.
	r := s.start(s.opts("hpoll"), "Idle", nil)
	resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hpoll"})
	if err != nil {
		t.Fatal(err)
	}
	next := resp.NextEventID
	type result struct {
		resp *api.GetHistoryResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hpoll", RunID: r.RunID(), FromEventID: next, WaitNewEvents: true})
		got <- result{resp, err}
	}()
	if err := s.c.SignalWorkflow(s.ctx, "hpoll", "", "wake", "up"); err != nil {
		t.Fatal(err)
	}
	for {
		res := <-got
		if res.err != nil {
			t.Fatal(res.err)
		}
		if len(res.resp.Events) > 0 {
			if ev := res.resp.Events[0]; ev.ID != next || ev.Type() != history.TypeSignalReceived {
				t.Fatalf("long poll returned %v, want event %d SignalReceived", ev, next)
			}
			return
		}
		// The server's poll limit ended the wait: poll again.
		go func() {
			resp, err := s.svc.GetHistory(s.ctx, &api.GetHistoryRequest{WorkflowID: "hpoll", RunID: r.RunID(), FromEventID: next, WaitNewEvents: true})
			got <- result{resp, err}
		}()
	}
}

func testList(t *testing.T, s *suite) {
	// No worker: runs stay open unless terminated.
	for i := range 5 {
		s.start(s.opts(fmt.Sprintf("list-%d", i)), "Idle", nil)
	}
	s.start(s.opts("list-other"), "Other", nil)
	for _, id := range []string{"list-1", "list-3"} {
		if err := s.c.TerminateWorkflow(s.ctx, id, "", "list test"); err != nil {
			t.Fatal(err)
		}
	}
	list := func(req api.ListWorkflowsRequest) []string {
		t.Helper()
		var got []string
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("pagination does not end")
			}
			resp, err := s.c.ListWorkflows(s.ctx, &req)
			if err != nil {
				t.Fatal(err)
			}
			if req.PageSize > 0 && len(resp.Workflows) > req.PageSize {
				t.Fatalf("page of %d, page size %d", len(resp.Workflows), req.PageSize)
			}
			for _, w := range resp.Workflows {
				if req.Status != api.StatusUnspecified && w.Status != req.Status {
					t.Fatalf("listed %s with status %s, filter %s", w.WorkflowID, w.Status, req.Status)
				}
				if w.RunID == "" || w.StartTime.IsZero() || w.TaskQueue != TaskQueue {
					t.Fatalf("listed %+v", w)
				}
				got = append(got, w.WorkflowID)
			}
			if resp.NextPageToken == nil {
				return got
			}
			req.NextPageToken = resp.NextPageToken
		}
	}
	set := func(ids []string) string {
		m := map[string]int{}
		for _, id := range ids {
			m[id]++
		}
		var out []string
		for id, n := range m {
			out = append(out, fmt.Sprintf("%s×%d", id, n))
		}
		slices.Sort(out)
		return strings.Join(out, " ")
	}
	want := func(what string, got []string, ids ...string) {
		t.Helper()
		if set(got) != set(ids) || len(got) != len(ids) {
			t.Fatalf("%s: listed %v, want %v", what, got, ids)
		}
	}
	want("all", list(api.ListWorkflowsRequest{}), "list-0", "list-1", "list-2", "list-3", "list-4", "list-other")
	want("all, pages of 2", list(api.ListWorkflowsRequest{PageSize: 2}), "list-0", "list-1", "list-2", "list-3", "list-4", "list-other")
	want("running", list(api.ListWorkflowsRequest{Status: api.StatusRunning}), "list-0", "list-2", "list-4", "list-other")
	want("running, pages of 1", list(api.ListWorkflowsRequest{Status: api.StatusRunning, PageSize: 1}), "list-0", "list-2", "list-4", "list-other")
	want("terminated", list(api.ListWorkflowsRequest{Status: api.StatusTerminated}), "list-1", "list-3")
	want("completed", list(api.ListWorkflowsRequest{Status: api.StatusCompleted}))
	want("type Other", list(api.ListWorkflowsRequest{WorkflowType: "Other"}), "list-other")
	want("type Idle, running, pages of 2", list(api.ListWorkflowsRequest{WorkflowType: "Idle", Status: api.StatusRunning, PageSize: 2}),
		"list-0", "list-2", "list-4")
	want("id prefix list-o", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "list-o"}), "list-other")
	want("id prefix list-, terminated, pages of 1", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "list-", Status: api.StatusTerminated, PageSize: 1}),
		"list-1", "list-3")
	want("an id as its own prefix", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "list-4"}), "list-4")
	want("id prefix of nothing", list(api.ListWorkflowsRequest{WorkflowIDPrefix: "nothing-"}))

	// Newest first.
	resp, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(resp.Workflows); i++ {
		if resp.Workflows[i].StartTime.After(resp.Workflows[i-1].StartTime) {
			t.Fatalf("not newest first: %s (%s) after %s (%s)", resp.Workflows[i].WorkflowID, resp.Workflows[i].StartTime,
				resp.Workflows[i-1].WorkflowID, resp.Workflows[i-1].StartTime)
		}
	}

	// One workflow id's runs (WorkflowID: exact, newest first), here two.
	s.start(s.opts("list-1"), "Idle", nil)
	want("workflow id list-1", list(api.ListWorkflowsRequest{WorkflowID: "list-1"}), "list-1", "list-1")
	want("workflow id list-1, pages of 1", list(api.ListWorkflowsRequest{WorkflowID: "list-1", PageSize: 1}), "list-1", "list-1")
	want("workflow id list-1, running", list(api.ListWorkflowsRequest{WorkflowID: "list-1", Status: api.StatusRunning}), "list-1")
	want("workflow id list-1, type Other", list(api.ListWorkflowsRequest{WorkflowID: "list-1", WorkflowType: "Other"}))
	want("workflow id list- (exact, not a prefix)", list(api.ListWorkflowsRequest{WorkflowID: "list-"}))
	resp, err = s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{WorkflowID: "list-1"})
	if err != nil {
		t.Fatal(err)
	}
	if w := resp.Workflows; len(w) != 2 || w[0].Status != api.StatusRunning || w[1].Status != api.StatusTerminated || w[0].RunID == w[1].RunID {
		t.Fatalf("the runs of list-1, newest first: %+v", w)
	}
}

func testCount(t *testing.T, s *suite) {
	// No worker: runs stay open unless terminated.
	for i := range 4 {
		s.start(s.opts(fmt.Sprintf("count-%d", i)), "Idle", nil)
	}
	s.start(s.opts("other-1"), "Other", nil)
	for _, id := range []string{"count-1", "other-1"} {
		if err := s.c.TerminateWorkflow(s.ctx, id, "", "count test"); err != nil {
			t.Fatal(err)
		}
	}
	count := func(req api.CountWorkflowsRequest) string {
		t.Helper()
		resp, err := s.c.CountWorkflows(s.ctx, &req)
		if err != nil {
			t.Fatal(err)
		}
		out := fmt.Sprint(resp.Total)
		for _, c := range resp.ByStatus {
			out += fmt.Sprintf(" %s=%d", c.Status, c.Count)
		}
		return out
	}
	for _, tc := range []struct {
		what string
		req  api.CountWorkflowsRequest
		want string
	}{
		{"all", api.CountWorkflowsRequest{}, "5 running=3 terminated=2"},
		{"type Idle", api.CountWorkflowsRequest{WorkflowType: "Idle"}, "4 running=3 terminated=1"},
		{"prefix other-", api.CountWorkflowsRequest{WorkflowIDPrefix: "other-"}, "1 terminated=1"},
		{"started after now", api.CountWorkflowsRequest{StartedAfter: time.Now().Add(time.Hour)}, "0"},
	} {
		if got := count(tc.req); got != tc.want {
			t.Errorf("count %s: %s, want %s", tc.what, got, tc.want)
		}
	}
}

func testTaskQueues(t *testing.T, s *suite) {
	// A run on a queue nobody polls waits in its backlog.
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "stuck", TaskQueue: "clienttest-nobody"}, "Checkout", Order{ID: "A"}); err != nil {
		t.Fatal(err)
	}
	// A terminated run's task is no longer backlog, though its entry stays
	// queued until polled.
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "stuck-gone", TaskQueue: "clienttest-nobody"}, "Checkout", Order{ID: "B"}); err != nil {
		t.Fatal(err)
	}
	if err := s.c.TerminateWorkflow(s.ctx, "stuck-gone", "", "gone"); err != nil {
		t.Fatal(err)
	}
	q, err := s.c.DescribeTaskQueue(s.ctx, "clienttest-nobody")
	if err != nil {
		t.Fatal(err)
	}
	if q.Name != "clienttest-nobody" || q.WorkflowBacklog != 1 || q.ActivityBacklog != 0 || len(q.WorkflowPollers)+len(q.ActivityPollers) != 0 {
		t.Fatalf("queue nobody polls: %+v", q)
	}
	// Once the worker ran a workflow with an activity, it is a poller of
	// both kinds, seen lately.
	s.startWorker()
	var r Receipt
	if _, err := s.c.ExecuteWorkflow(s.ctx, s.opts("seen"), Checkout, Order{ID: "B", Amount: 1}, &r); err != nil {
		t.Fatal(err)
	}
	q, err = s.c.DescribeTaskQueue(s.ctx, TaskQueue)
	if err != nil {
		t.Fatal(err)
	}
	seen := func(ps []api.PollerInfo) bool {
		for _, p := range ps {
			if p.Identity == "clienttest-worker" && !p.LastSeen.IsZero() && time.Since(p.LastSeen) < api.PollerRetention {
				return true
			}
		}
		return false
	}
	if !seen(q.WorkflowPollers) || !seen(q.ActivityPollers) || q.WorkflowBacklog != 0 {
		t.Fatalf("polled queue: %+v", q)
	}
	qs, err := s.c.ListTaskQueues(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range qs {
		names = append(names, q.Name)
		if q.Name == "clienttest-nobody" && q.WorkflowBacklog != 1 {
			t.Fatalf("listed queue nobody polls: %+v", q)
		}
	}
	if strings.Join(names, " ") != TaskQueue+" clienttest-nobody" {
		t.Fatalf("listed queues %v, want %s and clienttest-nobody (no sticky queue)", names, TaskQueue)
	}
	only, err := s.svc.ListTaskQueues(s.ctx, &api.ListTaskQueuesRequest{NamePrefix: "clienttest-"})
	if err != nil || len(only.Queues) != 1 || only.Queues[0].Name != "clienttest-nobody" {
		t.Fatalf("ListTaskQueues with a prefix: %+v %v", only, err)
	}
	if _, err := s.c.DescribeTaskQueue(s.ctx, ""); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("DescribeTaskQueue of no name: %v, want ErrInvalidArgument", err)
	}
}

// testActivityLimits sets, shows and clears an activity limit; a bad one
// is refused with ErrInvalidArgument.
func testActivityLimits(t *testing.T, s *suite) {
	limit := api.ActivityLimit{TaskQueue: "clienttest-limits", ActivityType: "Charge", LimitKey: "tenant/*", MaxInFlight: 3,
		RatePerSecond: 1.5}
	ls, err := s.c.SetActivityLimit(s.ctx, limit)
	if err != nil || len(ls) != 1 || ls[0] != limit {
		t.Fatalf("SetActivityLimit: %+v %v", ls, err)
	}
	q, err := s.c.DescribeTaskQueue(s.ctx, "clienttest-limits")
	if err != nil || len(q.ActivityLimits) != 1 || q.ActivityLimits[0].Limit != limit || q.ActivityLimits[0].InFlight != 0 {
		t.Fatalf("described limits: %+v %v", q, err)
	}
	if ls, err = s.c.ClearActivityLimit(s.ctx, "clienttest-limits", "Charge", "tenant/*"); err != nil || len(ls) != 0 {
		t.Fatalf("ClearActivityLimit: %+v %v", ls, err)
	}
	if _, err := s.c.SetActivityLimit(s.ctx, api.ActivityLimit{TaskQueue: "clienttest-limits"}); !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("a limit of nothing: %v, want ErrInvalidArgument", err)
	}
}
