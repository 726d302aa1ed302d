package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	sched "github.com/cairnflow/cairn/engine/schedule"
	"github.com/cairnflow/cairn/history"
)

// Schedules (docs/schedules.md). Each schedule is one record in
// history.SpaceSchedule ("s", id): its spec, action and policies, and its
// state — the last nominal time handled, the recent actions, the buffered
// ones and the counters. The engine keeps every schedule it serves in
// memory and one entry for it in the timer heap (a timerKey whose RunID is
// scheduleRunID), at the actual time of its next action; when it comes
// due, fireSchedule starts the runs that are due and then records them in
// the schedule's record.
//
// Exactly once per nominal time: the run of a nominal time has the
// workflow id "<schedule id>-<nominal time, RFC 3339 UTC>", a request id
// derived from it, and the reuse policy RejectDuplicate. A crash after the
// start and before the record leaves the schedule's last nominal time
// where it was: the next server fires the same nominal time again, and the
// start finds the run (open: the same request id returns it; closed: the
// reuse policy refuses a second one), which the schedule then records.
// There is no separate index of next fire times: the heap is rebuilt from
// the records at Open (and at Acquire for a shard's schedules).

// scheduleRunID marks a schedule's entry in the timer heap.
const scheduleRunID = "\x00schedule"

const (
	maxRecentActions  = 10
	maxNextTimes      = 5
	maxActionsPerTick = 100
	maxBuffered       = 1000
	maxBackfill       = 10000
	maxMissedCounted  = 100000
	// bufferCheck is how often a schedule with buffered actions looks
	// whether the run before them has closed.
	bufferCheck = time.Second
)

// scheduleRecord is a schedule's durable record (SpaceSchedule).
type scheduleRecord struct {
	ID         string
	Schedule   api.Schedule
	CreateTime time.Time
	UpdateTime time.Time
	// LastNominal: every nominal time up to it has been handled (started,
	// buffered, skipped or missed).
	LastNominal    time.Time
	Recent         []api.ScheduleActionResult
	Buffered       []bufferedAction
	Actions        int64
	OverlapSkipped int64
	MissedCatchup  int64
	// CancelSent is the workflow id whose run the schedule asked to cancel
	// (cancel-other), so that it asks once.
	CancelSent string

	// owner is the entry whose committed record a start replaces when the
	// start and the record are one transaction (startAction); not stored.
	owner *schedEntry
}

// bufferedAction is an action waiting for the run before it to close.
type bufferedAction struct {
	Nominal time.Time
	Trigger string
	Overlap api.OverlapPolicy
}

func (r *scheduleRecord) clone() *scheduleRecord {
	c := *r
	c.Recent = slices.Clone(r.Recent)
	c.Buffered = slices.Clone(r.Buffered)
	return &c
}

// schedEntry is a schedule in memory. mu serialises its ticks and the
// calls that change it; rec is the committed record (nil: being created
// or deleted), replaced, never changed in place.
type schedEntry struct {
	mu    sync.Mutex
	rec   *scheduleRecord
	spec  *sched.Compiled
	armed time.Time // the deadline the heap holds for it (zero: none)
}

// scheduleSet is the schedules an engine serves.
type scheduleSet struct {
	mu sync.Mutex
	m  map[string]*schedEntry
	// firing bounds the schedules firing at once: when thousands come due
	// together, the rest wait parked instead of runnable, so that the
	// store's commit loop is not queued behind them for the CPU.
	firing chan struct{}
}

// maxFiring is how many schedules fire at once.
const maxFiring = 64

func (s *scheduleSet) get(id string) *schedEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[id]
}

func schedKey(id string) []byte { return history.Key().Str("s").Str(id).Bytes() }

// ScheduledWorkflowID is the workflow id of a schedule's action for a
// nominal time: "<scheduleID>-<nominal time, RFC 3339 UTC>".
func ScheduledWorkflowID(scheduleID string, nominal time.Time) string {
	return scheduleID + "-" + nominal.UTC().Format(time.RFC3339Nano)
}

