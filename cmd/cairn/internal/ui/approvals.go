package ui

import (
	"net/http"
	"strings"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/agent"
)

// awaitingApproval is the runs list's filter (and count) of the paused
// runs whose agent awaits a person's approval of a tool call.
const awaitingApproval = "awaiting_approval"

// decided is the answer of POST /api/approve.
type decided struct {
	WorkflowID string
	RunID      string
	CallID     string
	Tool       string
	Approved   bool
}

// apiApprove approves or rejects an agent's tool call awaiting approval
// (body: workflowId, runId, callId, approved, by, reason): a person's
// decision, sent to that run as the approval signal its agent takes
// (agent.Decide); a call that does not await one is refused, nothing sent.
func (h *Handler) apiApprove(r *http.Request, body []byte) (any, error) {
	a, err := decodeAction(body)
	if err != nil {
		return nil, err
	}
	if a.Approved == nil {
		return nil, invalid("say approved: true or false")
	}
	if strings.TrimSpace(a.By) == "" {
		return nil, invalid("say who you are: the history records who decided")
	}
	if !*a.Approved && strings.TrimSpace(a.Reason) == "" {
		return nil, invalid("say why you reject it: the agent's model is told")
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	p, err := agent.Decide(ctx, h.svc, agent.Decision{WorkflowID: a.WorkflowID, RunID: a.RunID, CallID: a.CallID, Approved: *a.Approved,
		By: a.identity(), Reason: strings.TrimSpace(a.Reason)})
	if err != nil {
		return nil, err
	}
	return decided{WorkflowID: a.WorkflowID, RunID: a.RunID, CallID: p.CallID, Tool: p.Tool, Approved: *a.Approved}, nil
}

// pausedCounts adds to v the paused runs by what they wait for, as the
// list's filter names them (awaiting_approval).
func pausedCounts(v *countsView, c *api.CountWorkflowsResponse) {
	for _, pc := range c.Paused {
		if pc.Kind == api.PauseApproval {
			v.ByStatus = append(v.ByStatus, statusCount{awaitingApproval, pc.Count})
		}
	}
}
