package view

import (
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

func TestKey(t *testing.T) {
	for in, want := range map[string]string{
		"WorkflowID": "workflowId", "ID": "id", "ScheduledEventID": "scheduledEventId", "IdempotencyKey": "idempotencyKey",
		"HTTPCode": "httpCode", "RunID": "runId", "IDs": "ids", "RunIDs": "runIds", "Status": "status", "TTL": "ttl", "ContinuedAsNewRunID": "continuedAsNewRunId",
	} {
		if got := Key(in); got != want {
			t.Errorf("Key(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMarshal(t *testing.T) {
	p, err := sdk.DefaultConverter().ToPayload(map[string]any{"Invoice": "INV-9", "Amount": 4200})
	if err != nil {
		t.Fatal(err)
	}
	type embedded struct{ Extra int }
	type info struct {
		WorkflowID    string
		RunID         string
		Status        api.Status
		StartTime     time.Time
		CloseTime     time.Time
		HistoryLength int64
	}
	v := struct {
		*info
		embedded
		Input    history.Payload
		Empty    history.Payload
		Timeout  time.Duration
		Zero     time.Duration
		Effect   history.EffectClass
		Token    []byte
		Failure  *history.Failure
		Counts   map[api.Status]int
		Raw      history.Payload
		Chain    history.Payload
		Ignored  string `json:"-"`
		internal int
	}{
		info:     &info{WorkflowID: "w", RunID: "r", Status: api.StatusPaused, StartTime: time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)},
		embedded: embedded{Extra: 7},
		Input:    p,
		Timeout:  90 * time.Second,
		Effect:   history.SideEffect,
		Token:    []byte{1, 2},
		Failure:  &history.Failure{Type: "Boom", Message: "it broke"},
		Counts:   map[api.Status]int{api.StatusRunning: 2, api.StatusCompleted: 0},
		Raw:      history.Payload{Encoding: "zstd", Data: []byte{0xff}},
		Chain:    history.Payload{Encoding: history.EncodingTranscript, Ref: []byte{0xab, 0xcd}, Data: []byte{1, 2, 3}},
		Ignored:  "no",
	}
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"workflowId":"w","runId":"r","status":"paused","startTime":"2026-11-01T09:00:00Z","historyLength":0,"extra":7,` +
		`"input":{"encoding":"msgpack","json":{"Amount":4200,"Invoice":"INV-9"}},"timeout":"1m30s","effect":"SideEffect","token":"AQI=",` +
		`"failure":{"type":"Boom","message":"it broke","nonRetryable":false},"counts":{"completed":0,"running":2},` +
		`"raw":{"encoding":"zstd","base64":"/w=="},"chain":{"encoding":"cairn.transcript.v1+msgpack","ref":"abcd","addedBytes":3}}`
	if string(b) != want {
		t.Fatalf("Marshal:\n got %s\nwant %s", b, want)
	}
}

func TestTimeline(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	in, _ := sdk.DefaultConverter().ToPayload("INV-9")
	evs := []history.Event{
		{ID: 1, Time: t0, Attrs: &history.WorkflowStarted{WorkflowType: "Pay", Input: in}},
		{ID: 2, Time: t0.Add(time.Second), Attrs: &history.ActivityScheduled{ActivityType: "Send", Effect: history.SideEffect, IdempotencyKey: "k1234567890abcdef"}},
		{ID: 3, Time: t0.Add(2 * time.Second), Attrs: &history.ActivityStarted{ScheduledEventID: 2, Attempt: 2}},
		{ID: 4, Time: t0.Add(4 * time.Second), Attrs: &history.ActivityCompleted{ScheduledEventID: 2, Result: in}},
	}
	rows := Timeline(evs)
	r := rows[3]
	if r.Name != "Send" || r.Duration != 3*time.Second || r.Attempt != 2 || r.Related != 2 || r.Tone != "ok" || r.Offset != 4*time.Second ||
		r.Detail != `attempt 2 → "INV-9"` {
		t.Fatalf("completion row: %+v", r)
	}
	if rows[0].Detail != `"INV-9"` || !strings.HasPrefix(rows[1].Detail, "SideEffect key=k123456789") {
		t.Fatalf("rows: %+v", rows)
	}
}

func TestStacks(t *testing.T) {
	raw := `coroutine root:
goroutine 42 [select]:
runtime.gopark(0x1?, 0x2?)
	/usr/local/go/src/runtime/proc.go:435 +0xce
github.com/cairnflow/cairn/sdk.(*coroutine).yield(0xc000123)
	/src/cairn/sdk/scheduler.go:120 +0x45
github.com/cairnflow/cairn/sdk.(*Future[...]).Get(0xc0001, {0x1, 0x2})
	/src/cairn/sdk/future.go:80 +0x99
github.com/acme/agents.(*Agent).Pay(0xc0002, {0x3, 0x4})
	/home/ann/agents/pay.go:41 +0x1d
reflect.Value.call({0x5?, 0x6?, 0x7?})
	/usr/local/go/src/reflect/value.go:586 +0xb07
github.com/cairnflow/cairn/sdk.(*Execution).runRoot(0xc0003)
	/src/cairn/sdk/execution.go:300 +0x10
created by github.com/cairnflow/cairn/sdk.(*Execution).start in goroutine 1
	/src/cairn/sdk/execution.go:280 +0x20

coroutine go-1:
goroutine 43 [select]:
github.com/cairnflow/cairn/sdk.signalView[...].Receive(0xc0004)
	/src/cairn/sdk/matching.go:70 +0x45
main.Watch.func1({0x8, 0x9})
	/home/ann/agents/main.go:12 +0x1d
`
	cs := Stacks(raw)
	if len(cs) != 2 {
		t.Fatalf("Stacks: %+v", cs)
	}
	if c := cs[0]; c.Name != "root" || c.WaitingIn != "sdk.(*Future[...]).Get" || len(c.Frames) != 1 ||
		c.Frames[0] != (Frame{Function: "agents.(*Agent).Pay", File: "ann/agents/pay.go", Line: 41}) {
		t.Fatalf("root: %+v", c)
	}
	if c := cs[1]; c.WaitingIn != "sdk.signalView[...].Receive" || len(c.Frames) != 1 || c.Frames[0].Function != "main.Watch.func1" {
		t.Fatalf("go-1: %+v", c)
	}
	if txt := StacksText(cs); !strings.Contains(txt, "coroutine root, waiting in sdk.(*Future[...]).Get:\n    agents.(*Agent).Pay\n        ann/agents/pay.go:41\n") {
		t.Fatalf("StacksText:\n%s", txt)
	}
}

// An approval the agent ignored reads as what it was and why, flagged.
func TestTimelineIgnoredApproval(t *testing.T) {
	data, err := msgpack.Marshal(&history.IgnoredApproval{CallID: "call_9", Approved: true, By: "eve", Why: `no tool call "call_9" is awaiting approval`})
	if err != nil {
		t.Fatal(err)
	}
	rows := Timeline([]history.Event{{ID: 1, Attrs: &history.MarkerRecorded{Name: history.MarkerApprovalIgnored, ID: "call_9",
		Data: history.Payload{Encoding: sdk.EncodingMsgpack, Data: data}}}})
	if r := rows[0]; r.Tone != "warn" || r.Detail != `approve call_9 by eve ignored: no tool call "call_9" is awaiting approval` {
		t.Fatalf("row %+v", r)
	}
}