func compileSpec(s api.ScheduleSpec) (*sched.Compiled, error) {
	c, err := sched.Compile(sched.Spec{Cron: s.Cron, Interval: s.Interval, Offset: s.Offset, Jitter: s.Jitter,
		TimeZone: s.TimeZone, Start: s.Start, End: s.End})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", api.ErrInvalidArgument, err)
	}
	return c, nil
}

// validateSchedule checks a schedule and compiles its spec.
func (e *Engine) validateSchedule(id string, s *api.Schedule) (*sched.Compiled, error) {
	if id == "" {
		return nil, api.Errorf(api.ErrInvalidArgument, "a schedule id is required")
	}
	// Room for "-2006-01-02T15:04:05.999999999Z" in the runs' workflow ids.
	if max := e.opts.Limits.MaxIDBytes - 40; len(id) > max {
		return nil, api.Errorf(api.ErrLimitExceeded, "schedule id is %d bytes, over %d", len(id), max)
	}
	if s.Policies.Overlap > api.OverlapAllowAll {
		return nil, api.Errorf(api.ErrInvalidArgument, "unknown overlap policy %d", s.Policies.Overlap)
	}
	if w := s.Policies.CatchupWindow; w != 0 && w < api.MinCatchupWindow {
		return nil, api.Errorf(api.ErrInvalidArgument, "catch-up window %s is shorter than %s", w, api.MinCatchupWindow)
	}
	if err := e.m.ValidateStart(actionRequest(id, s, time.Unix(0, 0))); err != nil {
		return nil, fmt.Errorf("schedule action: %w", err)
	}
	return compileSpec(s.Spec)
}

func actionRequest(id string, s *api.Schedule, nominal time.Time) *api.StartWorkflowRequest {
	wid := ScheduledWorkflowID(id, nominal)
	a := s.Action
	return &api.StartWorkflowRequest{WorkflowID: wid, WorkflowType: a.WorkflowType, TaskQueue: a.TaskQueue, Input: a.Input,
		ExecutionTimeout: a.ExecutionTimeout, RunTimeout: a.RunTimeout, TaskTimeout: a.TaskTimeout,
		ReusePolicy: api.RejectDuplicate, RequestID: "schedule:" + wid, Identity: "schedule:" + id}
}

func catchupWindow(s *api.Schedule) time.Duration {
	if w := s.Policies.CatchupWindow; w > 0 {
		return w
	}
	return api.DefaultCatchupWindow
}

func encodeSchedule(r *scheduleRecord) ([]byte, error) {
	b, err := api.MarshalMsgpack(r)
	if err != nil {
		return nil, fmt.Errorf("%w: encode schedule: %w", api.ErrInternal, err)
	}
	return b, nil
}

func decodeSchedule(b []byte) (*scheduleRecord, error) {
	r := new(scheduleRecord)
	if err := api.UnmarshalMsgpack(b, r); err != nil {
		return nil, fmt.Errorf("%w: %w: schedule: %w", api.ErrDataCorrupt, history.ErrCorrupt, err)
	}
	return r, nil
}

// putSchedule commits a schedule's record (nil: deletes it), fenced by
// its shard like a workflow id's, under the crash points of name.
func (e *Engine) putSchedule(ctx context.Context, name, id string, rec *scheduleRecord, cond *history.Condition) error {
	var b history.Batch
	if rec == nil {
		b.Deletes = []history.RecordKey{{Space: history.SpaceSchedule, Key: schedKey(id)}}
	} else {
		v, err := encodeSchedule(rec)
		if err != nil {
			return err
		}
		b.Puts = []history.Record{{Space: history.SpaceSchedule, Key: schedKey(id), Value: v}}
	}
	if cond != nil {
		b.Conditions = []history.Condition{*cond}
	}
	fences, err := e.shards.fences(map[string]bool{id: true})
	if err != nil {
		return err
	}
	b.Fences = fences
	err = e.commitAs(context.WithoutCancel(ctx), name, &b)
	if errors.Is(err, history.ErrFenced) {
		return e.fenced(fences, err)
	}
	if err != nil && !errors.Is(err, history.ErrConflict) {
		return storeErr(err)
	}
	return err
}

