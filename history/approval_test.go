package history_test

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/history"
)

// An approval request as the agent kit records it reads back whole; the
// empty Approval that histories recorded before it hold reads as the call
// id of the marker's id, on the default signal.
func TestApprovalRequestOf(t *testing.T) {
	want := history.ApprovalRequest{CallID: "call_2", Tool: "SendPayment", Arguments: `{"amount":4200}`, Signal: "approve-a", TaskQueue: "tools"}
	b, err := msgpack.Marshal(&want)
	if err != nil {
		t.Fatal(err)
	}
	if got := history.ApprovalRequestOf("3:call_2", history.Payload{Encoding: "msgpack", Data: b}); got != want {
		t.Fatalf("read %+v, want %+v", got, want)
	}
	old, err := msgpack.Marshal(&history.Approval{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		data history.Payload
		want history.ApprovalRequest
	}{
		{"2:call_2_0", history.Payload{Encoding: "msgpack", Data: old}, history.ApprovalRequest{CallID: "call_2_0", Signal: "approve"}},
		{"2:call_1#2", history.Payload{}, history.ApprovalRequest{CallID: "call_1", Signal: "approve"}},
		{"2:a#b", history.Payload{Encoding: "json", Data: []byte(`"x"`)}, history.ApprovalRequest{CallID: "a#b", Signal: "approve"}},
		{"2:c", history.Payload{Ref: []byte("0123456789abcdef0123456789abcdef")}, history.ApprovalRequest{CallID: "c", Signal: "approve"}},
	} {
		if got := history.ApprovalRequestOf(c.key, c.data); got != c.want {
			t.Errorf("%s: read %+v, want %+v", c.key, got, c.want)
		}
	}
}
