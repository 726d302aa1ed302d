package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// renumber returns copies of evs numbered from 1.
func renumber(evs []Event) []Event {
	out := make([]Event, len(evs))
	for i, ev := range evs {
		ev.ID = int64(i + 1)
		out[i] = ev
	}
	return out
}

func exportString(t testing.TB, run RunRef, evs []Event) string {
	t.Helper()
	var buf bytes.Buffer
	if err := ExportJSON(&buf, run, evs); err != nil {
		t.Fatalf("ExportJSON: %v", err)
	}
	if !json.Valid(buf.Bytes()) {
		t.Fatalf("ExportJSON wrote invalid JSON:\n%s", buf.String())
	}
	return buf.String()
}

// checkJSONRoundTrip exports evs, imports the result and checks that every
// event encodes to exactly the bytes of the original. It returns the export.
func checkJSONRoundTrip(t testing.TB, evs []Event) string {
	t.Helper()
	out := exportString(t, sampleRun, evs)
	run, got, err := ImportJSON(strings.NewReader(out))
	if err != nil {
		t.Fatalf("ImportJSON: %v\n%s", err, out)
	}
	if run != sampleRun || len(got) != len(evs) {
		t.Fatalf("ImportJSON = %v, %d events; want %v, %d", run, len(got), sampleRun, len(evs))
	}
	for i := range evs {
		want, have := mustEncode(t, evs[i]), mustEncode(t, got[i])
		if !bytes.Equal(want, have) {
			t.Fatalf("event %d (%s) changed through JSON:\n got %#v\nwant %#v\n%s", evs[i].ID, evs[i].Type(), got[i].Attrs, evs[i].Attrs, out)
		}
	}
	if again := exportString(t, sampleRun, got); again != out {
		t.Fatalf("export of the import differs:\n%s\n---\n%s", again, out)
	}
	return out
}

func TestJSONRoundTripEveryType(t *testing.T) {
	out := checkJSONRoundTrip(t, samples())
	for _, ty := range allTypes() {
		if !strings.Contains(out, fmt.Sprintf(`"type": %q`, ty.String())) {
			t.Errorf("export does not name type %s", ty)
		}
	}
}

