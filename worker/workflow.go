package worker

import (
	"context"
	"errors"
	"sync"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/tracing"
	"github.com/cairnflow/cairn/sdk"
)

// pollWorkflowTasks long-polls queue until ctx ends, running each task in a
// bounded slot.
func (w *Worker) pollWorkflowTasks(ctx context.Context, queue string, inflight *sync.WaitGroup) {
	failures := 0
	for {
		select {
		case w.wfSlots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		resp, err := w.svc.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: queue, Identity: w.opts.Identity})
		if err != nil || resp.Task == nil {
			<-w.wfSlots
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				failures++
				w.pollFailed(err, "workflow tasks of "+queue)
				if !backoff(ctx, failures) {
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
		w.tasks.Go(func() {
			defer inflight.Done()
			defer func() { <-w.wfSlots }()
			w.handleWorkflowTask(task)
		})
	}
}

func runKey(task *api.WorkflowTask) string { return task.WorkflowID + "\x00" + task.RunID }

// handleWorkflowTask runs one workflow (or query) task. It uses a detached
// context: a task in hand is finished even while the worker stops.
func (w *Worker) handleWorkflowTask(task *api.WorkflowTask) {
	if task.Query != nil {
		w.answerQuery(context.Background(), task)
		return
	}
	w.stats.WorkflowTasks.Add(1)
	c := w.lookup(task)
	c.mu.Lock()
	keep := w.runWorkflowTask(c, task) && !c.gone
	if !keep {
		c.close()
	}
	c.mu.Unlock()
	if !keep {
		w.uncache(task, c)
	}
}

// runWorkflowTask runs the task on c (locked) and reports whether c's
// Execution may serve the run's next task.
func (w *Worker) runWorkflowTask(c *cached, task *api.WorkflowTask) (keep bool) {
	ctx, span := w.workflowTaskSpan(task)
	var spanErr error
	defer func() { endSpan(span, spanErr) }()
	cmds, err := w.process(ctx, c, task)
	if err != nil {
		spanErr = err
		w.stats.WorkflowTaskFails.Add(1)
		cause, f := sdk.TaskFailure(err)
		log := w.taskLog(task)
		log.Error().Err(err).Str("cause", cause).Msg("workflow task failed")
		if _, ferr := w.svc.FailWorkflowTask(ctx, &api.FailWorkflowTaskRequest{TaskToken: task.TaskToken, Cause: cause,
			Failure: f, Identity: w.opts.Identity}); ferr != nil {
			log.Warn().Err(ferr).Msg("could not report the failed workflow task; it will time out")
		}
		return false
	}
	w.fitUpdateResults(task, cmds)
	stampCommands(span, cmds)
	if reason := commandsOverLimit(task, cmds); reason != "" {
		w.failForLimit(ctx, task, reason)
		return false
	}
	req := &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, Commands: cmds, Identity: w.opts.Identity}
	keep = w.cache != nil && !c.exec.WorkflowClosed()
	if keep {
		req.StickyQueue = w.sticky
	}
	if _, err := w.svc.CompleteWorkflowTask(ctx, req); err != nil {
		spanErr = err
		switch {
		case errors.Is(err, api.ErrStaleTask), errors.Is(err, api.ErrWorkflowClosed):
		case errors.Is(err, api.ErrLimitExceeded):
			// Refused for its size (the engine records that itself; a
			// transport's body limit does not): make it a durable failure.
			w.failForLimit(ctx, task, err.Error())
		default:
			log := w.taskLog(task)
			log.Warn().Err(err).Msg("workflow task completion refused")
		}
		return false
	}
	return keep
}

// taskLog returns the logger for a workflow task's messages, built only
// when there is something to say.
func (w *Worker) taskLog(task *api.WorkflowTask) zerolog.Logger {
	return w.log.With().Str("workflow_id", task.WorkflowID).Str("run_id", task.RunID).Logger()
}

// lookup returns the cached Execution for the task's run, or an empty
// entry (cached if the cache is on).
func (w *Worker) lookup(task *api.WorkflowTask) *cached {
	if w.cache == nil {
		return &cached{}
	}
	key := runKey(task)
	if c, ok := w.cache.Get(key); ok {
		return c
	}
	c := &cached{}
	if prev, ok, _ := w.cache.PeekOrAdd(key, c); ok {
		return prev
	}
	return c
}

// uncache removes c from the cache if it is still the run's entry. Call it
// without holding c.mu: the eviction callback takes it.
func (w *Worker) uncache(task *api.WorkflowTask, c *cached) {
	if w.cache == nil {
		return
	}
	if cur, ok := w.cache.Peek(runKey(task)); ok && cur == c {
		w.cache.Remove(runKey(task))
	}
}

