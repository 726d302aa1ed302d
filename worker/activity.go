package worker

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/clock"
	"github.com/cairnflow/cairn/sdk"
)

// An activity attempt on the worker, and how its lease bounds it in time:
//
//   - The attempt's context ends at its hard end (start-to-close), and
//     sooner, with cause activities.ErrLeaseLost, when the worker no longer
//     holds the lease: a heartbeat learns it is gone, or the lease end the
//     engine last confirmed passes without a renewal (the engine is
//     unreachable, the worker was frozen).
//   - Immediately before the activity is invoked, the worker checks that
//     the lease is not over; a task whose lease ended while it sat in a
//     poll response (a worker frozen, or too busy) is given back unstarted
//     (FailActivity with NotStarted), never run.
//   - The outcome, with the last heartbeat details, is reported until the
//     engine acknowledges it or says the attempt is no longer current,
//     across reconnects and server restarts (deliver).
//
// What remains is a window no process can close on its own: a worker
// frozen (or descheduled) after its last check and before the request's
// bytes leave it acts when it wakes up, its lease long over. The engine
// waits for the lease deadline plus a drift margin before it runs a
// Reconcile lookup or the next attempt, which makes that window short,
// and records it loudly when it happens (a duplicate); an Idempotent
// activity that sends activities.GetInfo(ctx).IdempotencyKey to a
// downstream that deduplicates on it closes it. See docs/effects.md.

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
		resp, err := w.svc.PollActivityTask(pollCtx, &api.PollActivityTaskRequest{TaskQueue: w.opts.TaskQueue, Identity: w.opts.Identity,
			Activities: w.declarations})
		if err != nil || resp.Task == nil {
			<-w.actSlots
			if pollCtx.Err() != nil {
				return
			}
			if err != nil {
				failures++
				w.pollFailed(err, "activity tasks")
				if !backoff(pollCtx, failures) {
					return
				}
				continue
			}
			w.pollSucceeded()
			continue
		}
		failures = 0
		w.pollSucceeded()
		inflight.Add(1)
		task := resp.Task
		received := w.clk.Now()
		w.tasks.Go(func() {
			defer inflight.Done()
			defer func() { <-w.actSlots }()
			w.runActivity(runCtx, task, received)
		})
	}
}

// leaseEnd is the worker's view of when the attempt's lease ends: the
// deadline the engine gave, and never later than the lease's length after
// the worker received the task (which guards against a worker clock that
// lags the engine's).
func leaseEnd(task *api.ActivityTask, received time.Time) time.Time {
	end := task.Deadline
	if lease := task.Deadline.Sub(task.StartedTime); lease > 0 && received.Add(lease).Before(end) {
		end = received.Add(lease)
	}
	return end
}

// hardEnd is when the attempt ends whatever its heartbeats say.
func hardEnd(task *api.ActivityTask) time.Time {
	if !task.HardDeadline.IsZero() {
		return task.HardDeadline
	}
	if task.StartToCloseTimeout > 0 {
		return task.StartedTime.Add(task.StartToCloseTimeout)
	}
	return task.Deadline
}

// errWorkerStopping is the cause of an activity context canceled because
// the worker stops and the grace period is over.
var errWorkerStopping = errors.New("worker: stopping: the grace period is over")

