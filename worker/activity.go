package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// pollActivityTasks long-polls for activity tasks until pollCtx ends; each
// activity runs under runCtx, which is canceled only when the grace period
// after a stop is over.
func (w *Worker) pollActivityTasks(pollCtx, runCtx context.Context, inflight *sync.WaitGroup) {
	failures := 0
	for {
		select {
		case w.actSlots <- struct{}{}:
		case <-pollCtx.Done():
			return
		}
		resp, err := w.svc.PollActivityTask(pollCtx, &api.PollActivityTaskRequest{TaskQueue: w.opts.TaskQueue, Identity: w.opts.Identity})
		if err != nil || resp.Task == nil {
			<-w.actSlots
			if pollCtx.Err() != nil {
				return
			}
			if err != nil {
				failures++
				w.log.Warn().Err(err).Msg("poll activity task failed; retrying")
				if !backoff(pollCtx, failures) {
					return
				}
			}
			continue
		}
		failures = 0
		inflight.Add(1)
		task := resp.Task
		w.tasks.Go(func() {
			defer inflight.Done()
			defer func() { <-w.actSlots }()
			w.runActivity(runCtx, task)
		})
	}
}

// runActivity runs one attempt (or its Reconcile lookup) and reports the
// outcome.
func (w *Worker) runActivity(parent context.Context, task *api.ActivityTask) {
	w.stats.ActivityTasks.Add(1)
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	hb := newHeartbeater(w, task, parent, cancel)
	defer hb.stop()
	ctx = activities.WithInfo(ctx, &activities.Info{
		IdempotencyKey: task.IdempotencyKey, WorkflowID: task.WorkflowID, RunID: task.RunID, WorkflowType: task.WorkflowType,
		ActivityID: task.ActivityID, ActivityType: task.ActivityType, Attempt: task.Attempt, Effect: task.Effect,
		Reconcile: task.Reconcile, Deadline: task.Deadline, ScheduledTime: task.ScheduledTime, StartedTime: task.StartedTime,
		HeartbeatDetails: task.HeartbeatDetails,
	})
	ctx = activities.WithHeartbeater(ctx, hb.record)
	ctx = activities.WithChunks(ctx, w.chunks)
	out := &attemptOutput{w: w, task: task}
	ctx = out.install(ctx)
	reg := w.reg
	if task.Reconcile {
		reg = w.reconcilers
	}
	def, ok := reg.Activity(task.ActivityType)
	var (
		result history.Payload
		err    error
	)
	switch {
	case !ok:
		err = sdk.NewApplicationError(fmt.Sprintf("activity %q is not registered on worker %s", task.ActivityType, w.opts.Identity), "ActivityNotRegistered")
	case !task.Reconcile && def.Effect() > task.Effect:
		err = effectMismatch(task, def.Effect(), w.opts.Identity)
	default:
		input := task.Input
		if !def.RawInput() {
			input, err = history.Resolve(ctx, w.chunks, input)
		}
		if err == nil {
			result, err = def.Invoke(ctx, w.opts.Converter, input)
		}
	}
	hb.stop()
	out.flush()
	w.report(task, result, err, hb.canceled(), out.usageSum())
}

// activityLog returns the logger for an attempt's messages. It is built
// only when there is something to say.
func (w *Worker) activityLog(task *api.ActivityTask) zerolog.Logger {
	return w.log.With().Str("workflow_id", task.WorkflowID).Str("run_id", task.RunID).Str("activity_id", task.ActivityID).
		Str("activity_type", task.ActivityType).Int32("attempt", task.Attempt).Logger()
}

// effectMismatch refuses to run an activity this worker declares as
// side-effecting when it was scheduled under a weaker class: the workflow's
// worker did not have the declaration, so no idempotency key or intent
// guards the call. Running it anyway could perform the effect twice on a
// retry; failing loudly (and for good) is the safe answer.
func effectMismatch(task *api.ActivityTask, declared history.EffectClass, identity string) error {
	return sdk.NewNonRetryableError(fmt.Sprintf(
		"activity %q is declared %s on worker %s but was scheduled as %s: the workflow's worker does not know the declaration, "+
			"so nothing guards this side effect; register the activity (with its activities.Options) on the workers that run the workflow too",
		task.ActivityType, declared, identity, task.Effect), "EffectClassMismatch")
}

// report sends the attempt's outcome. It uses a fresh context so that an
// outcome reached during shutdown is still recorded.
func (w *Worker) report(task *api.ActivityTask, result history.Payload, err error, cancelRequested bool, usage history.Usage) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rerr error
	switch {
	case err == nil:
		rerr = w.completeActivity(ctx, task, result, usage)
	default:
		req := &api.FailActivityRequest{TaskToken: task.TaskToken, Failure: sdk.ErrorToFailure(err), Identity: w.opts.Identity, Usage: usage}
		w.fitFailure(task, &req.Failure)
		var ra *activities.RetryAfterError
		if errors.As(err, &ra) {
			req.RetryAfter = ra.Delay
		}
		switch {
		case errors.Is(err, activities.ErrNotHappened):
			req.NotHappened = true
		case errors.Is(err, activities.ErrOutcomeUnknown):
			req.OutcomeUnknown = true
		case cancelRequested && (errors.Is(err, context.Canceled) || sdk.IsCanceledError(err)):
			req.Canceled = true
		case task.Reconcile:
			req.OutcomeUnknown = true // a lookup that failed could not tell
		}
		_, rerr = w.svc.FailActivity(ctx, req)
	}
	switch {
	case rerr == nil:
	case errors.Is(rerr, api.ErrStaleAttempt), errors.Is(rerr, api.ErrWorkflowClosed):
		log := w.activityLog(task)
		log.Warn().Err(rerr).Msg("activity outcome refused: this attempt no longer holds the lease")
	default:
		log := w.activityLog(task)
		log.Error().Err(rerr).Msg("could not report activity outcome; the lease will expire")
	}
}