// close ends c's Execution; the caller holds c.mu.
func (c *cached) close() {
	if c.exec != nil {
		c.exec.Close()
		c.exec = nil
	}
}

// evicted is the sticky cache's eviction callback. The LRU calls it
// outside its own lock, from whichever goroutine evicts; an entry whose
// task is running is closed once the task is done.
func evicted(_ string, c *cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone = true
	c.close()
}

// process feeds the task to the run's Execution, rebuilding it from the full
// history when the cache does not continue where the task starts.
func (w *Worker) process(ctx context.Context, c *cached, task *api.WorkflowTask) ([]api.Command, error) {
	if err := sdk.ResolveEventPayloads(ctx, w.chunks, task.Events); err != nil {
		return nil, err
	}
	if c.exec != nil && c.exec.LastEventID()+1 == task.FirstEventID {
		cmds, err := c.exec.ProcessTask(task)
		if !errors.Is(err, sdk.ErrHistoryGap) {
			if err == nil {
				w.stats.CacheHits.Add(1)
			}
			return cmds, err
		}
	}
	c.close()
	full, err := w.fullTask(ctx, task)
	if err != nil {
		return nil, err
	}
	exec, err := w.newExecution(full)
	if err != nil {
		return nil, err
	}
	c.exec = exec
	w.stats.FullReplays.Add(1)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.Replayed.Bool(true))
	}
	return exec.ProcessTask(full)
}

func (w *Worker) newExecution(task *api.WorkflowTask) (*sdk.Execution, error) {
	return sdk.NewExecution(w.reg, task, sdk.ExecutionOptions{Converter: w.opts.Converter, Logger: &w.log,
		DeadlockTimeout: w.opts.DeadlockTimeout})
}

// fullTask returns task with its whole history, fetching the part a sticky
// task left out.
func (w *Worker) fullTask(ctx context.Context, task *api.WorkflowTask) (*api.WorkflowTask, error) {
	if task.FirstEventID <= 1 {
		return task, nil
	}
	resp, err := w.svc.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: task.WorkflowID, RunID: task.RunID,
		MaxEvents: int(task.FirstEventID - 1)})
	if err != nil {
		return nil, err
	}
	if err := sdk.ResolveEventPayloads(ctx, w.chunks, resp.Events); err != nil {
		return nil, err
	}
	full := *task
	full.FirstEventID = 1
	full.Events = append(append([]history.Event(nil), resp.Events...), task.Events...)
	return &full, nil
}

// answerQuery answers a query task — or an update's validation
// (api.WorkflowQuery.Update) — from the cached Execution when it is up
// to date, else from a fresh replay of the full history.
func (w *Worker) answerQuery(ctx context.Context, task *api.WorkflowTask) {
	q := task.Query
	req := &api.RespondQueryTaskRequest{TaskToken: task.TaskToken}
	var err error
	if q.Update {
		var rejected error
		err = w.withState(task, func(exec *sdk.Execution) error {
			var err error
			rejected, err = exec.ValidateUpdate(q.QueryType, q.Args)
			return err
		})
		if err == nil && rejected != nil {
			err, req.Rejected = rejected, true
		}
	} else {
		err = w.withState(task, func(exec *sdk.Execution) error {
			var err error
			req.Result, err = exec.Query(q.QueryType, q.Args)
			return err
		})
	}
	if err != nil {
		f := sdk.ErrorToFailure(err)
		req.Failure = &f
	}
	if _, err := w.svc.RespondQueryTask(ctx, req); err != nil {
		w.log.Warn().Err(err).Str("workflow_id", task.WorkflowID).Msg("could not answer query")
	}
}

// withState calls fn with an Execution in the state of the query task's
// run: the cached one when it is up to date, else a throwaway replay.
func (w *Worker) withState(task *api.WorkflowTask, fn func(exec *sdk.Execution) error) error {
	if err := sdk.ResolveEventPayloads(context.Background(), w.chunks, task.Events); err != nil {
		return err
	}
	if w.cache != nil {
		if c, ok := w.cache.Peek(runKey(task)); ok {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.exec != nil && c.exec.LastEventID() == task.NextEventID-1 {
				return fn(c.exec)
			}
		}
	}
	// A throwaway replay: it must not log what the run's own tasks log.
	exec, err := sdk.NewExecution(w.reg, task, sdk.ExecutionOptions{Converter: w.opts.Converter,
		DeadlockTimeout: w.opts.DeadlockTimeout})
	if err != nil {
		return err
	}
	defer exec.Close()
	if _, err := exec.ProcessTask(task); err != nil {
		return err
	}
	return fn(exec)
}