// runActivity runs one attempt (or its Reconcile lookup) and reports the
// outcome.
func (w *Worker) runActivity(parent context.Context, task *api.ActivityTask, received time.Time) {
	w.stats.ActivityTasks.Add(1)
	if task.KeyTask {
		w.keyTask(parent, task)
		return
	}
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	// The hard end as a deadline of the context (a real-time one: the
	// remaining time by the worker's clock, from now).
	ctx, stopDeadline := context.WithDeadlineCause(ctx, time.Now().Add(hardEnd(task).Sub(w.clk.Now())), activities.ErrLeaseLost)
	defer stopDeadline()
	hb := newHeartbeater(w, task, parent, cancel, leaseEnd(task, received))
	defer hb.stop()
	ctx = leaseContext{ctx, hb}
	ctx = activities.WithInfo(ctx, &activities.Info{
		IdempotencyKey: task.IdempotencyKey, WorkflowID: task.WorkflowID, RunID: task.RunID, WorkflowType: task.WorkflowType,
		ActivityID: task.ActivityID, ActivityType: task.ActivityType, Attempt: task.Attempt, Effect: task.Effect,
		Reconcile: task.Reconcile, Deadline: task.Deadline, ScheduledTime: task.ScheduledTime, StartedTime: task.StartedTime,
		HeartbeatDetails: task.HeartbeatDetails, TaskToken: task.TaskToken,
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
	case !task.Reconcile && def.Metered() && !task.Metered:
		err = meteredMismatch(task, w.opts.Identity)
	default:
		input := task.Input
		if !def.RawInput() {
			input, err = history.Resolve(ctx, w.chunks, input)
		}
		if err == nil && !hb.holds() {
			// The last check before the activity runs: its lease ended
			// while the task waited (in a poll response, for a slot, in a
			// frozen process). It is given back, never started.
			hb.stop()
			w.giveBack(task)
			return
		}
		if err == nil {
			result, err = def.Invoke(ctx, w.opts.Converter, input)
		}
	}
	out.flush()
	if !task.Reconcile && errors.Is(err, activities.ErrResultPending) {
		// Someone else reports the outcome with the task token (or the
		// ids): the attempt stays started under its timeouts.
		hb.stop()
		w.stats.ActivityPending.Add(1)
		return
	}
	// The heartbeats go on while the outcome is delivered: a report that
	// waits for a restarting server must not cost the lease.
	w.report(task, result, err, hb, context.Cause(ctx), hb.takeDetails(), out.usageSum())
	hb.stop()
}

// keyTask answers a key task: the activity's key material as this worker
// declares it — its business key, else the canonical encoding of its input
// (the input's own bytes when the default converter encoded it) — without
// running the activity.
func (w *Worker) keyTask(ctx context.Context, task *api.ActivityTask) {
	material, err := w.keyMaterial(ctx, task)
	if err != nil {
		req := &api.FailActivityRequest{TaskToken: task.TaskToken, Identity: w.opts.Identity,
			Failure: history.Failure{Type: "KeyMaterial", Message: err.Error(), NonRetryable: true}}
		w.deliver(task, nil, "key", func(ctx context.Context) error {
			_, err := w.svc.FailActivity(ctx, req)
			return err
		})
		return
	}
	req := &api.CompleteActivityRequest{TaskToken: task.TaskToken, Identity: w.opts.Identity, KeyMaterial: material}
	w.deliver(task, nil, "key", func(ctx context.Context) error {
		_, err := w.svc.CompleteActivity(ctx, req)
		return err
	})
}

func (w *Worker) keyMaterial(ctx context.Context, task *api.ActivityTask) ([]byte, error) {
	def, ok := w.reg.Activity(task.ActivityType)
	if !ok {
		return nil, fmt.Errorf("activity %q is not registered on worker %s", task.ActivityType, w.opts.Identity)
	}
	_, hasKey, _ := def.BusinessKey(nil)
	if !hasKey && task.Input.Encoding == sdk.EncodingMsgpack {
		return task.Input.Data, nil // canonical already: what the engine keys on when the workflow declares it
	}
	input, err := history.Resolve(ctx, w.chunks, task.Input)
	if err != nil {
		return nil, err
	}
	var v any
	if t := def.InputType(); t != nil {
		p := reflect.New(t)
		if err := w.opts.Converter.FromPayload(input, p.Interface()); err != nil {
			return nil, fmt.Errorf("decode the input of %s: %w", task.ActivityType, err)
		}
		v = p.Elem().Interface()
	}
	if hasKey {
		k, _, err := def.BusinessKey(v)
		return []byte(k), err
	}
	return sdk.CanonicalEncoding(v)
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

// meteredMismatch refuses to run an activity this worker declares as
// metered (a model call) when it was scheduled as unmetered: the
// workflow's worker did not have the declaration, so the engine neither
// counted the call as a turn nor checked the run's budget before it. Running
// it anyway would let the run spend past its budget; failing loudly (and
// for good, recorded in history) is the safe answer.
func meteredMismatch(task *api.ActivityTask, identity string) error {
	return sdk.NewNonRetryableError(fmt.Sprintf(
		"activity %q is declared metered on worker %s but was scheduled as unmetered: the workflow's worker does not know the declaration, "+
			"so the run's budget was not checked before this call; register the activity (with its activities.Options) on the workers that run the workflow too",
		task.ActivityType, identity), "MeteredMismatch")
}

// giveBack returns a task whose lease was over before it could start.
func (w *Worker) giveBack(task *api.ActivityTask) {
	log := w.activityLog(task)
	log.Warn().Time("lease_end", task.Deadline).Time("now", w.clk.Now()).
		Msg("activity task given back unstarted: its lease was over when it could start (a frozen or overloaded worker, or this host's clock is ahead of the server's)")
	req := &api.FailActivityRequest{TaskToken: task.TaskToken, NotStarted: true, Identity: w.opts.Identity,
		Failure: history.Failure{Type: "NotStarted", Message: "the lease was over before the attempt could start"}}
	w.deliver(task, nil, "give-back", func(ctx context.Context) error {
		_, err := w.svc.FailActivity(ctx, req)
		return err
	})
}

// report sends the attempt's outcome, with its last heartbeat details and
// its usage. cause is why the activity's context ended, if it did.
func (w *Worker) report(task *api.ActivityTask, result history.Payload, err error, hb *heartbeater, cause error,
	details history.Payload, usage history.Usage) {
	details = hb.fitHeartbeat(details)
	if err == nil {
		req := &api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: result, Identity: w.opts.Identity, Usage: usage,
			HeartbeatDetails: details}
		w.deliver(task, hb, "completion", func(ctx context.Context) error { return w.completeActivity(ctx, task, req) })
		return
	}
	req := &api.FailActivityRequest{TaskToken: task.TaskToken, Failure: sdk.ErrorToFailure(err), Identity: w.opts.Identity, Usage: usage,
		HeartbeatDetails: details}
	w.fitFailure(task, &req.Failure)
	var ra *activities.RetryAfterError
	if errors.As(err, &ra) {
		req.RetryAfter = ra.Delay
	}
	interrupted := errors.Is(cause, activities.ErrLeaseLost) || errors.Is(cause, errWorkerStopping)
	switch {
	case task.Reconcile && errors.Is(err, activities.ErrNotHappened):
		req.NotHappened = true
	case errors.Is(err, activities.ErrOutcomeUnknown):
		req.OutcomeUnknown = true
	case hb.canceled() && (errors.Is(err, context.Canceled) || sdk.IsCanceledError(err)):
		req.Canceled = true
	case !task.Reconcile && task.Effect == history.SideEffect && interrupted &&
		(errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		// The worker itself cut the attempt short (its lease was lost, or
		// it is stopping) while it may have been talking to the
		// downstream system: nobody can tell whether the action happened.
		req.OutcomeUnknown = true
	}
	// Any other error of a Reconcile lookup is a plain failure: the engine
	// asks the lookup again (it is a read); only ErrOutcomeUnknown pauses.
	w.deliver(task, hb, "failure", func(ctx context.Context) error {
		_, err := w.svc.FailActivity(ctx, req)
		return err
	})
}

// reportTimeout bounds one attempt to deliver a report.
const reportTimeout = 30 * time.Second

// deliver sends a report until the engine acknowledges it, says the
// attempt is no longer current (or the run closed), or refuses it for good
// (a bad request). A transport failure or an engine that is restarting
// only delays it: the outcome of an attempt is never dropped while the
// worker runs. Once the worker has stopped (Run returned), a report still
// undelivered is abandoned with an error line; the attempt's lease then
// decides. hb, when set, keeps the lease while the report waits.
func (w *Worker) deliver(task *api.ActivityTask, hb *heartbeater, what string, send func(ctx context.Context) error) {
	for failures := 0; ; failures++ {
		ctx, cancel := context.WithTimeout(w.reportCtx, reportTimeout)
		err := send(ctx)
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, api.ErrStaleAttempt), errors.Is(err, api.ErrWorkflowClosed):
			log := w.activityLog(task)
			log.Warn().Err(err).Str("report", what).Msg("activity report: this attempt no longer holds the lease; the engine recorded what it proves")
			return
		case !retryableReport(err):
			log := w.activityLog(task)
			log.Error().Err(err).Str("report", what).Msg("activity report refused; the lease will expire")
			return
		}
		if w.reportCtx.Err() != nil {
			log := w.activityLog(task)
			log.Error().Err(err).Str("report", what).Msg("worker stopped before the activity's outcome could be reported; the lease will expire")
			return
		}
		log := w.activityLog(task)
		log.Warn().Err(err).Str("report", what).Int("failures", failures+1).Msg("could not report the activity's outcome yet; retrying")
		if hb != nil {
			hb.start() // heartbeat meanwhile (a no-op if it runs already)
		}
		if !sleep(w.reportCtx, w.clk, reportBackoff(failures)) {
			continue // stopped: the loop tries once more, then gives up
		}
	}
}

