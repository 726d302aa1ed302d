package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// sampleRequests are realistic requests, as workers and the CLI send them.
func sampleRequests() []any {
	return []any{
		&api.StartWorkflowRequest{WorkflowID: "invoice-INV-9", WorkflowType: "PayInvoice", TaskQueue: "agents",
			Input: api.Payload{Encoding: "msgpack", Data: []byte{0x81, 0xa1, 0x61, 0x01}}, ExecutionTimeout: time.Hour,
			ReusePolicy: api.RejectDuplicate, ConflictPolicy: api.ConflictUseExisting, RequestID: "r-1", Identity: "cli"},
		&api.CompleteWorkflowTaskRequest{TaskToken: []byte("tok"), StickyQueue: "agents/sticky/w1", Identity: "w1", Commands: []api.Command{
			{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1", ActivityType: "SendPayment",
				Input: api.Payload{Encoding: "json", Data: []byte(`{"amount":1250}`)}, Effect: history.SideEffect, KeyMaterial: []byte("INV-9"),
				Options: api.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: &api.RetryPolicy{
					InitialInterval: time.Second, BackoffCoefficient: 2.5, MaximumAttempts: 5, NonRetryableErrorTypes: []string{"CardDeclined", "Fraud"}}}}},
			{Type: api.CommandStartTimer, StartTimer: &api.StartTimerCommand{TimerID: "t", Duration: -time.Nanosecond}},
			{Type: api.CommandFailWorkflow, FailWorkflow: &api.FailWorkflowCommand{Failure: api.Failure{Type: "X", Message: strings.Repeat("m", 300)}}},
			{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: api.Payload{Data: make([]byte, 300)}}},
		}},
		&api.ListWorkflowsRequest{Status: api.StatusPaused, StartedAfter: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC),
			StartedBefore: time.Unix(1<<33, 0).UTC(), PageSize: math.MaxInt32, NextPageToken: bytes.Repeat([]byte{0xc1}, 300)},
		&api.ResolveActivityRequest{WorkflowID: "w", ScheduledEventID: math.MaxInt64, Resolution: history.ResolvedFailed,
			Failure: &api.Failure{Type: "T", NonRetryable: true}},
		&api.FailActivityRequest{TaskToken: []byte{1, 2, 3}, OutcomeUnknown: true, Failure: api.Failure{Message: "timeout"}},
		&api.DescribeWorkflowRequest{},
	}
}

// newOfSameType returns a new zero value of v's pointed-to type.
func newOfSameType(v any) any {
	switch v.(type) {
	case *api.StartWorkflowRequest:
		return new(api.StartWorkflowRequest)
	case *api.CompleteWorkflowTaskRequest:
		return new(api.CompleteWorkflowTaskRequest)
	case *api.ListWorkflowsRequest:
		return new(api.ListWorkflowsRequest)
	case *api.ResolveActivityRequest:
		return new(api.ResolveActivityRequest)
	case *api.FailActivityRequest:
		return new(api.FailActivityRequest)
	case *api.DescribeWorkflowRequest:
		return new(api.DescribeWorkflowRequest)
	}
	panic("unknown request type")
}

func TestCheckMsgpackAcceptsWhatMsgpackWrites(t *testing.T) {
	values := []any{
		nil, true, false, 0, 1, -1, -32, -33, 127, 128, 255, 256, 65535, 65536, math.MaxInt64, math.MinInt64, uint64(math.MaxUint64),
		int8(-5), int16(-300), int32(-70000), float32(1.5), math.Inf(1), math.NaN(),
		"", strings.Repeat("s", 31), strings.Repeat("s", 32), strings.Repeat("s", 255), strings.Repeat("s", 256), strings.Repeat("s", 70000),
		[]byte{}, make([]byte, 255), make([]byte, 256), make([]byte, 70000),
		make([]int, 15), make([]int, 16), make([]int, 70000),
		map[string]int{}, map[string]any{"a": []any{map[string]any{"b": nil}}, "c": 1.25},
		time.Unix(1, 0), time.Unix(1, 5), time.Date(2500, 1, 1, 0, 0, 0, 1, time.UTC), time.Time{},
	}
	big := make(map[int]bool, 70000)
	for i := range 70000 {
		big[i] = true
	}
	values = append(values, big)
	values = append(values, sampleRequests()...)
	for _, v := range values {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := api.CheckMsgpack(b, api.MaxMsgpackDepth); err != nil {
			t.Fatalf("%T (%d bytes, first 0x%x): %v", v, len(b), b[0], err)
		}
		// Any truncation, and any trailing byte, is refused.
		for n := range len(b) {
			if len(b) > 1000 && n > 100 && n < len(b)-100 {
				continue
			}
			if api.CheckMsgpack(b[:n], api.MaxMsgpackDepth) == nil {
				t.Fatalf("%T truncated to %d of %d bytes passed", v, n, len(b))
			}
		}
		if api.CheckMsgpack(append(b, 0xc0), api.MaxMsgpackDepth) == nil {
			t.Fatalf("%T with a trailing byte passed", v)
		}
	}
}

