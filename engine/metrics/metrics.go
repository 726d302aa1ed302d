// Package metrics exports an engine's counters and task-queue depths to
// Prometheus. Register the collector with the server's registry, e.g.
//
//	h := httpapi.NewHandler(eng, httpapi.Options{
//		Collectors: []prometheus.Collector{metrics.NewCollector(eng, metrics.Options{
//			Queues: metrics.StaticQueues("agents"),
//		})},
//	})
//
// Everything is read at scrape time from the engine's own counters
// ((*engine.Engine).Stats and QueueDepths): nothing is added to the engine's
// hot paths.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
)

// Source is what the collector reads; *engine.Engine implements it.
type Source interface {
	Stats() engine.StatsSnapshot
	QueueDepths(queue string) (workflowTasks, activityTasks, workflowPollers, activityPollers int)
	// ListWorkflows counts the paused runs (through the status index).
	ListWorkflows(ctx context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error)
}

// pausedScanTimeout bounds the paused-run count at each scrape.
const pausedScanTimeout = 5 * time.Second

var _ Source = (*engine.Engine)(nil)

// Options configure a Collector.
type Options struct {
	// Queues returns the task queues whose depths are exported, at each
	// scrape (nil: none). The engine does not list its queues, so the
	// server names the ones it cares about.
	Queues func() []string
}

// StaticQueues returns an Options.Queues that always names queues.
func StaticQueues(queues ...string) func() []string {
	return func() []string { return queues }
}

// Collector is a prometheus.Collector over a Source.
type Collector struct {
	src  Source
	opts Options
}

// NewCollector returns a collector reading src.
func NewCollector(src Source, opts Options) *Collector {
	return &Collector{src: src, opts: opts}
}

var (
	commitsDesc = prometheus.NewDesc("cairn_engine_commits_total",
		"State transitions committed durably to the store.", nil, nil)
	workflowTasksDesc = prometheus.NewDesc("cairn_engine_workflow_tasks_dispatched_total",
		"Workflow tasks handed to workers.", nil, nil)
	activityTasksDesc = prometheus.NewDesc("cairn_engine_activity_tasks_dispatched_total",
		"Activity attempts handed to workers.", nil, nil)
	activityCompletionsDesc = prometheus.NewDesc("cairn_engine_activity_completions_total",
		"Activity attempts whose outcome was recorded.", nil, nil)
	timersFiredDesc = prometheus.NewDesc("cairn_engine_timers_fired_total",
		"Durable deadlines (timers, timeouts, retries) that fired and changed a run.", nil, nil)
	openRunsDesc = prometheus.NewDesc("cairn_engine_open_runs",
		"Runs that are open (running or paused).", nil, nil)
	pausedRunsDesc = prometheus.NewDesc("cairn_engine_paused_runs",
		"Open runs paused, waiting for a person: on an activity whose outcome is unknown, a budget used up, or an agent's tool call awaiting approval.", nil, nil)
	corruptRunsDesc = prometheus.NewDesc("cairn_runs_corrupt",
		"Runs quarantined because their stored data is damaged: not served, their writes refused (cairn workflow list --corrupt).", nil, nil)
	pendingTimersDesc = prometheus.NewDesc("cairn_engine_pending_timers",
		"Deadlines waiting in the engine's timer queue.", nil, nil)
	duplicatesDesc = prometheus.NewDesc("cairn_effects_duplicates_total",
		"Late activity reports judged duplicates (two different attempts performed the action: verdict=\"duplicate\") or possible duplicates "+
			"(one performed it, another may have: verdict=\"possible_duplicate\"), ever recorded in the effects ledger. Any increase needs a person.",
		[]string{"verdict"}, nil)
	lateReportsDesc = prometheus.NewDesc("cairn_effects_late_reports_total",
		"Late activity reports judged since the engine started that are not duplicates, by verdict (confirmation, conflict); duplicates are cairn_effects_duplicates_total.",
		[]string{"verdict"}, nil)
	inDoubtDesc = prometheus.NewDesc("cairn_effects_in_doubt_total",
		"SideEffect actions put in doubt when the engine opened over a recovered store (a restore, an accepted data loss): each runs its Reconcile lookup first or pauses its run for a person.",
		nil, nil)
	runsDeletedDesc = prometheus.NewDesc("cairn_retention_runs_deleted_total",
		"Closed runs deleted since the engine opened: by the retention sweep once their retention passed, or by hand (cairn workflow delete).", nil, nil)
	retentionFailuresDesc = prometheus.NewDesc("cairn_retention_delete_failures_total",
		"Expired runs whose delete by the retention sweep failed since the engine opened (each is logged and tried again a day later).", nil, nil)
	sweepsDesc = prometheus.NewDesc("cairn_retention_sweeps_total",
		"Retention sweeps run since the engine opened.", nil, nil)
	queueDepthDesc = prometheus.NewDesc("cairn_task_queue_depth",
		"Tasks waiting on a task queue for a worker, by kind (workflow, activity).", []string{"queue", "kind"}, nil)
	limitInFlightDesc = prometheus.NewDesc("cairn_activity_limit_in_flight",
		"Activities holding a slot of an activity limit (cairn task-queue limit) on this server.", []string{"queue", "activity_type", "limit_key"}, nil)
	limitMaxDesc = prometheus.NewDesc("cairn_activity_limit_max_in_flight",
		"The most activities an activity limit lets be in flight at once (0: only a rate).", []string{"queue", "activity_type", "limit_key"}, nil)
	queuePollersDesc = prometheus.NewDesc("cairn_task_queue_pollers",
		"Worker long polls waiting on a task queue, by kind (workflow, activity).", []string{"queue", "kind"}, nil)
)

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{commitsDesc, workflowTasksDesc, activityTasksDesc, activityCompletionsDesc,
		timersFiredDesc, openRunsDesc, pausedRunsDesc, corruptRunsDesc, pendingTimersDesc, duplicatesDesc, lateReportsDesc, inDoubtDesc, runsDeletedDesc, sweepsDesc, retentionFailuresDesc, queueDepthDesc, queuePollersDesc,
		limitInFlightDesc, limitMaxDesc} {
		ch <- d
	}
}