// loadSchedules reads the schedules of the store that keep says this
// engine serves, and arms them.
func (e *Engine) loadSchedules(ctx context.Context, keep func(id string) bool) error {
	return scanRecords(ctx, e.store, history.SpaceSchedule, history.ScanOptions{Prefix: history.Key().Str("s").Bytes()}, 0,
		func(r history.Record, bad error) (bool, error) {
			if bad != nil {
				e.log.Error().Err(bad).Msg("schedule record damaged: not loaded")
				return true, nil
			}
			rec, err := decodeSchedule(r.Value)
			if err != nil {
				e.log.Error().Err(err).Msg("schedule record damaged: not loaded")
				return true, nil
			}
			if !keep(rec.ID) {
				return true, nil
			}
			spec, err := compileSpec(rec.Schedule.Spec)
			if err != nil {
				e.log.Error().Err(err).Str("schedule", rec.ID).Msg("schedule spec no longer compiles: not loaded")
				return true, nil
			}
			ent := &schedEntry{rec: rec, spec: spec}
			e.scheds.mu.Lock()
			if e.scheds.m == nil {
				e.scheds.m = map[string]*schedEntry{}
			}
			if _, ok := e.scheds.m[rec.ID]; !ok {
				e.scheds.m[rec.ID] = ent
				ent.mu.Lock()
				e.armSchedule(ent)
				ent.mu.Unlock()
			}
			e.scheds.mu.Unlock()
			return true, nil
		})
}

// dropSchedules forgets the schedules of shards this engine stops serving.
func (e *Engine) dropSchedules(drop map[int]bool) {
	e.scheds.mu.Lock()
	defer e.scheds.mu.Unlock()
	for id := range e.scheds.m {
		if drop[e.shards.shard(id)] {
			delete(e.scheds.m, id)
		}
	}
}

// nextDue returns when the schedule must next be looked at, if ever.
func (e *Engine) nextDue(ent *schedEntry) (time.Time, bool) {
	rec := ent.rec
	if rec == nil || rec.Schedule.Paused {
		return time.Time{}, false
	}
	var due time.Time
	ok := false
	if n, more := ent.spec.Next(rec.LastNominal); more {
		due, ok = ent.spec.Actual(rec.ID, n), true
	}
	if len(rec.Buffered) > 0 {
		if check := e.now().Add(bufferCheck); !ok || check.Before(due) {
			due, ok = check, true
		}
	}
	return due, ok
}

// armSchedule puts the schedule in the timer heap at its next due time.
// Call with ent.mu held.
func (e *Engine) armSchedule(ent *schedEntry) {
	due, ok := e.nextDue(ent)
	if !ok || (!ent.armed.IsZero() && !due.Before(ent.armed)) {
		return // an entry at or before due is in the heap already: it re-arms
	}
	ent.armed = due
	e.timers.Add(due, timerKey{ref: history.RunRef{WorkflowID: ent.rec.ID, RunID: scheduleRunID}})
}

// fireSchedule is a schedule's entry of the timer heap come due.
func (e *Engine) fireSchedule(id string) {
	ent := e.scheds.get(id)
	if ent == nil {
		return
	}
	e.scheds.firing <- struct{}{}
	defer func() { <-e.scheds.firing }()
	if e.closed.Load() {
		return // the next Open fires it
	}
	ctx := context.Background()
	_ = e.shards.wait(ctx, []string{id}) // a shard being acquired is served in a moment
	ent.mu.Lock()
	defer ent.mu.Unlock()
	ent.armed = time.Time{}
	if ent.rec == nil || e.shards.check(id) != nil {
		return
	}
	now := e.now()
	rec := ent.rec.clone()
	rec.owner = ent
	tickErr := e.tick(ctx, ent.spec, rec, now)
	if err := e.installSchedule(ctx, "fireSchedule", ent, rec); err != nil {
		tickErr = err
	}
	if tickErr != nil {
		e.log.Warn().Err(tickErr).Str("schedule", id).Msg("schedule: action not taken; retrying")
		ent.armed = now.Add(retryDelay)
		e.timers.Add(ent.armed, timerKey{ref: history.RunRef{WorkflowID: id, RunID: scheduleRunID}})
		return
	}
	e.armSchedule(ent)
}