// retryableReport reports whether a report that failed with err may
// succeed later: the engine was unreachable, restarting or overloaded.
func retryableReport(err error) bool {
	for _, permanent := range []error{api.ErrInvalidArgument, api.ErrLimitExceeded, api.ErrNotFound, api.ErrUnauthenticated,
		api.ErrStaleTask, api.ErrDataCorrupt} { // a quarantined run takes no report until an operator restores it
		if errors.Is(err, permanent) {
			return false
		}
	}
	return true
}

// reportBackoff is the wait after the n-th failed delivery (from 0):
// 50 ms doubling to 2 s: an outcome waiting for a restarting server goes
// out soon after it is back.
func reportBackoff(n int) time.Duration {
	return min(time.Duration(1<<min(n, 6))*50*time.Millisecond, 2*time.Second)
}

// sleep waits d on clk, or returns false when ctx ends first.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) bool {
	done := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// leaseContext is an attempt's context: its Err consults the lease by the
// clock, at the moment it is called, rather than waiting for the timer
// that cancels the context to have run. A process that wakes up from a
// freeze runs whatever was due first — the activity's own timers
// included — so an activity that checks ctx.Err() right before it acts
// learns that its lease is over even if the lease timer has not fired yet.
// (Contexts derived from it learn it from Done, when the timer runs.)
type leaseContext struct {
	context.Context
	hb *heartbeater
}

