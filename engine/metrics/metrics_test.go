package metrics_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/engine/metrics"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

type fakeSource struct {
	stats  engine.StatsSnapshot
	depths map[string][4]int
	paused int
}

// ListWorkflows lists f.paused paused runs, two per page.
func (f *fakeSource) ListWorkflows(_ context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	if req.Status != api.StatusPaused {
		return nil, api.Errorf(api.ErrInvalidArgument, "the collector lists only paused runs")
	}
	from := len(req.NextPageToken)
	resp := &api.ListWorkflowsResponse{}
	for i := from; i < f.paused && i < from+2; i++ {
		resp.Workflows = append(resp.Workflows, api.WorkflowInfo{Status: api.StatusPaused})
	}
	if from+2 < f.paused {
		resp.NextPageToken = make([]byte, from+2)
	}
	return resp, nil
}

func (f *fakeSource) Stats() engine.StatsSnapshot { return f.stats }

func (f *fakeSource) QueueDepths(q string) (int, int, int, int) {
	d := f.depths[q]
	return d[0], d[1], d[2], d[3]
}

func TestCollector(t *testing.T) {
	src := &fakeSource{
		stats: engine.StatsSnapshot{Commits: 10, WorkflowTasks: 4, ActivityTasks: 3, ActivityCompletion: 2, TimersFired: 1, OpenRuns: 7, PendingTimers: 5, CorruptRuns: 2,
			DuplicateEffects: 1, PossibleDuplicateEffects: 2, EffectConfirmations: 6, EffectConflicts: 3, EffectsInDoubt: 4,
			RunsDeleted: 8, RetentionFailures: 10, RetentionSweeps: 9},
		depths: map[string][4]int{"agents": {1, 2, 3, 4}},
		paused: 5,
	}
	c := metrics.NewCollector(src, metrics.Options{Queues: metrics.StaticQueues("agents", "idle", "agents")})
	want := `
# HELP cairn_effects_duplicates_total Late activity reports judged duplicates (two different attempts performed the action: verdict="duplicate") or possible duplicates (one performed it, another may have: verdict="possible_duplicate"), ever recorded in the effects ledger. Any increase needs a person.
# TYPE cairn_effects_duplicates_total counter
cairn_effects_duplicates_total{verdict="duplicate"} 1
cairn_effects_duplicates_total{verdict="possible_duplicate"} 2
# HELP cairn_effects_in_doubt_total SideEffect actions put in doubt when the engine opened over a recovered store (a restore, an accepted data loss): each runs its Reconcile lookup first or pauses its run for a person.
# TYPE cairn_effects_in_doubt_total counter
cairn_effects_in_doubt_total 4
# HELP cairn_effects_late_reports_total Late activity reports judged since the engine started that are not duplicates, by verdict (confirmation, conflict); duplicates are cairn_effects_duplicates_total.
# TYPE cairn_effects_late_reports_total counter
cairn_effects_late_reports_total{verdict="confirmation"} 6
cairn_effects_late_reports_total{verdict="conflict"} 3
# HELP cairn_engine_activity_completions_total Activity attempts whose outcome was recorded.
# TYPE cairn_engine_activity_completions_total counter
cairn_engine_activity_completions_total 2
# HELP cairn_engine_activity_tasks_dispatched_total Activity attempts handed to workers.
# TYPE cairn_engine_activity_tasks_dispatched_total counter
cairn_engine_activity_tasks_dispatched_total 3
# HELP cairn_engine_commits_total State transitions committed durably to the store.
# TYPE cairn_engine_commits_total counter
cairn_engine_commits_total 10
# HELP cairn_engine_open_runs Runs that are open (running or paused).
# TYPE cairn_engine_open_runs gauge
cairn_engine_open_runs 7
# HELP cairn_engine_paused_runs Open runs paused, waiting for a person: on an activity whose outcome is unknown, a budget used up, or an agent's tool call awaiting approval.
# TYPE cairn_engine_paused_runs gauge
cairn_engine_paused_runs 5
# HELP cairn_engine_pending_timers Deadlines waiting in the engine's timer queue.
# TYPE cairn_engine_pending_timers gauge
cairn_engine_pending_timers 5
# HELP cairn_engine_timers_fired_total Durable deadlines (timers, timeouts, retries) that fired and changed a run.
# TYPE cairn_engine_timers_fired_total counter
cairn_engine_timers_fired_total 1
# HELP cairn_engine_workflow_tasks_dispatched_total Workflow tasks handed to workers.
# TYPE cairn_engine_workflow_tasks_dispatched_total counter
cairn_engine_workflow_tasks_dispatched_total 4
# HELP cairn_retention_delete_failures_total Expired runs whose delete by the retention sweep failed since the engine opened (each is logged and tried again a day later).
# TYPE cairn_retention_delete_failures_total counter
cairn_retention_delete_failures_total 10
# HELP cairn_retention_runs_deleted_total Closed runs deleted since the engine opened: by the retention sweep once their retention passed, or by hand (cairn workflow delete).
# TYPE cairn_retention_runs_deleted_total counter
cairn_retention_runs_deleted_total 8
# HELP cairn_retention_sweeps_total Retention sweeps run since the engine opened.
# TYPE cairn_retention_sweeps_total counter
cairn_retention_sweeps_total 9
# HELP cairn_runs_corrupt Runs quarantined because their stored data is damaged: not served, their writes refused (cairn workflow list --corrupt).
# TYPE cairn_runs_corrupt gauge
cairn_runs_corrupt 2
# HELP cairn_task_queue_depth Tasks waiting on a task queue for a worker, by kind (workflow, activity).
# TYPE cairn_task_queue_depth gauge
cairn_task_queue_depth{kind="activity",queue="agents"} 2
cairn_task_queue_depth{kind="activity",queue="idle"} 0
cairn_task_queue_depth{kind="workflow",queue="agents"} 1
cairn_task_queue_depth{kind="workflow",queue="idle"} 0
# HELP cairn_task_queue_pollers Worker long polls waiting on a task queue, by kind (workflow, activity).
# TYPE cairn_task_queue_pollers gauge
cairn_task_queue_pollers{kind="activity",queue="agents"} 4
cairn_task_queue_pollers{kind="activity",queue="idle"} 0
cairn_task_queue_pollers{kind="workflow",queue="agents"} 3
cairn_task_queue_pollers{kind="workflow",queue="idle"} 0
`
	if got := exposition(t, c); got != strings.TrimPrefix(want, "\n") {
		t.Fatalf("exposition:\n%s\nwant:\n%s", got, want)
	}
	// Without queues: only the engine-wide series.
	got := exposition(t, metrics.NewCollector(src, metrics.Options{}))
	if strings.Contains(got, "cairn_task_queue") || strings.Count(got, "# TYPE") != 15 {
		t.Fatalf("without queues:\n%s", got)
	}
}