func TestJSONRoundTripEdgeValues(t *testing.T) {
	evs := renumber([]Event{
		{Attrs: &ActivityScheduled{Input: Payload{Data: []byte{}}, Options: ActivityOptions{
			ScheduleToStartTimeout: math.MinInt64, StartToCloseTimeout: math.MaxInt64, HeartbeatTimeout: 1,
			RetryPolicy: &RetryPolicy{BackoffCoefficient: math.Copysign(0, -1), MaximumAttempts: math.MinInt32, NonRetryableErrorTypes: []string{}}}}},
		{Attrs: &ActivityScheduled{Options: ActivityOptions{RetryPolicy: &RetryPolicy{BackoffCoefficient: math.NaN()}}}},
		{Attrs: &ActivityScheduled{Options: ActivityOptions{RetryPolicy: &RetryPolicy{BackoffCoefficient: math.Inf(-1)}}}},
		{Attrs: &ActivityScheduled{Options: ActivityOptions{RetryPolicy: &RetryPolicy{BackoffCoefficient: 1e300}}}},
		{Attrs: &ActivityScheduled{Options: ActivityOptions{RetryPolicy: &RetryPolicy{BackoffCoefficient: 5e-324}}}},
		{Attrs: &ActivityScheduled{Options: ActivityOptions{RetryPolicy: &RetryPolicy{}}}},
		{Time: time.Unix(0, math.MaxInt64), Attrs: &ActivityStarted{ScheduledEventID: math.MinInt64, Attempt: math.MaxInt32, LeaseEpoch: math.MaxInt64}},
		{Time: time.Unix(0, math.MinInt64), Attrs: &ActivityResolved{Failure: &Failure{}, Result: Payload{Encoding: "x"}}},
		{Time: time.Unix(0, 0), Attrs: &ActivityResolved{Resolution: 9}},
		{Attrs: &TimerStarted{FireAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{Attrs: &TimerStarted{FireAt: time.Date(2, 1, 1, 0, 0, 0, 1, time.FixedZone("x", 3600))}},
		{Attrs: &ChildWorkflowStarted{ParentClosePolicy: 200}},
		{Attrs: &ActivityScheduled{Effect: 255, IdempotencyKey: "\x00\xff not utf-8 \xc3", ActivityType: "ctl \x01\x1f\" \\ \u2028 é 🎉 </script>"}},
		{Attrs: &SignalReceived{Name: "\xff", Input: Payload{Encoding: "\xfe", Data: []byte("\xff")}}},
		{Attrs: &WorkflowTaskFailed{Failure: Failure{Details: Payload{Encoding: "json"}}}},
		{Attrs: &WorkflowFailed{Failure: Failure{Details: Payload{Data: []byte("no encoding")}}}},
	})
	checkJSONRoundTrip(t, evs)
}

// TestJSONPayloadForms checks which payloads are shown as JSON, and that
// every form comes back byte for byte.
func TestJSONPayloadForms(t *testing.T) {
	lib := func(v any) []byte { // the library's defaults: int64 in 9 bytes
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var ordered mpWriter // a map whose keys are not sorted: order is kept
	ordered.writeMapHeader(3)
	for i, k := range []string{"zeta", "alpha", "mid"} {
		ordered.writeString(k)
		ordered.writeInt(int64(i - 1))
	}
	var dup mpWriter
	dup.writeMapHeader(2)
	dup.writeString("k")
	dup.writeInt(1)
	dup.writeString("k")
	dup.writeInt(2)
	var intKey mpWriter
	intKey.writeMapHeader(1)
	intKey.writeInt(1)
	intKey.writeInt(2)
	var float mpWriter
	float.writeArrayHeader(6)
	for _, f := range []float64{2, -0.5, 1e21, 1e-7, math.Copysign(0, -1), 123456789} {
		float.writeFloat64(f)
	}
	var big mpWriter
	big.writeArrayHeader(3)
	big.writeUint(math.MaxUint64)
	big.writeInt(math.MinInt64)
	big.writeString(strings.Repeat("long string ", 30))
	var wideMap mpWriter // map16 and array16 headers
	wideMap.writeMapHeader(17)
	wantWide := "{"
	for i := range 17 {
		k := fmt.Sprintf("k%02d", i)
		wideMap.writeString(k)
		wideMap.writeArrayHeader(i)
		wantWide += fmt.Sprintf("%q:[", k)
		for j := range i {
			wideMap.writeInt(int64(j))
			wantWide += fmt.Sprint(j)
			if j < i-1 {
				wantWide += ","
			}
		}
		wantWide += "]"
		if i < 16 {
			wantWide += ","
		}
	}
	wantWide += "}"
	deep := bytes.Repeat([]byte{0x91}, maxRenderDepth+2)
	deep = append(deep, 0x01)
	notDeep := bytes.Repeat([]byte{0x91}, maxRenderDepth)
	notDeep = append(notDeep, 0x01)

	cases := []struct {
		name     string
		p        Payload
		showJSON string // "" when base64 is expected
	}{
		{"json object", Payload{Encoding: "json", Data: []byte(`{"b":1,"a":[true,null,"x\u00e9\n"],"f":1.50}`)}, `{"b":1,"a":[true,null,"x\u00e9\n"],"f":1.50}`},
		{"json string", Payload{Encoding: "json", Data: []byte(`"<&>"`)}, `"<&>"`},
		{"json null", Payload{Encoding: "json", Data: []byte(`null`)}, `null`},
		{"json number", Payload{Encoding: "json", Data: []byte(`-0`)}, `-0`},
		{"json not compact", Payload{Encoding: "json", Data: []byte(`{"a": 1}`)}, ""},
		{"json trailing newline", Payload{Encoding: "json", Data: []byte("{}\n")}, ""},
		{"json invalid", Payload{Encoding: "json", Data: []byte(`{"a":`)}, ""},
		{"json invalid utf-8", Payload{Encoding: "json", Data: []byte("\"\xff\"")}, ""},
		{"json empty", Payload{Encoding: "json", Data: []byte{}}, ""},
		{"msgpack map", Payload{Encoding: "msgpack", Data: mustMsgpack(map[string]any{"invoice": "INV-9", "amount": 1250, "ok": true, "n": nil})}, `{"amount":1250,"invoice":"INV-9","n":null,"ok":true}`},
		{"msgpack order kept", Payload{Encoding: "msgpack", Data: ordered.b}, `{"zeta":-1,"alpha":0,"mid":1}`},
		{"msgpack floats", Payload{Encoding: "msgpack", Data: float.b}, `[2.0,-0.5,1e+21,1e-07,-0.0,1.23456789e+08]`},
		{"msgpack extremes", Payload{Encoding: "msgpack", Data: big.b}, `[18446744073709551615,-9223372036854775808,"` + strings.Repeat("long string ", 30) + `"]`},
		{"msgpack map16 and array16", Payload{Encoding: "msgpack", Data: wideMap.b}, wantWide},
		{"msgpack nil map header", Payload{Encoding: "msgpack", Data: []byte{0x91, mpNil}}, "[null]"},
		{"msgpack non-canonical map16", Payload{Encoding: "msgpack", Data: []byte{mpMap16, 0, 1, 0xa1, 'a', 1}}, ""},
		{"msgpack non-canonical array32", Payload{Encoding: "msgpack", Data: []byte{mpArray32, 0, 0, 0, 1, 1}}, ""},
		{"msgpack nesting at the limit", Payload{Encoding: "msgpack", Data: notDeep}, strings.Repeat("[", maxRenderDepth) + "1" + strings.Repeat("]", maxRenderDepth)},
		{"msgpack too deep", Payload{Encoding: "msgpack", Data: deep}, ""},
		{"msgpack library default ints", Payload{Encoding: "msgpack", Data: lib(map[string]int64{"a": 1})}, ""},
		{"msgpack float32", Payload{Encoding: "msgpack", Data: lib(float32(1.5))}, ""},
		{"msgpack binary", Payload{Encoding: "msgpack", Data: lib([]byte("x"))}, ""},
		{"msgpack timestamp", Payload{Encoding: "msgpack", Data: lib(baseTime)}, ""},
		{"msgpack str8 for a short string", Payload{Encoding: "msgpack", Data: []byte{mpStr8, 1, 'x'}}, ""},
		{"msgpack duplicate keys", Payload{Encoding: "msgpack", Data: dup.b}, ""},
		{"msgpack integer keys", Payload{Encoding: "msgpack", Data: intKey.b}, ""},
		{"msgpack invalid utf-8", Payload{Encoding: "msgpack", Data: []byte{0xa1, 0xff}}, ""},
		{"msgpack NaN", Payload{Encoding: "msgpack", Data: append([]byte{mpFloat64}, 0x7f, 0xf8, 0, 0, 0, 0, 0, 1)}, ""},
		{"msgpack trailing bytes", Payload{Encoding: "msgpack", Data: []byte{0x01, 0x02}}, ""},
		{"msgpack truncated", Payload{Encoding: "msgpack", Data: []byte{0x92, 0x01}}, ""},
		{"msgpack empty", Payload{Encoding: "msgpack", Data: []byte{}}, ""},
		{"other encoding", Payload{Encoding: "binary/plain", Data: []byte("hello")}, ""},
		{"no data", Payload{Encoding: "msgpack", Data: nil}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := checkJSONRoundTrip(t, []Event{{ID: 1, Attrs: &SignalReceived{Name: "s", Input: c.p}}})
			var doc struct {
				Events []struct {
					Attributes struct {
						Input map[string]json.RawMessage
					}
				}
			}
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatal(err)
			}
			in := doc.Events[0].Attributes.Input
			js, hasJSON := in["json"]
			_, hasB64 := in["base64"]
			switch {
			case c.showJSON != "":
				var compact bytes.Buffer
				if !hasJSON || json.Compact(&compact, js) != nil || compact.String() != c.showJSON {
					t.Errorf("json = %s, want %s\n%s", js, c.showJSON, out)
				}
			case c.p.Data == nil:
				if hasJSON || hasB64 {
					t.Errorf("nil data shown:\n%s", out)
				}
			default:
				if !hasB64 || hasJSON {
					t.Errorf("want base64 only:\n%s", out)
				}
			}
		})
	}
}

// goldenHistory is a small, typical run: the sample export kept in
// testdata/export.golden.
func goldenHistory() []Event {
	evs := realisticHistory(9)
	evs = append(evs,
		Event{Attrs: &ActivityOutcomeUnknown{ScheduledEventID: 7, StartedEventID: 8, Attempt: 1, Reason: "lease expired", IdempotencyKey: "invoice-INV-9:SendPayment:0000000000000002:1"}},
		Event{Attrs: &ActivityResolved{ScheduledEventID: 7, Resolution: ResolvedHappened, By: "alice@example.com", Reason: "payment visible in the PSP dashboard",
			Result: Payload{Encoding: "json", Data: []byte(`{"paymentId":"pay_00000002","status":"succeeded"}`)}}},
		Event{Attrs: &ActivityFailed{ScheduledEventID: 4, StartedEventID: 5, Attempt: 3, Failure: Failure{Type: "CardDeclined", Message: "card declined", NonRetryable: true,
			Details: Payload{Encoding: "binary/plain", Data: []byte{0xde, 0xad, 0xbe, 0xef}}}}},
		Event{Attrs: &ChildWorkflowStarted{WorkflowID: "receipt-INV-9", RunID: "child-run", WorkflowType: "SendReceipt", TaskQueue: "agents", ParentClosePolicy: ParentCloseAbandon}},
		Event{Attrs: &WorkflowCompleted{Result: Payload{Encoding: "msgpack", Data: mustMsgpack(map[string]any{"receipt": "R-1", "total": 12.5})}, WorkflowTaskCompletedEventID: 9}},
	)
	for i := 9; i < len(evs); i++ {
		evs[i].Time = baseTime.Add(time.Duration(i+1) * time.Second)
	}
	return renumber(evs)
}

func TestJSONGolden(t *testing.T) {
	evs := goldenHistory()
	out := checkJSONRoundTrip(t, evs)
	path := filepath.Join("testdata", "export.golden")
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestJSONGolden -update)", err)
	}
	if out != string(want) {
		t.Errorf("export differs from %s (run with -update if the change is intended):\n%s", path, out)
	}
	// The golden file itself imports to the same events.
	run, got, err := ImportJSON(bytes.NewReader(want))
	if err != nil || run != sampleRun {
		t.Fatalf("ImportJSON(golden) = %v, %v", run, err)
	}
	for i := range evs {
		if !bytes.Equal(mustEncode(t, got[i]), mustEncode(t, evs[i])) {
			t.Errorf("golden event %d differs", i+1)
		}
	}
}

