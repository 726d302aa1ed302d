package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// The engine's limits, checked before sending: what the engine would refuse
// is turned here into the outcome the engine would record anyway, so that
// nothing is left to a lease or task timeout (docs/reliability.md, "Limits
// are outcomes"). The tasks carry the limits (MaxResultBytes,
// MaxPayloadBytes); a task from an engine that does not send them is not
// checked, and the engine converts an oversized report by itself.

// completeActivity reports a successful attempt. A result over the
// engine's limit is left out with the reason (the engine records the
// activity as completed without its result: its effect happened); a
// completion refused for its size all the same (a transport's body limit)
// is sent once more without its result.
func (w *Worker) completeActivity(ctx context.Context, task *api.ActivityTask, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	size := len(req.Result.Data)
	if max := task.MaxResultBytes; max > 0 && size > max && req.ResultOmitted == "" {
		req.Result, req.ResultOmitted = history.Payload{}, fmt.Sprintf("the activity result is %d bytes, over the limit of %d", size, max)
		w.warnOmitted(task, req.ResultOmitted)
	}
	resp, err := w.svc.CompleteActivity(ctx, req)
	if errors.Is(err, api.ErrLimitExceeded) && req.ResultOmitted == "" {
		req.Result, req.ResultOmitted = history.Payload{}, fmt.Sprintf("the %d-byte result was refused: %v", size, err)
		w.warnOmitted(task, req.ResultOmitted)
		resp, err = w.svc.CompleteActivity(ctx, req)
	}
	return resp, err
}

func (w *Worker) warnOmitted(task *api.ActivityTask, reason string) {
	log := w.activityLog(task)
	log.Warn().Str("reason", reason).Msg("activity result too large to record: reported as completed without its result")
}

// fitFailure drops failure details over the engine's limit, saying so in
// the message.
func (w *Worker) fitFailure(task *api.ActivityTask, f *history.Failure) {
	if max := task.MaxResultBytes; max > 0 && len(f.Details.Data) > max {
		f.Message += fmt.Sprintf(" (failure details of %d bytes dropped: over the limit of %d)", len(f.Details.Data), max)
		f.Details = history.Payload{}
	}
}

// fitHeartbeat drops heartbeat details over the engine's limit: the
// heartbeat still extends the lease.
func (h *heartbeater) fitHeartbeat(p history.Payload) history.Payload {
	if max := h.task.MaxResultBytes; max > 0 && len(p.Data) > max {
		log := h.w.activityLog(h.task)
		log.Warn().Int("bytes", len(p.Data)).Int("limit", max).Msg("heartbeat details over the limit: sent without them")
		return history.Payload{}
	}
	return p
}

// fitUpdateResults turns an update's result over the engine's limit into
// the update's failure (ResultTooLarge), and drops failure details over
// it: the update fails, not the run (a refused command would fail the
// workflow task, and the run after a few). Replay matches an update's
// completion by its id only, so the recorded failure replays.
func (w *Worker) fitUpdateResults(task *api.WorkflowTask, cmds []api.Command) {
	max := task.MaxPayloadBytes
	if max <= 0 {
		return
	}
	for i := range cmds {
		u := cmds[i].CompleteUpdate
		if u == nil {
			continue
		}
		fit := *u
		if n := len(fit.Result.Data); n > max {
			fit.Result = history.Payload{}
			fit.Failure = &history.Failure{Type: sdk.FailureTypeResultTooLarge, NonRetryable: true,
				Message: fmt.Sprintf("the update's result is %d bytes, over the limit of %d (the engine's MaxPayloadBytes)", n, max)}
		}
		if f := fit.Failure; f != nil && len(f.Details.Data) > max {
			g := *f
			g.Message += fmt.Sprintf(" (failure details of %d bytes dropped: over the limit of %d)", len(g.Details.Data), max)
			g.Details = history.Payload{}
			fit.Failure = &g
		}
		if fit.Failure != u.Failure || len(fit.Result.Data) != len(u.Result.Data) {
			log := w.taskLog(task)
			log.Warn().Str("update_id", u.UpdateID).Msg("update result over the payload limit: the update fails with ResultTooLarge")
			cmds[i].CompleteUpdate = &fit
		}
	}
}

// commandsOverLimit names the first command payload over the engine's
// limit, if any.
func commandsOverLimit(task *api.WorkflowTask, cmds []api.Command) string {
	max := task.MaxPayloadBytes
	if max <= 0 {
		return ""
	}
	for i := range cmds {
		for _, p := range commandPayloads(&cmds[i]) {
			if len(p.payload.Data) > max {
				return fmt.Sprintf("command %d (%s): the %s is %d bytes, over the limit of %d (the engine's MaxPayloadBytes)",
					i, cmds[i].Type, p.what, len(p.payload.Data), max)
			}
		}
	}
	return ""
}

type namedPayload struct {
	what    string
	payload history.Payload
}

func commandPayloads(c *api.Command) []namedPayload {
	switch {
	case c.ScheduleActivity != nil:
		return []namedPayload{{"activity input", c.ScheduleActivity.Input}}
	case c.RecordMarker != nil:
		return []namedPayload{{"marker data", c.RecordMarker.Data}}
	case c.StartChildWorkflow != nil:
		return []namedPayload{{"child workflow input", c.StartChildWorkflow.Input}}
	case c.SignalExternalWorkflow != nil:
		return []namedPayload{{"signal input", c.SignalExternalWorkflow.Input}}
	case c.CompleteWorkflow != nil:
		return []namedPayload{{"workflow result", c.CompleteWorkflow.Result}}
	case c.ContinueAsNew != nil:
		return []namedPayload{{"continue-as-new input", c.ContinueAsNew.Input}}
	}
	return nil
}

// failForLimit fails a workflow task whose commands break a limit, with
// the cause the engine counts (api.CauseLimitExceeded): after a few in a
// row the engine terminates the run with the reason, rather than this
// worker replaying the same history into the same refusal forever.
func (w *Worker) failForLimit(ctx context.Context, task *api.WorkflowTask, reason string) {
	log := w.taskLog(task)
	log.Error().Str("reason", reason).Msg("workflow task breaks an engine limit: reported as a failed workflow task")
	_, err := w.svc.FailWorkflowTask(ctx, &api.FailWorkflowTaskRequest{TaskToken: task.TaskToken, Cause: api.CauseLimitExceeded,
		Failure: history.Failure{Type: "LimitExceeded", Message: reason, NonRetryable: true}, Identity: w.opts.Identity})
	if err != nil && !errors.Is(err, api.ErrStaleTask) && !errors.Is(err, api.ErrWorkflowClosed) {
		log.Warn().Err(err).Msg("could not report the failed workflow task; it will time out")
	}
}