// Err returns the context's error, canceling it first (with cause
// activities.ErrLeaseLost) when the lease is over by the clock.
func (c leaseContext) Err() error {
	if err := c.Context.Err(); err != nil {
		return err
	}
	if c.hb.expired() {
		return c.Context.Err()
	}
	return nil
}

// heartbeater sends an attempt's heartbeats — those the activity records
// (at most one per HeartbeatInterval, the latest details winning) and
// automatic ones at a third of the lease — and holds the worker's view of
// the lease: the end the engine last confirmed. When that end passes
// unrenewed, or a heartbeat is refused as stale, it cancels the activity's
// context with activities.ErrLeaseLost; a heartbeat answering that
// cancellation was requested cancels it too.
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
	cancel context.CancelCauseFunc
	clk    clock.Clock // the worker's: leases are times of the engine's clock
	// pace times the heartbeats themselves: the real clock, so that
	// heartbeats flow while a test holds a fake clock still.
	pace  clock.Clock
	first clock.Timer // starts the loop after a third of the lease
	lease clock.Timer // fires at the confirmed lease end

	mu        sync.Mutex
	until     time.Time // the lease end the engine last confirmed
	lost      bool      // the lease is gone, or its end passed unconfirmed
	details   any
	dirty     bool
	cancelReq bool
	started   bool
	stopped   bool
	wake      chan struct{} // made by start
	tick      chan struct{}
	ticker    clock.Timer
	quit      chan struct{}
	done      chan struct{}
}

func newHeartbeater(w *Worker, task *api.ActivityTask, parent context.Context, cancel context.CancelCauseFunc, until time.Time) *heartbeater {
	h := &heartbeater{w: w, task: task, parent: parent, cancel: cancel, clk: w.clk, pace: clock.Real(), until: until}
	h.first = h.pace.AfterFunc(h.interval(), h.start)
	h.lease = h.clk.AfterFunc(until.Sub(h.clk.Now()), h.checkLease)
	return h
}

// holds reports whether the worker still holds the lease by its clock.
func (h *heartbeater) holds() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.lost && h.clk.Now().Before(h.until)
}

// expired cancels the attempt if its lease is over by the clock, and
// reports whether it was.
func (h *heartbeater) expired() bool {
	h.mu.Lock()
	// Lost already: whoever found it may not have canceled the context
	// yet (it does so after unlocking), so this call does it too.
	over := h.lost || !h.stopped && !h.clk.Now().Before(h.until)
	h.lost = over
	h.mu.Unlock()
	if over {
		h.cancel(activities.ErrLeaseLost) // canceling twice is a no-op
	}
	return over
}

// checkLease runs at the confirmed lease end: past it, unrenewed, the
// attempt must stop; renewed meanwhile, it waits for the new end.
func (h *heartbeater) checkLease() {
	h.mu.Lock()
	if h.stopped || h.lost {
		h.mu.Unlock()
		return
	}
	now := h.clk.Now()
	if now.Before(h.until) {
		h.lease = h.clk.AfterFunc(h.until.Sub(now), h.checkLease)
		h.mu.Unlock()
		return
	}
	h.lost = true
	until := h.until
	h.mu.Unlock()
	log := h.w.activityLog(h.task)
	log.Warn().Time("lease_end", until).Msg("the lease ended without a renewal (the server is unreachable, or this worker was frozen): canceling the activity")
	h.cancel(activities.ErrLeaseLost)
}