// installSchedule commits rec if it differs from the schedule's committed
// record, then makes it the schedule's. Call with ent.mu held.
func (e *Engine) installSchedule(ctx context.Context, name string, ent *schedEntry, rec *scheduleRecord) error {
	old, _ := encodeSchedule(ent.rec)
	now, err := encodeSchedule(rec)
	if err != nil {
		return err
	}
	if string(old) == string(now) {
		return nil
	}
	if err := e.putSchedule(ctx, name, rec.ID, rec, nil); err != nil {
		return err
	}
	ent.rec = rec
	return nil
}

// tick takes the actions that are due: buffered ones whose previous run
// closed, then the nominal times up to now (older than the catch-up window:
// counted as missed). It changes rec; an error (a start that may succeed
// later) leaves the nominal time it failed on to the next tick.
func (e *Engine) tick(ctx context.Context, spec *sched.Compiled, rec *scheduleRecord, now time.Time) error {
	if rec.Schedule.Paused {
		return nil
	}
	if rec.Schedule.Policies.Overlap != api.OverlapAllowAll || len(rec.Buffered) > 0 {
		e.refreshLast(ctx, rec) // allow-all never looks at it
	}
	if err := e.drainBuffer(ctx, rec, now); err != nil {
		return err
	}
	window := catchupWindow(&rec.Schedule)
	cutoff := now.Add(-window)
	t := rec.LastNominal
	for counted := 0; t.Before(cutoff); counted++ {
		n, ok := spec.Next(t)
		if !ok || !n.Before(cutoff) {
			break
		}
		if counted == maxMissedCounted { // counting stops here: the rest is skipped uncounted
			t = cutoff.Add(-time.Nanosecond)
			break
		}
		rec.MissedCatchup++
		t = n
	}
	rec.LastNominal = t
	for i := 0; i < maxActionsPerTick; i++ {
		n, ok := spec.Next(rec.LastNominal)
		if !ok || spec.Actual(rec.ID, n).After(now) {
			return nil
		}
		done := func(r *scheduleRecord) { r.LastNominal = n }
		if err := e.act(ctx, rec, n, api.TriggerScheduled, rec.Schedule.Policies.Overlap, now, done); err != nil {
			return err
		}
		done(rec)
	}
	return nil
}

// drainBuffer starts buffered actions while the run before each has closed.
func (e *Engine) drainBuffer(ctx context.Context, rec *scheduleRecord, now time.Time) error {
	for len(rec.Buffered) > 0 {
		last := lastStarted(rec)
		if last != nil && last.Status.Open() {
			b := rec.Buffered[0]
			if b.Overlap == api.OverlapCancelOther && rec.CancelSent != last.WorkflowID {
				if err := e.cancelRun(ctx, last); err != nil {
					return err
				}
				rec.CancelSent = last.WorkflowID
			}
			return nil
		}
		b := rec.Buffered[0]
		if err := e.startAction(ctx, rec, b.Nominal, b.Trigger, now, func(r *scheduleRecord) { r.Buffered = r.Buffered[1:] }); err != nil {
			return err
		}
	}
	return nil
}

// lastStarted is the schedule's latest action that started a run.
func lastStarted(rec *scheduleRecord) *api.ScheduleActionResult {
	for i := len(rec.Recent) - 1; i >= 0; i-- {
		if rec.Recent[i].RunID != "" {
			return &rec.Recent[i]
		}
	}
	return nil
}

// refreshLast reads the status of the latest started run, which the
// overlap policy looks at, if it was open.
func (e *Engine) refreshLast(ctx context.Context, rec *scheduleRecord) {
	for i := len(rec.Recent) - 1; i >= 0; i-- {
		if rec.Recent[i].RunID != "" {
			e.refreshAction(ctx, &rec.Recent[i])
			return
		}
	}
}

// refreshRecent reads the status of the recent actions' runs still open.
func (e *Engine) refreshRecent(ctx context.Context, rec *scheduleRecord) {
	for i := range rec.Recent {
		e.refreshAction(ctx, &rec.Recent[i])
	}
}