// TestJSONIsReadable checks what a person looks for in an export.
func TestJSONIsReadable(t *testing.T) {
	out := exportString(t, sampleRun, goldenHistory())
	for _, want := range []string{
		`"workflowId": "invoice-INV-9"`,
		`"runId": "0193a1b2-run"`,
		`"id": 1,`,
		`"time": "2025-03-14T09:26:53.626793238Z"`,
		`"type": "WorkflowStarted"`,
		`"type": "ActivityScheduled"`,
		`"activityType": "SendPayment"`,
		`"effect": "SideEffect"`,
		`"startToCloseTimeout": "1m0s"`,
		`"heartbeatTimeout": "10s"`,
		`"initialInterval": "1s"`,
		`"backoffCoefficient": 2.0`,
		`"nonRetryableErrorTypes": [`,
		`"encoding": "msgpack"`,
		`"invoice": "INV-000001"`, // msgpack input shown as JSON
		`"amount": 12346`,
		`"paymentId": "pay_00000001"`,
		`"resolution": "happened"`,
		`"by": "alice@example.com"`,
		`"parentClosePolicy": "Abandon"`,
		`"nonRetryable": true`,
		`"base64": "3q2+7w=="`,
		`"total": 12.5`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks %s:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{`"identity": ""`, `"data":`, `"Attrs"`, `\u003c`} {
		if strings.Contains(out, unwanted) {
			t.Errorf("export contains %s", unwanted)
		}
	}
}

func TestExportRefusesBadInput(t *testing.T) {
	for name, c := range map[string]struct {
		run RunRef
		evs []Event
	}{
		"empty workflow id": {RunRef{RunID: "r"}, nil},
		"empty run id":      {RunRef{WorkflowID: "w"}, nil},
		"gap":               {sampleRun, []Event{{ID: 1, Attrs: &TimerFired{}}, {ID: 3, Attrs: &TimerFired{}}}},
		"not from 1":        {sampleRun, []Event{{ID: 2, Attrs: &TimerFired{}}}},
		"nil attributes":    {sampleRun, []Event{{ID: 1}}},
		"time out of range": {sampleRun, []Event{{ID: 1, Time: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), Attrs: &TimerFired{}}}},
	} {
		var buf bytes.Buffer
		if err := ExportJSON(&buf, c.run, c.evs); !errors.Is(err, ErrInvalid) || buf.Len() != 0 {
			t.Errorf("%s: ExportJSON = %v, wrote %d bytes", name, err, buf.Len())
		}
	}
	// An empty history is a valid document.
	_, evs, err := ImportJSON(strings.NewReader(exportString(t, sampleRun, nil)))
	if err != nil || len(evs) != 0 {
		t.Errorf("empty history: %v, %v", evs, err)
	}
}