// confirm records a lease end the engine confirmed in answer to a
// heartbeat sent at sent: never later than the heartbeat timeout after
// sent, by the worker's own clock.
func (h *heartbeater) confirm(deadline, sent time.Time) {
	if hb := h.task.HeartbeatTimeout; hb > 0 && sent.Add(hb).Before(deadline) {
		deadline = sent.Add(hb)
	}
	h.mu.Lock()
	if deadline.After(h.until) {
		h.until = deadline
	}
	h.mu.Unlock()
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
	h.wake, h.tick = make(chan struct{}, 1), make(chan struct{}, 1)
	h.quit, h.done = make(chan struct{}), make(chan struct{})
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
	lease := h.lease // checkLease re-arms it under mu
	h.mu.Unlock()
	h.first.Stop()
	lease.Stop()
	if started {
		if !already {
			close(h.quit)
		}
		<-h.done
	}
}

// takeDetails returns the details the activity recorded that no heartbeat
// carried yet, encoded, to flush them with the outcome (and no heartbeat
// sends them after that).
func (h *heartbeater) takeDetails() history.Payload {
	h.mu.Lock()
	details, dirty := h.details, h.dirty
	h.dirty = false
	h.mu.Unlock()
	if !dirty {
		return history.Payload{}
	}
	p, err := h.w.opts.Converter.ToPayload(details)
	if err != nil {
		log := h.w.activityLog(h.task)
		log.Warn().Err(err).Msg("heartbeat details not encodable; sending none")
	}
	return p
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

// arm schedules the loop's next tick in d.
func (h *heartbeater) arm(d time.Duration) {
	if h.ticker != nil {
		h.ticker.Stop()
	}
	tick := h.tick
	h.ticker = h.pace.AfterFunc(d, func() {
		select {
		case tick <- struct{}{}:
		default:
		}
	})
}

// loop sends a heartbeat at once, then every interval, and sooner when the
// activity recorded details — but never more often than HeartbeatInterval
// (nor less often than interval, whatever HeartbeatInterval says). After a
// failed heartbeat the next one goes out at a third of the interval, so
// that one lost heartbeat does not cost the lease.
func (h *heartbeater) loop() {
	defer close(h.done)
	auto := h.interval()
	gap := min(h.w.opts.HeartbeatInterval, auto)
	defer func() {
		if h.ticker != nil {
			h.ticker.Stop()
		}
	}()
	for {
		wait := auto
		if !h.send() {
			wait = max(auto/3, 10*time.Millisecond)
		}
		last := h.pace.Now()
		h.arm(wait)
		if !h.waitUntilDue(last, last.Add(wait), gap) {
			return
		}
	}
}

// waitUntilDue waits until the next heartbeat is due: at next, or as soon
// as gap has passed since last when the activity recorded details. It
// returns false when the loop must end.
func (h *heartbeater) waitUntilDue(last, next time.Time, gap time.Duration) bool {
	for {
		select {
		case <-h.quit:
			return false
		case <-h.parent.Done():
			return false
		case <-h.wake:
			at := last.Add(gap)
			if !at.After(h.pace.Now()) {
				return true
			}
			if at.Before(next) {
				next = at
				h.arm(at.Sub(h.pace.Now()))
			}
		case <-h.tick:
			if !next.After(h.pace.Now()) {
				return true
			}
		}
	}
}

// send sends one heartbeat and reports whether it got through.
func (h *heartbeater) send() bool {
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
	sent := h.clk.Now()
	resp, err := h.w.svc.RecordActivityHeartbeat(ctx, req)
	switch {
	case errors.Is(err, api.ErrStaleAttempt), errors.Is(err, api.ErrWorkflowClosed):
		log := h.w.activityLog(h.task)
		log.Warn().Err(err).Msg("lease lost: canceling the activity")
		h.mu.Lock()
		h.lost = true
		h.mu.Unlock()
		h.cancel(activities.ErrLeaseLost)
		return true
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
		return false
	}
	h.confirm(resp.Deadline, sent)
	if resp.CancelRequested {
		h.mu.Lock()
		h.cancelReq = true
		h.mu.Unlock()
		h.cancel(context.Canceled)
	}
	return true
}
