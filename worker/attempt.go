package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// attemptOutput gathers what a running attempt reports besides its result:
// the usage it records (sent with its outcome) and its live output, sent
// to the engine in batches (at most every streamFlush, or streamBatch
// deltas at once) and flushed before the outcome, so that a stream's last
// piece always precedes its "done".
type attemptOutput struct {
	w    *Worker
	task *api.ActivityTask

	mu      sync.Mutex
	usage   history.Usage
	pending []api.StreamDelta
	timer   *time.Timer
	stale   bool // the engine refused a publish: the attempt lost its lease
}

const (
	streamFlush = 25 * time.Millisecond
	streamBatch = 64
)

func (o *attemptOutput) install(ctx context.Context) context.Context {
	ctx = activities.WithUsageRecorder(ctx, o.recordUsage)
	return activities.WithStreamer(ctx, o.stream)
}

func (o *attemptOutput) recordUsage(u history.Usage) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.usage.Model == "" {
		o.usage.Model = u.Model
	}
	o.usage.PromptTokens += u.PromptTokens
	o.usage.CompletionTokens += u.CompletionTokens
	o.usage.CachedTokens += u.CachedTokens
}

func (o *attemptOutput) usageSum() history.Usage {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.usage
}

func (o *attemptOutput) stream(d activities.StreamDelta) {
	o.mu.Lock()
	if o.stale {
		o.mu.Unlock()
		return
	}
	o.pending = append(o.pending, api.StreamDelta{Kind: api.StreamKind(d.Kind), Text: d.Text, ToolCallIndex: d.ToolCallIndex,
		ToolCallID: d.ToolCallID, ToolName: d.ToolName})
	full := len(o.pending) >= streamBatch
	if !full && o.timer == nil {
		o.timer = time.AfterFunc(streamFlush, o.flush)
	}
	o.mu.Unlock()
	if full {
		o.flush()
	}
}

// flush sends the pending deltas. Calls are serialised so that deltas
// reach the engine in order.
func (o *attemptOutput) flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
	if len(o.pending) == 0 || o.stale {
		return
	}
	batch := o.pending
	o.pending = nil
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := o.w.svc.PublishStream(ctx, &api.PublishStreamRequest{TaskToken: o.task.TaskToken, Deltas: batch})
	switch {
	case errors.Is(err, api.ErrStaleAttempt), errors.Is(err, api.ErrWorkflowClosed):
		o.stale = true
	case err != nil:
		log := o.w.activityLog(o.task)
		log.Warn().Err(err).Msg("live output not published")
	}
}