// heartbeater sends an attempt's heartbeats: those the activity records
// (at most one per HeartbeatInterval, the latest details winning) and
// automatic ones at a third of the lease, so a long activity keeps its lease
// while it makes progress. A heartbeat refused as stale, or one answering
// that cancellation was requested, cancels the activity's context.
//
// Its goroutine starts only when needed — at the first RecordHeartbeat, or
// when the activity is still running after a third of the lease — so that
// short activities cost no goroutine. It stops when the attempt ends, and
// when the worker abandons the attempt (parent canceled after the grace
// period): the lease then expires and the engine hands the activity to
// another worker.
type heartbeater struct {
	w      *Worker
	task   *api.ActivityTask
	parent context.Context
	cancel context.CancelFunc
	first  *time.Timer // starts the loop after a third of the lease

	mu        sync.Mutex
	details   any
	dirty     bool
	cancelReq bool
	started   bool
	stopped   bool
	wake      chan struct{} // made by start
	quit      chan struct{}
	done      chan struct{}
}

func newHeartbeater(w *Worker, task *api.ActivityTask, parent context.Context, cancel context.CancelFunc) *heartbeater {
	h := &heartbeater{w: w, task: task, parent: parent, cancel: cancel}
	h.first = time.AfterFunc(h.interval(), h.start)
	return h
}

// start runs the loop unless it runs already, the attempt is over, or the
// worker has abandoned it.
func (h *heartbeater) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started || h.stopped || h.parent.Err() != nil || !h.w.trackHeartbeater() {
		return
	}
	h.started = true
	h.wake, h.quit, h.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer h.w.heartbeaters.Done()
		h.loop()
	}()
}

func (h *heartbeater) record(details any) {
	h.mu.Lock()
	h.details, h.dirty = details, true
	started := h.started
	wake := h.wake
	h.mu.Unlock()
	if !started {
		h.start() // its first heartbeat carries the details
		return
	}
	select {
	case wake <- struct{}{}:
	default:
	}
}

func (h *heartbeater) canceled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cancelReq
}

// stop ends the heartbeats and waits for the loop to exit; it is
// idempotent.
func (h *heartbeater) stop() {
	h.mu.Lock()
	already := h.stopped
	h.stopped = true
	started := h.started
	h.mu.Unlock()
	h.first.Stop()
	if !started {
		return
	}
	if !already {
		close(h.quit)
	}
	<-h.done
}

// interval is how often automatic heartbeats go out: a third of the lease.
func (h *heartbeater) interval() time.Duration {
	lease := h.task.HeartbeatTimeout
	if lease <= 0 {
		lease = h.task.StartToCloseTimeout
	}
	if lease <= 0 {
		lease = 30 * time.Second
	}
	return max(lease/3, 10*time.Millisecond)
}

// loop sends a heartbeat at once, then every interval, and sooner when the
// activity recorded details — but never more often than HeartbeatInterval
// (nor less often than interval, whatever HeartbeatInterval says).
func (h *heartbeater) loop() {
	defer close(h.done)
	auto := h.interval()
	gap := min(h.w.opts.HeartbeatInterval, auto)
	var last time.Time // of the last heartbeat sent
	next := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-h.quit:
			return
		case <-h.parent.Done():
			return
		case <-h.wake:
			if at := last.Add(gap); at.After(time.Now()) {
				if at.Before(next) {
					next = at
					t.Reset(time.Until(at))
				}
				continue
			}
		case <-t.C:
		}
		h.send()
		last = time.Now()
		next = last.Add(auto)
		t.Reset(auto)
	}
}

func (h *heartbeater) send() {
	h.mu.Lock()
	details, dirty := h.details, h.dirty
	h.dirty = false
	h.mu.Unlock()
	req := &api.HeartbeatRequest{TaskToken: h.task.TaskToken}
	if dirty {
		p, err := h.w.opts.Converter.ToPayload(details)
		if err != nil {
			log := h.w.activityLog(h.task)
			log.Warn().Err(err).Msg("heartbeat details not encodable; sending none")
		}
		req.Details = h.fitHeartbeat(p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := h.w.svc.RecordActivityHeartbeat(ctx, req)
	switch {
	case errors.Is(err, api.ErrStaleAttempt), errors.Is(err, api.ErrWorkflowClosed):
		log := h.w.activityLog(h.task)
		log.Warn().Err(err).Msg("lease lost: canceling the activity")
		h.cancel()
	case err != nil:
		log := h.w.activityLog(h.task)
		log.Warn().Err(err).Msg("heartbeat failed")
		if dirty {
			h.mu.Lock()
			if !h.dirty { // keep the details for the next heartbeat unless newer ones came
				h.details, h.dirty = details, true
			}
			h.mu.Unlock()
		}
	case resp.CancelRequested:
		h.mu.Lock()
		h.cancelReq = true
		h.mu.Unlock()
		h.cancel()
	}
}