func TestImportErrors(t *testing.T) {
	ev := func(attrs string) string {
		return `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"TimerFired"},{"id":2,"type":"ActivityScheduled","attributes":` + attrs + `}]}`
	}
	cases := []struct {
		name, doc string
		index     int
		field     string
		msg       string
	}{
		{"not json", `nope`, -1, "", "invalid character"},
		{"not an object", `[]`, -1, "", "expected an object, found an array"},
		{"trailing data", `{"workflowId":"w","runId":"r","events":[]} {}`, -1, "", "data after the object"},
		{"unknown top field", `{"workflowId":"w","runId":"r","events":[],"extra":1}`, -1, "", `unknown field "extra"`},
		{"field names are case sensitive", `{"workflowID":"w","runId":"r","events":[]}`, -1, "workflowId", "missing"},
		{"duplicate top field", `{"workflowId":"w","workflowId":"x","runId":"r","events":[]}`, -1, "", `duplicate field "workflowId"`},
		{"missing run id", `{"workflowId":"w","events":[]}`, -1, "runId", "missing"},
		{"empty run id", `{"workflowId":"w","runId":"","events":[]}`, -1, "runId", "empty"},
		{"null workflow id", `{"workflowId":null,"runId":"r","events":[]}`, -1, "workflowId", "null"},
		{"missing events", `{"workflowId":"w","runId":"r"}`, -1, "events", "missing"},
		{"events not an array", `{"workflowId":"w","runId":"r","events":{}}`, -1, "events", "not an array"},
		{"event not an object", `{"workflowId":"w","runId":"r","events":[1]}`, 0, "", "expected an object"},
		{"missing id", `{"workflowId":"w","runId":"r","events":[{"type":"TimerFired"}]}`, 0, "id", "missing"},
		{"id not from 1", `{"workflowId":"w","runId":"r","events":[{"id":2,"type":"TimerFired"}]}`, 0, "id", "event 2 where event 1 was expected"},
		{"id gap", `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"TimerFired"},{"id":3,"type":"TimerFired"}]}`, 1, "id", "event 3 where event 2"},
		{"id as string", `{"workflowId":"w","runId":"r","events":[{"id":"1","type":"TimerFired"}]}`, 0, "id", "expected an integer, found a string"},
		{"id float", `{"workflowId":"w","runId":"r","events":[{"id":1.0,"type":"TimerFired"}]}`, 0, "id", "not an integer"},
		{"bad time", `{"workflowId":"w","runId":"r","events":[{"id":1,"time":"yesterday","type":"TimerFired"}]}`, 0, "time", "cannot parse"},
		{"time out of range", `{"workflowId":"w","runId":"r","events":[{"id":1,"time":"3000-01-01T00:00:00Z","type":"TimerFired"}]}`, 0, "time", "1678-2262"},
		{"unknown type", `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"ActivityExploded"}]}`, 0, "type", `unknown event type "ActivityExploded"`},
		{"type Unknown", `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"Unknown"}]}`, 0, "type", "unknown event type"},
		{"unknown event field", `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"TimerFired","extra":true}]}`, 0, "", `unknown field "extra"`},
		{"attributes not an object", ev(`[]`), 1, "attributes", "expected an object"},
		{"unknown attribute", ev(`{"activityType":"Pay","color":"red"}`), 1, "attributes", `unknown field "color"`},
		{"duplicate attribute", ev(`{"activityType":"Pay","activityType":"Pay"}`), 1, "attributes", `duplicate field "activityType"`},
		{"wrong type for string", ev(`{"activityType":5}`), 1, "attributes.activityType", "expected a string, found a number"},
		{"bad base64 string", ev(`{"activityType":{"base64":"%%"}}`), 1, "attributes.activityType", "bad base64"},
		{"bad duration", ev(`{"options":{"startToCloseTimeout":"1 minute"}}`), 1, "attributes.options.startToCloseTimeout", `unknown unit " minute"`},
		{"duration as number", ev(`{"options":{"startToCloseTimeout":60}}`), 1, "attributes.options.startToCloseTimeout", `duration string like "1m30s"`},
		{"unknown nested field", ev(`{"options":{"retryPolicy":{"maxAttempts":3}}}`), 1, "attributes.options.retryPolicy", `unknown field "maxAttempts"`},
		{"int32 overflow", ev(`{"options":{"retryPolicy":{"maximumAttempts":2147483648}}}`), 1, "attributes.options.retryPolicy.maximumAttempts", "out of range"},
		{"int64 overflow", ev(`{"workflowTaskCompletedEventId":9223372036854775808}`), 1, "attributes.workflowTaskCompletedEventId", "not an integer in range"},
		{"bad float", ev(`{"options":{"retryPolicy":{"backoffCoefficient":"2"}}}`), 1, "attributes.options.retryPolicy.backoffCoefficient", "expected a number"},
		{"float overflow", ev(`{"options":{"retryPolicy":{"backoffCoefficient":1e400}}}`), 1, "attributes.options.retryPolicy.backoffCoefficient", "out of range"},
		{"bad bool", ev(`{"hasReconcile":"yes"}`), 1, "attributes.hasReconcile", "expected a boolean"},
		{"bad strings", ev(`{"options":{"retryPolicy":{"nonRetryableErrorTypes":["a",1]}}}`), 1, "attributes.options.retryPolicy.nonRetryableErrorTypes[1]", "expected a string"},
		{"unknown enum", ev(`{"effect":"Sometimes"}`), 1, "attributes.effect", `unknown value "Sometimes" (known: Read, Idempotent, SideEffect)`},
		{"enum out of range", ev(`{"effect":256}`), 1, "attributes.effect", "out of range"},
		{"payload not an object", ev(`{"input":"x"}`), 1, "attributes.input", "expected an object"},
		{"payload json and base64", ev(`{"input":{"encoding":"json","json":1,"base64":"AA=="}}`), 1, "attributes.input", `both "json" and "base64"`},
		{"payload unknown field", ev(`{"input":{"encoding":"json","data":"x"}}`), 1, "attributes.input", `unknown field "data"`},
		{"payload json needs encoding", ev(`{"input":{"encoding":"yaml","json":1}}`), 1, "attributes.input.json", `needs encoding "json" or "msgpack"`},
		{"payload bad base64", ev(`{"input":{"encoding":"x","base64":"not base64!"}}`), 1, "attributes.input.base64", "bad base64"},
		{"payload empty", ev(`{"input":{}}`), 1, "attributes.input", "empty payload"},
		{"msgpack duplicate key", ev(`{"input":{"encoding":"msgpack","json":{"a":1,"a":2}}}`), 1, "attributes.input.json", `duplicate key "a"`},
		{"msgpack huge integer", ev(`{"input":{"encoding":"msgpack","json":[18446744073709551616]}}`), 1, "attributes.input.json", "out of range"},
		{"msgpack huge float", ev(`{"input":{"encoding":"msgpack","json":-1e999}}`), 1, "attributes.input.json", "value out of range"},
		{"attribute time year 0", `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"TimerStarted","attributes":{"fireAt":"0000-06-01T00:00:00Z"}}]}`, 0, "attributes.fireAt", "outside years 1-9999"},
		{"nested failure wrong type", `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"ActivityResolved","attributes":{"failure":{"nonRetryable":1}}}]}`, 0, "attributes.failure.nonRetryable", "expected a boolean"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := ImportJSON(strings.NewReader(c.doc))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ImportJSON = %v, want ErrInvalid", err)
			}
			var ie *ImportError
			if !errors.As(err, &ie) {
				t.Fatalf("error %T is not an *ImportError", err)
			}
			if ie.Index != c.index || ie.Field != c.field || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("got index %d field %q: %v\nwant index %d field %q containing %q", ie.Index, ie.Field, err, c.index, c.field, c.msg)
			}
			where := "document"
			if c.index >= 0 {
				where = fmt.Sprintf("events[%d]", c.index)
			}
			if !strings.HasPrefix(err.Error(), "history: invalid history JSON: "+where) {
				t.Errorf("message %q does not start by naming %s", err, where)
			}
		})
	}
}

func TestDurationStringsRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{1, -1, 90 * time.Second, math.MaxInt64, math.MinInt64, time.Hour + 1} {
		back, err := time.ParseDuration(d.String())
		if err != nil || back != d {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", d.String(), back, err, d)
		}
	}
}
