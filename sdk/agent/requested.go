package agent

import (
	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// approvalRequest is the data of the approval-requested marker of slot's
// call: what a person (or the web UI, or `cairn workflow approve`) needs
// to answer it — the call id, the tool, its arguments, the signal this
// agent takes approvals from, and the tool's task queue when it is not
// the run's (the engine looks up the tool's declared effect class there).
//
// Only the marker's data changed when it started to carry this (the
// replay matches a marker by its name and id): histories recorded before
// replay as they are, and readers take their empty data as the defaults
// (history.ApprovalRequestOf).
func (a *Agent) approvalRequest(slot *approvalSlot) history.Payload {
	r := history.ApprovalRequest{CallID: slot.callID, Tool: slot.call.Name, Signal: a.opts.ApprovalSignal}
	if len(slot.call.Arguments) <= history.MaxApprovalArguments {
		r.Arguments = slot.call.Arguments
	}
	if o := a.opts.ToolOptions; o != nil {
		r.TaskQueue = o.TaskQueue
	}
	b, _ := msgpack.Marshal(&r) // a plain struct: cannot fail
	return history.Payload{Encoding: sdk.EncodingMsgpack, Data: b}
}