// exposition renders c alone in the text format, through a pedantic
// registry (which checks the descriptions against the metrics).
func exposition(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.PanicOnError}).
		ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// TestServedByHTTPAPI wires the collector into the server's /metrics, over
// a real engine.
func TestServedByHTTPAPI(t *testing.T) {
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true, MemTableSize: 8 << 20, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	defer eng.Close()
	h := httpapi.NewHandler(eng, httpapi.Options{Collectors: []prometheus.Collector{
		metrics.NewCollector(eng, metrics.Options{Queues: metrics.StaticQueues("agents")}),
	}})
	srv := httptest.NewServer(h)
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, id := range []string{"a", "b"} {
		if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "agents"}); err != nil {
			t.Fatal(err)
		}
	}
	pauseRun(ctx, t, eng, "paused")
	if _, err := eng.SetActivityLimit(ctx, &api.SetActivityLimitRequest{Limit: api.ActivityLimit{TaskQueue: "agents", LimitKey: "openai/gpt-4o",
		MaxInFlight: 8}}); err != nil {
		t.Fatal(err)
	}
	// An activity poller parks on the queue (nothing to run).
	pollCtx, stopPoll := context.WithCancel(ctx)
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		_, _ = eng.PollActivityTask(pollCtx, &api.PollActivityTaskRequest{TaskQueue: "agents"})
	}()
	for {
		if _, _, _, p := eng.QueueDepths("agents"); p == 1 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the poll never parked")
		}
		runtime.Gosched()
	}
	body := scrape(t, srv.URL+"/metrics")
	stopPoll()
	<-polled
	for _, line := range []string{
		"cairn_engine_open_runs 3",
		"cairn_engine_paused_runs 1",
		`cairn_task_queue_depth{kind="workflow",queue="agents"} 2`,
		`cairn_task_queue_depth{kind="activity",queue="agents"} 0`,
		`cairn_task_queue_pollers{kind="activity",queue="agents"} 1`,
		`cairn_task_queue_pollers{kind="workflow",queue="agents"} 0`,
		`cairn_activity_limit_in_flight{activity_type="",limit_key="openai/gpt-4o",queue="agents"} 0`,
		`cairn_activity_limit_max_in_flight{activity_type="",limit_key="openai/gpt-4o",queue="agents"} 8`,
	} {
		if !bytes.Contains(body, []byte(line+"\n")) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if !bytes.Contains(body, []byte("cairn_engine_commits_total ")) || bytes.Contains(body, []byte("cairn_engine_commits_total 0\n")) {
		t.Errorf("commits not counted")
	}
}

// pauseRun drives a run by hand, on its own queue, until it pauses on a
// side-effecting activity whose outcome is unknown.
func pauseRun(ctx context.Context, t *testing.T, eng *engine.Engine, id string) {
	t.Helper()
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: id}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: id})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll workflow task: %+v %v", wft, err)
	}
	schedule := api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1",
		ActivityType: "Charge", Effect: history.SideEffect, Options: api.ActivityOptions{StartToCloseTimeout: time.Minute}}}
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Commands: []api.Command{schedule}}); err != nil {
		t.Fatal(err)
	}
	act, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: id})
	if err != nil || act.Task == nil {
		t.Fatalf("poll activity task: %+v %v", act, err)
	}
	if _, err := eng.FailActivity(ctx, &api.FailActivityRequest{TaskToken: act.Task.TaskToken, OutcomeUnknown: true,
		Failure: api.Failure{Message: "gateway timeout"}}); err != nil {
		t.Fatal(err)
	}
	d, err := eng.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: id})
	if err != nil || d.Info.Status != api.StatusPaused {
		t.Fatalf("run %s: %+v %v, want paused", id, d, err)
	}
}

func scrape(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return b
}