// pausedRuns counts the runs listed as paused. Paused runs wait for a
// person, so there are few; the scan reads only their index entries.
func (c *Collector) pausedRuns() (int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), pausedScanTimeout)
	defer cancel()
	req := &api.ListWorkflowsRequest{Status: api.StatusPaused, PageSize: 1000}
	n := 0
	for {
		resp, err := c.src.ListWorkflows(ctx, req)
		if err != nil {
			return 0, false
		}
		n += len(resp.Workflows)
		if resp.NextPageToken == nil {
			return n, true
		}
		req.NextPageToken = resp.NextPageToken
	}
}

// limitSource is a Source that reports its activity limits (the engine).
type limitSource interface {
	ActivityLimitsInUse() []api.ActivityLimitInfo
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	counter := func(d *prometheus.Desc, v int64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	gauge := func(d *prometheus.Desc, v int, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter(commitsDesc, s.Commits)
	counter(workflowTasksDesc, s.WorkflowTasks)
	counter(activityTasksDesc, s.ActivityTasks)
	counter(activityCompletionsDesc, s.ActivityCompletion)
	counter(timersFiredDesc, s.TimersFired)
	gauge(openRunsDesc, s.OpenRuns)
	if n, ok := c.pausedRuns(); ok {
		gauge(pausedRunsDesc, n)
	}
	gauge(corruptRunsDesc, s.CorruptRuns)
	gauge(pendingTimersDesc, s.PendingTimers)
	counter(inDoubtDesc, s.EffectsInDoubt)
	counter(runsDeletedDesc, s.RunsDeleted)
	counter(sweepsDesc, s.RetentionSweeps)
	counter(retentionFailuresDesc, s.RetentionFailures)
	ch <- prometheus.MustNewConstMetric(duplicatesDesc, prometheus.CounterValue, float64(s.DuplicateEffects), api.VerdictDuplicate.String())
	ch <- prometheus.MustNewConstMetric(duplicatesDesc, prometheus.CounterValue, float64(s.PossibleDuplicateEffects), api.VerdictPossibleDuplicate.String())
	for _, v := range []struct {
		verdict api.EffectVerdict
		n       int64
	}{{api.VerdictConfirmation, s.EffectConfirmations}, {api.VerdictConflict, s.EffectConflicts}} {
		ch <- prometheus.MustNewConstMetric(lateReportsDesc, prometheus.CounterValue, float64(v.n), v.verdict.String())
	}
	if src, ok := c.src.(limitSource); ok {
		for _, l := range src.ActivityLimitsInUse() {
			gauge(limitInFlightDesc, l.InFlight, l.Limit.TaskQueue, l.Limit.ActivityType, l.Limit.LimitKey)
			gauge(limitMaxDesc, l.Limit.MaxInFlight, l.Limit.TaskQueue, l.Limit.ActivityType, l.Limit.LimitKey)
		}
	}
	if c.opts.Queues == nil {
		return
	}
	seen := map[string]bool{}
	for _, q := range c.opts.Queues() {
		if seen[q] {
			continue // a duplicate series would fail the whole scrape
		}
		seen[q] = true
		wft, act, wftPollers, actPollers := c.src.QueueDepths(q)
		gauge(queueDepthDesc, wft, q, "workflow")
		gauge(queueDepthDesc, act, q, "activity")
		gauge(queuePollersDesc, wftPollers, q, "workflow")
		gauge(queuePollersDesc, actPollers, q, "activity")
	}
}