func (e *Engine) refreshAction(ctx context.Context, a *api.ScheduleActionResult) {
	if a.RunID == "" || !a.Status.Open() {
		return
	}
	svc, err := e.serviceFor(a.WorkflowID)
	if err != nil {
		return
	}
	if svc == api.Service(e) { // the run's state, without describing it
		unlock := e.lock(a.WorkflowID)
		st, _, err := e.loadState(ctx, a.WorkflowID, a.RunID)
		unlock()
		if err == nil {
			a.Status = st.Status
		} else if errors.Is(err, api.ErrNotFound) {
			a.Status = api.StatusUnspecified
		}
		return
	}
	d, err := svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID})
	if err == nil {
		a.Status = d.Info.Status
	} else if errors.Is(err, api.ErrNotFound) {
		a.Status = api.StatusUnspecified
	}
}

// serviceFor returns the service that serves a workflow id: this engine,
// or in a cluster the server that serves its shard.
func (e *Engine) serviceFor(workflowID string) (api.Service, error) {
	if e.shards == nil || e.Serves(workflowID) {
		return e, nil
	}
	return e.remoteOrErr()
}

// act applies the overlap policy to the action of a nominal time.
//
// done is applied to the record once the action is taken (started,
// buffered or skipped): what the schedule must remember along with it.
func (e *Engine) act(ctx context.Context, rec *scheduleRecord, nominal time.Time, trigger string, overlap api.OverlapPolicy, now time.Time,
	done func(*scheduleRecord)) error {
	last := lastStarted(rec)
	open := last != nil && last.Status.Open()
	switch {
	case overlap == api.OverlapAllowAll:
	case overlap == api.OverlapTerminateOther && open:
		if err := e.terminateRun(ctx, last); err != nil {
			return err
		}
		last.Status = api.StatusTerminated
	case overlap == api.OverlapSkip && open:
		rec.OverlapSkipped++
		return nil
	case overlap == api.OverlapBufferOne && (open || len(rec.Buffered) > 0):
		if len(rec.Buffered) > 0 {
			rec.OverlapSkipped++
			return nil
		}
		return e.buffer(rec, nominal, trigger, overlap)
	case overlap == api.OverlapBufferAll && (open || len(rec.Buffered) > 0):
		return e.buffer(rec, nominal, trigger, overlap)
	case overlap == api.OverlapCancelOther && (open || len(rec.Buffered) > 0):
		// The newest action waits for the open run to close, which it is
		// asked to do; an older waiting one is replaced.
		if len(rec.Buffered) > 0 {
			rec.OverlapSkipped += int64(len(rec.Buffered))
			rec.Buffered = rec.Buffered[:0]
		}
		if err := e.buffer(rec, nominal, trigger, overlap); err != nil {
			return err
		}
		return e.drainBuffer(ctx, rec, now)
	}
	return e.startAction(ctx, rec, nominal, trigger, now, done)
}

func (e *Engine) buffer(rec *scheduleRecord, nominal time.Time, trigger string, overlap api.OverlapPolicy) error {
	if len(rec.Buffered) >= maxBuffered {
		rec.OverlapSkipped++
		return nil
	}
	rec.Buffered = append(rec.Buffered, bufferedAction{Nominal: nominal, Trigger: trigger, Overlap: overlap})
	return nil
}

