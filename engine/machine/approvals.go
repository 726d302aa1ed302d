package machine

import (
	"slices"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// ApprovalWait is a tool call of an agent (sdk/agent) waiting for a
// person's approval: the run recorded its approval-requested marker and
// not yet its decision. A run with one waits for a person
// (RunState.EffectiveStatus is paused, api.PauseApproval).
type ApprovalWait struct {
	// Key is the markers' id (history.ToolCallKey); the tool's activity id
	// will be history.ToolActivityPrefix + Key.
	Key string
	// CallID is the id an approval names; Tool the tool (its activity
	// type); Signal the signal that carries approvals.
	CallID string
	Tool   string `msgpack:",omitempty"`
	Signal string
	// EventID is the approval-requested marker's, Since when it was
	// recorded.
	EventID int64
	Since   time.Time
	// Effect is the tool's effect class as its workers declared it, when
	// the engine knew a declaration (EffectKnown).
	Effect      history.EffectClass `msgpack:",omitempty"`
	EffectKnown bool                `msgpack:",omitempty"`
	// TaskQueue is the tool's task queue when it is not the run's.
	TaskQueue string `msgpack:",omitempty"`
}

// approvalMarker keeps RunState.Approvals in step with the agent's
// approval markers: a request (recorded as event id) adds its call, a
// decision removes it. An ignored approval (MarkerApprovalIgnored) names
// a call that awaits none, by definition: it changes nothing. decl is the
// declaration of the requested tool, when the service knows one.
func (t *transition) approvalMarker(r *api.RecordMarkerCommand, id int64, decl *api.ActivityDeclaration) {
	st := t.st
	switch r.Name {
	case history.MarkerApprovalRequested:
		req := history.ApprovalRequestOf(r.ID, r.Data)
		w := ApprovalWait{Key: r.ID, CallID: req.CallID, Tool: req.Tool, Signal: req.Signal, EventID: id, Since: t.now,
			TaskQueue: req.TaskQueue}
		if decl != nil {
			w.Effect, w.EffectKnown = decl.Effect, true
		}
		st.Approvals = append(withoutApproval(st.Approvals, r.ID), w)
	case history.MarkerApprovalDecided:
		st.Approvals = withoutApproval(st.Approvals, r.ID)
	}
}

// withoutApproval returns ws without the wait of key.
func withoutApproval(ws []ApprovalWait, key string) []ApprovalWait {
	out := slices.DeleteFunc(ws, func(w ApprovalWait) bool { return w.Key == key })
	if len(out) == 0 {
		return nil
	}
	return out
}

// ApprovalTool returns the tool and its task queue (empty: the run's) an
// approval-requested marker command asks about, for the service to look
// up the tool's declaration (WFTCompletion.Declarations); ok is false for
// any other command.
func ApprovalTool(c *api.Command) (tool, queue string, ok bool) {
	if c.Type != api.CommandRecordMarker || c.RecordMarker == nil || c.RecordMarker.Name != history.MarkerApprovalRequested {
		return "", "", false
	}
	req := history.ApprovalRequestOf(c.RecordMarker.ID, c.RecordMarker.Data)
	return req.Tool, req.TaskQueue, req.Tool != ""
}
