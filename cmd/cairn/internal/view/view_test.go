package view

import (
	"encoding/json"
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
		"HTTPCode": "httpCode", "RunID": "runId", "IDs": "ids", "RunIDs": "runIds", "IDsByRun": "idsByRun", "Status": "status", "TTL": "ttl",
		"ContinuedAsNewRunID": "continuedAsNewRunId", "IDentity": "iDentity",
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

// What the CLI and the UI show of a budget or a usage can be pasted back:
// a payload holding them (a workflow's input, shown by its stored names),
// the view's JSON of them and the history export's read back, through
// --input, as the values they were.
func TestDisplayedBudgetsPasteBack(t *testing.T) {
	type question struct {
		Text   string
		Budget history.Budget
		Usage  history.Usage
	}
	want := question{Text: "Can we pay INV-8?", Budget: history.Budget{MaxTokens: 500, MaxCostUSD: 0.25, MaxTurns: 1},
		Usage: history.Usage{Model: "m", PromptTokens: 132, CompletionTokens: 16, CostUSD: 0.0001, Attempts: 1}}
	p, err := sdk.DefaultConverter().ToPayload(want)
	if err != nil {
		t.Fatal(err)
	}
	var shown struct{ JSON json.RawMessage }
	if err := json.Unmarshal(Payload(p), &shown); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{PayloadText(p), PayloadIndent(p), string(shown.JSON)} {
		in, err := JSONInput("--input", text)
		if err != nil {
			t.Fatal(err)
		}
		var got question
		if err := sdk.DefaultConverter().FromPayload(in, &got); err != nil || got != want {
			t.Errorf("pasted back %s: %+v %v, want %+v", text, got, err, want)
		}
	}

	b, err := Marshal(api.BudgetStatus{Budget: want.Budget, Used: want.Usage})
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Budget history.Budget
		Used   history.Usage
	}
	if err := json.Unmarshal(b, &st); err != nil || st.Budget != want.Budget || st.Used != want.Usage {
		t.Errorf("the view's %s read back: %+v %v", b, st, err)
	}

	ev, err := json.Marshal(&history.Event{ID: 3, Attrs: &history.BudgetUpdated{Budget: want.Budget, By: "ada"}})
	if err != nil {
		t.Fatal(err)
	}
	var exported struct {
		Attributes struct {
			Budget history.Budget
			By     string
		}
	}
	if err := json.Unmarshal(ev, &exported); err != nil || exported.Attributes.Budget != want.Budget {
		t.Errorf("the export's %s read back: %+v %v", ev, exported, err)
	}
}

// A budget's events say what they did: the budget set (in the JSON shape
// --input reads), a stop, by whom and why; the held call and why.
func TestTimelineBudget(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	rows := Timeline([]history.Event{
		{ID: 1, Time: t0, Attrs: &history.WorkflowStarted{WorkflowType: "Assistant"}},
		{ID: 2, Time: t0, Attrs: &history.WorkflowTaskCompleted{}},
		{ID: 3, Time: t0, Attrs: &history.BudgetUpdated{Budget: history.Budget{MaxTurns: 1}, By: "workflow", WorkflowTaskCompletedEventID: 2}},
		{ID: 4, Time: t0, Attrs: &history.ActivityScheduled{ActivityType: "llm.Chat"}},
		{ID: 5, Time: t0, Attrs: &history.BudgetExceeded{ScheduledEventID: 4, Reason: "turn budget exhausted: model call 2 of at most 1",
			Used: history.Usage{PromptTokens: 132, CompletionTokens: 16, CostUSD: 0.0000294}, Turns: 2}},
		{ID: 6, Time: t0, Attrs: &history.BudgetUpdated{Budget: history.Budget{MaxTurns: 4, MaxCostUSD: 0.5}, By: "Ada (web UI)", Reason: "worth finishing"}},
		{ID: 7, Time: t0, Attrs: &history.BudgetUpdated{Stop: true, By: "bob", Reason: "enough"}},
	})
	for i, want := range []Row{
		{Detail: `{"maxTurns":1} by workflow`},
		{Name: "llm.Chat", Related: 4, Tone: "warn", Detail: "turn budget exhausted: model call 2 of at most 1; held (used 148 tokens, $0.0000294)"},
		{Detail: `{"maxCostUSD":0.5,"maxTurns":4} by Ada (web UI): worth finishing`, Tone: "ok"},
		{Detail: "stop: the held calls fail by bob: enough", Tone: "bad"},
	} {
		r := rows[[]int{2, 4, 5, 6}[i]]
		if r.Name != want.Name || r.Detail != want.Detail || r.Tone != want.Tone || r.Related != want.Related {
			t.Errorf("event %d: %+v, want %+v", r.ID, r, want)
		}
	}
}

// The agent's approval markers read as what they mean, not as their
// data's stored names.
func TestTimelineApprovals(t *testing.T) {
	mark := func(id int64, name, call string, ap history.Approval) history.Event {
		data, err := msgpack.Marshal(&ap)
		if err != nil {
			t.Fatal(err)
		}
		return history.Event{ID: id, Attrs: &history.MarkerRecorded{Name: name, ID: call, Data: history.Payload{Encoding: sdk.EncodingMsgpack, Data: data}}}
	}
	req, err := msgpack.Marshal(&history.ApprovalRequest{CallID: "call_2", Tool: "SendPayment", Signal: "approve-payments"})
	if err != nil {
		t.Fatal(err)
	}
	rows := Timeline([]history.Event{
		mark(1, history.MarkerApprovalRequested, "1:call_1", history.Approval{}), // as histories recorded it before it said more
		mark(2, history.MarkerApprovalDecided, "1:call_1", history.Approval{Approved: true, By: "ada"}),
		mark(3, history.MarkerApprovalDecided, "2:call_1#2", history.Approval{By: "bob", Reason: "duplicate invoice"}),
		{ID: 4, Attrs: &history.MarkerRecorded{Name: history.MarkerApprovalRequested, ID: "3:call_2", Data: history.Payload{Encoding: sdk.EncodingMsgpack, Data: req}}},
	})
	for i, want := range []string{`call_1 awaits a person's approval: {"CallID":"call_1","Approved":true} on the signal approve`,
		"call_1 approved by ada", "call_1 rejected by bob: duplicate invoice",
		`SendPayment call call_2 awaits a person's approval: {"CallID":"call_2","Approved":true} on the signal approve-payments`} {
		if rows[i].Detail != want {
			t.Errorf("marker %d: %q, want %q", i+1, rows[i].Detail, want)
		}
	}
}
