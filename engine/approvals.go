package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Approvals: an agent's tool call awaiting a person's approval (the
// approval markers of sdk/agent, tracked by the machine in
// RunState.Approvals) makes its run wait for a person — listed, counted
// and described as paused with Pause.Kind api.PauseApproval, beside the
// runs paused on an unknown outcome or on their budget.

// approvalPause is the Pause of a run whose oldest awaited call is w.
func approvalPause(st *machine.RunState, w machine.ApprovalWait) *api.PauseInfo {
	tool := w.Tool
	if tool == "" {
		tool = "a tool call"
	}
	return &api.PauseInfo{ActivityID: history.ToolActivityPrefix + w.Key, ActivityType: w.Tool,
		Reason: fmt.Sprintf("%s (call %s) awaits a person's approval", tool, w.CallID), Since: w.Since, Kind: api.PauseApproval,
		Effect: w.Effect, EffectKnown: w.EffectKnown, CallID: w.CallID, Signal: w.Signal, Approvals: int32(len(st.Approvals))}
}

// pauseChanged reports whether what the run's list entry says it waits for
// moved while its status stayed paused: another action, another kind of
// wait (a budget pause gone, an approval still awaited), another oldest
// call awaiting approval, or their number.
func pauseChanged(before, st *machine.RunState) bool {
	if before == nil || before.EffectiveStatus() != api.StatusPaused || st.EffectiveStatus() != api.StatusPaused {
		return false // a status that moves rewrites the entry anyway
	}
	return pauseKey(before) != pauseKey(st)
}

// pauseKey names what a paused run's list entry says it waits for
// (summary's Pause).
func pauseKey(st *machine.RunState) string {
	if a := st.Paused(); a != nil {
		return fmt.Sprintf("%s/%d", api.PauseOutcomeUnknown, a.ScheduledEventID)
	}
	if held := st.Held(); len(held) > 0 {
		return fmt.Sprintf("%s/%d", api.PauseBudget, held[0].ScheduledEventID)
	}
	if len(st.Approvals) > 0 {
		return fmt.Sprintf("%s/%s/%d", api.PauseApproval, st.Approvals[0].Key, len(st.Approvals))
	}
	return ""
}

// pendingApprovals lists the calls st awaits approval for, as described.
func pendingApprovals(st *machine.RunState) []api.PendingApproval {
	var out []api.PendingApproval
	for _, w := range st.Approvals {
		out = append(out, api.PendingApproval{CallID: w.CallID, Key: w.Key, Tool: w.Tool, Effect: w.Effect, EffectKnown: w.EffectKnown,
			Signal: w.Signal, EventID: w.EventID, Since: w.Since})
	}
	return out
}

// approvalDeclarations adds to decls the declarations of the tools the
// approval-requested markers among cmds ask about (their effect class).
func (e *Engine) approvalDeclarations(st *machine.RunState, cmds []api.Command, decls map[int]api.ActivityDeclaration) map[int]api.ActivityDeclaration {
	for i := range cmds {
		tool, queue, ok := machine.ApprovalTool(&cmds[i])
		if !ok {
			continue
		}
		if queue == "" {
			queue = st.TaskQueue
		}
		if d, known := e.declared(queue, tool); known {
			if decls == nil {
				decls = map[int]api.ActivityDeclaration{}
			}
			decls[i] = d
		}
	}
	return decls
}

// describeApprovals completes resp's pending approvals (and an approval
// pause) with what the run state does not keep: the model's arguments,
// read from each approval-requested marker (or, when it does not hold
// them, from the transcript), and the tool's effect class when the
// engine learned its declaration only after the call began to wait.
func (e *Engine) describeApprovals(ctx context.Context, st *machine.RunState, resp *api.DescribeWorkflowResponse) error {
	var missing []int
	for i := range resp.PendingApprovals {
		p := &resp.PendingApprovals[i]
		evs, err := e.readRun(ctx, st, p.EventID, 1)
		if err != nil {
			return err
		}
		if len(evs) == 1 {
			if m, ok := evs[0].Attrs.(*history.MarkerRecorded); ok {
				p.Arguments = e.markerArguments(ctx, m, p)
			}
		}
		if p.Arguments == "" {
			missing = append(missing, i)
		}
		e.declaredEffect(st, p)
	}
	if len(missing) > 0 {
		e.transcriptArguments(ctx, st, resp.PendingApprovals, missing)
	}
	if pi := resp.Info.Pause; pi != nil && pi.Kind == api.PauseApproval && len(resp.PendingApprovals) > 0 {
		p := resp.PendingApprovals[0]
		pi.Effect, pi.EffectKnown = p.Effect, p.EffectKnown
		if p.Arguments != "" {
			pi.Input = history.Payload{Encoding: "json", Data: []byte(p.Arguments)}
		}
	}
	return nil
}

// markerArguments returns the arguments an approval-requested marker
// holds, resolving data stored by reference; it fills p.Tool from it when
// the run state lacks it.
func (e *Engine) markerArguments(ctx context.Context, m *history.MarkerRecorded, p *api.PendingApproval) string {
	data := m.Data
	if data.ByRef() {
		r, err := e.resolve(ctx, data)
		if err != nil {
			return ""
		}
		data = r
	}
	req := history.ApprovalRequestOf(m.ID, data)
	if p.Tool == "" {
		p.Tool = req.Tool
	}
	return req.Arguments
}

// declaredEffect sets p's effect class from the tool's declaration when
// the run state does not know it.
func (e *Engine) declaredEffect(st *machine.RunState, p *api.PendingApproval) {
	if p.EffectKnown || p.Tool == "" {
		return
	}
	queue := st.TaskQueue
	for _, w := range st.Approvals {
		if w.Key == p.Key && w.TaskQueue != "" {
			queue = w.TaskQueue
		}
	}
	if d, ok := e.declared(queue, p.Tool); ok {
		p.Effect, p.EffectKnown = d.Effect, true
	}
}

// transcriptArguments fills the arguments (and tools) of the approvals at
// the indexes missing from the run's transcript: a call whose marker was
// recorded before it carried them, or whose arguments were too long. It
// reads the whole history: only for such calls.
func (e *Engine) transcriptArguments(ctx context.Context, st *machine.RunState, ps []api.PendingApproval, missing []int) {
	b, err := e.transcript(ctx, st)
	if err != nil {
		return
	}
	for _, i := range missing {
		if t := b.tools[ps[i].Key]; t != nil {
			ps[i].Arguments = t.Arguments
			if ps[i].Tool == "" {
				ps[i].Tool = t.Name
				e.declaredEffect(st, &ps[i])
			}
		}
	}
}

// toolEffect is the effect class of a tool call that has no activity yet
// (awaiting approval, rejected, not run): the one recorded with its wait,
// else its tool's declaration on the run's task queue.
func (e *Engine) toolEffect(st *machine.RunState, key string, t *api.ToolCallInfo) {
	for _, w := range st.Approvals {
		if w.Key == key {
			if w.EffectKnown {
				t.Effect, t.EffectKnown = w.Effect, true
				return
			}
			if w.TaskQueue != "" {
				if d, ok := e.declared(w.TaskQueue, t.Name); ok {
					t.Effect, t.EffectKnown = d.Effect, true
				}
				return
			}
		}
	}
	if d, ok := e.declared(st.TaskQueue, t.Name); ok && t.Name != "" {
		t.Effect, t.EffectKnown = d.Effect, true
	}
}

// matchesPause applies a list request's PauseKind.
func matchesPause(info *api.WorkflowInfo, kind string) bool {
	return kind == "" || info.Pause != nil && strings.EqualFold(info.Pause.Kind, kind)
}
