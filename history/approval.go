package history

import (
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
)

// DefaultApprovalSignal is the signal an agent takes approvals from unless
// it names another (sdk/agent's ApprovalSignal and Options.ApprovalSignal).
const DefaultApprovalSignal = "approve"

// ApprovalRequest is the data of MarkerApprovalRequested: what a person,
// or a UI acting for one, needs to answer the call — the call id an
// approval names, the tool and the arguments the model gave it, and the
// signal that carries approvals. The agent kit (sdk/agent) records it.
//
// Histories recorded before it hold an empty Approval there instead;
// ApprovalRequestOf reads both, taking the call id from the marker's id
// and the signal as DefaultApprovalSignal.
type ApprovalRequest struct {
	CallID string `msgpack:"id,omitempty" json:"call_id,omitempty"`
	Tool   string `msgpack:"tool,omitempty" json:"tool,omitempty"`
	// Arguments are the model's arguments (JSON), left out when longer
	// than MaxApprovalArguments (the transcript has them).
	Arguments string `msgpack:"args,omitempty" json:"arguments,omitempty"`
	// Signal is the signal that carries approvals for the call.
	Signal string `msgpack:"sig,omitempty" json:"signal,omitempty"`
	// TaskQueue is the tool's task queue when it is not the run's.
	TaskQueue string `msgpack:"q,omitempty" json:"task_queue,omitempty"`
}

// MaxApprovalArguments bounds the arguments an ApprovalRequest carries, so
// that a marker never approaches a payload limit.
const MaxApprovalArguments = 8 << 10

// ApprovalRequestOf reads the data of an approval-requested marker whose
// id is key (a ToolCallKey), with the defaults of older histories: the
// call id of key, and DefaultApprovalSignal. Data it cannot read (stored
// by reference, not msgpack, not an ApprovalRequest) gives those defaults.
func ApprovalRequestOf(key string, data Payload) ApprovalRequest {
	var r ApprovalRequest
	if data.Encoding != "msgpack" || data.ByRef() || msgpack.Unmarshal(data.Data, &r) != nil {
		r = ApprovalRequest{} // the converter's "msgpack" is what sdk/agent records
	}
	if r.CallID == "" {
		r.CallID = ToolCallIDOf(key)
	}
	if r.Signal == "" {
		r.Signal = DefaultApprovalSignal
	}
	return r
}

// ToolCallIDOf returns the tool call id of a ToolCallKey
// ("<turn>:<call id>[#n]"): the id an approval names.
func ToolCallIDOf(key string) string {
	_, id, ok := strings.Cut(key, ":")
	if !ok {
		return key
	}
	if i := strings.LastIndex(id, "#"); i > 0 {
		if _, err := strconv.Atoi(id[i+1:]); err == nil {
			id = id[:i]
		}
	}
	return id
}