// startAction starts the run of a nominal time (or finds the one a crash
// left unrecorded) and records it in rec, then applies done to rec. A
// start refused for good (the workflow type's input over a limit, say) is
// recorded with its error; one that may succeed later is returned.
//
// On an engine that serves every run (no shards) the start and the
// schedule's record are one transaction (startLocal): the record put is
// the committed one from then on. Else the run is started first and the
// record committed after it; a crash between the two leaves the nominal
// time to be fired again, and the start then finds its run.
func (e *Engine) startAction(ctx context.Context, rec *scheduleRecord, nominal time.Time, trigger string, now time.Time,
	done func(*scheduleRecord)) error {
	req := actionRequest(rec.ID, &rec.Schedule, nominal)
	res := api.ScheduleActionResult{NominalTime: nominal, ActualTime: now, WorkflowID: req.WorkflowID, Trigger: trigger,
		Status: api.StatusRunning}
	if e.shards == nil && rec.owner != nil && !e.opts.splitScheduleCommits {
		ok, err := e.startLocal(ctx, req, rec, res, done)
		if ok || err != nil {
			return err
		}
	}
	svc, err := e.serviceFor(req.WorkflowID)
	if err != nil {
		return err
	}
	resp, err := svc.StartWorkflow(ctx, req)
	switch {
	case err == nil:
		res.RunID = resp.RunID
	case errors.Is(err, api.ErrAlreadyStarted):
		// Started before a crash (or by someone else): that run is this
		// nominal time's.
		d, derr := svc.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: req.WorkflowID})
		if derr != nil {
			return derr
		}
		res.RunID, res.Status, res.ActualTime = d.Info.RunID, d.Info.Status, d.Info.StartTime
	case retryable(err):
		return err
	default:
		res.Status = api.StatusUnspecified
		res.Error = err.Error()
	}
	recordAction(rec, res)
	if done != nil {
		done(rec)
	}
	return nil
}

// recordAction adds an action to the record.
func recordAction(rec *scheduleRecord, res api.ScheduleActionResult) {
	if res.RunID != "" {
		rec.Actions++
	}
	rec.Recent = append(rec.Recent, res)
	if len(rec.Recent) > maxRecentActions {
		rec.Recent = slices.Delete(rec.Recent, 0, len(rec.Recent)-maxRecentActions)
	}
}

// startLocal starts the run and commits the schedule's record with it, in
// one transaction. It reports false, having written nothing, when the
// start is refused (the caller then takes the general path, which records
// why, or finds the run a crash left).
func (e *Engine) startLocal(ctx context.Context, req *api.StartWorkflowRequest, rec *scheduleRecord, res api.ScheduleActionResult,
	done func(*scheduleRecord)) (bool, error) {
	if err := e.enter(); err != nil {
		return false, err
	}
	defer e.leave()
	if err := e.m.ValidateStart(req); err != nil {
		return false, nil
	}
	var after *scheduleRecord
	err := e.transact(ctx, []string{req.WorkflowID}, func(x *txn) error {
		resp, err := x.start(ctx, req)
		if err != nil {
			return err
		}
		res.RunID = resp.RunID
		after = rec.clone()
		recordAction(after, res)
		if done != nil {
			done(after)
		}
		v, err := encodeSchedule(after)
		if err != nil {
			return err
		}
		x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceSchedule, Key: schedKey(rec.ID), Value: v})
		return nil
	})
	if err != nil {
		if retryable(err) {
			return false, err
		}
		return false, nil
	}
	*rec = *after.clone()
	rec.owner.rec = after
	return true, nil
}

// retryable reports whether a failed call may succeed if made again.
func retryable(err error) bool {
	return errors.Is(err, api.ErrUnavailable) || errors.Is(err, api.ErrInternal) || errors.Is(err, api.ErrResourceExhausted) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, api.ErrDataCorrupt)
}

func (e *Engine) cancelRun(ctx context.Context, a *api.ScheduleActionResult) error {
	svc, err := e.serviceFor(a.WorkflowID)
	if err != nil {
		return err
	}
	_, err = svc.RequestCancelWorkflow(ctx, &api.CancelWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID,
		Reason: "schedule overlap policy cancel-other", Identity: "schedule"})
	if errors.Is(err, api.ErrWorkflowClosed) || errors.Is(err, api.ErrNotFound) {
		return nil
	}
	return err
}

func (e *Engine) terminateRun(ctx context.Context, a *api.ScheduleActionResult) error {
	svc, err := e.serviceFor(a.WorkflowID)
	if err != nil {
		return err
	}
	_, err = svc.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: a.WorkflowID, RunID: a.RunID,
		Reason: "schedule overlap policy terminate-other", Identity: "schedule"})
	if errors.Is(err, api.ErrWorkflowClosed) || errors.Is(err, api.ErrNotFound) {
		return nil
	}
	return err
}