func TestCheckMsgpackDepth(t *testing.T) {
	nested := func(depth int) []byte {
		return append(bytes.Repeat([]byte{0x91}, depth), 0xc0) // [[[…nil…]]]
	}
	if err := api.CheckMsgpack(nested(api.MaxMsgpackDepth), api.MaxMsgpackDepth); err != nil {
		t.Fatalf("depth %d: %v", api.MaxMsgpackDepth, err)
	}
	if err := api.CheckMsgpack(nested(api.MaxMsgpackDepth+1), api.MaxMsgpackDepth); err == nil {
		t.Fatalf("depth %d passed", api.MaxMsgpackDepth+1)
	}
	// 4 MiB of nesting is refused at once, without recursion.
	if err := api.CheckMsgpack(nested(4<<20), api.MaxMsgpackDepth); err == nil {
		t.Fatal("deep nesting passed")
	}
}

// TestDecodeBodyHugeDeclaredLength is the regression test for a 14-byte
// body that made msgpack.Unmarshal allocate 400 GB (a fatal error, not a
// panic: the whole server died).
func TestDecodeBodyHugeDeclaredLength(t *testing.T) {
	for _, body := range [][]byte{
		[]byte("\x81\xa8Commands\xdd\xff\xff\xff\xff"),
		[]byte("\x81\xa8Commands\xdc\xff\xff"),
		[]byte("\x81\xa8Commands\xdf\xff\xff\xff\xff"),
		append([]byte("\x81\xa8Commands\xdd\x00\x10\x00\x00"), bytes.Repeat([]byte{0xc0}, 1000)...),
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := decodeBody(ContentMsgpack, body, new(api.CompleteWorkflowTaskRequest))
		runtime.ReadMemStats(&after)
		if !errors.Is(err, api.ErrInvalidArgument) {
			t.Fatalf("body %q: %v, want invalid argument", body, err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
			t.Fatalf("body %q: decoding allocated %d bytes", body, d)
		}
	}
}

func TestDecodeBodyRoundTrip(t *testing.T) {
	for _, r := range sampleRequests() {
		mp, err := msgpack.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			ct   string
			body []byte
		}{{ContentMsgpack, mp}, {ContentJSON, js}} {
			got := newOfSameType(r)
			if err := decodeBody(tc.ct, tc.body, got); err != nil {
				t.Fatalf("%T as %s: %v", r, tc.ct, err)
			}
			again, _ := msgpack.Marshal(got)
			if !bytes.Equal(again, mp) {
				t.Fatalf("%T as %s does not round-trip:\n got %+v\nwant %+v", r, tc.ct, got, r)
			}
		}
	}
}

// FuzzDecodeBody feeds arbitrary bodies of both content types to the
// decoder of several request types: it must never panic, never allocate
// out of proportion to the body (the fuzzer dies on a huge allocation),
// and fail only with api.ErrInvalidArgument.
func FuzzDecodeBody(f *testing.F) {
	for _, r := range sampleRequests() {
		mp, _ := msgpack.Marshal(r)
		js, _ := json.Marshal(r)
		f.Add(mp, false)
		f.Add(js, true)
	}
	f.Add([]byte("\x81\xa8Commands\xdd\xff\xff\xff\xff"), false)
	f.Add([]byte(`{"Commands":[{"Type":1,"ScheduleActivity":{"Options":{"RetryPolicy":{"NonRetryableErrorTypes":["x"]}}}}]}`), true)
	f.Add([]byte(`{"WorkflowID":"x","Unknown":1}`), true)
	f.Fuzz(func(t *testing.T, body []byte, asJSON bool) {
		ct := ContentMsgpack
		if asJSON {
			ct = ContentJSON
		}
		for _, v := range []any{
			new(api.StartWorkflowRequest), new(api.CompleteWorkflowTaskRequest), new(api.ListWorkflowsRequest),
			new(api.ResolveActivityRequest), new(api.FailActivityRequest), new(api.SignalWithStartRequest),
		} {
			if err := decodeBody(ct, body, v); err != nil && !errors.Is(err, api.ErrInvalidArgument) {
				t.Fatalf("%T: error %v does not wrap ErrInvalidArgument", v, err)
			}
		}
	})
}
