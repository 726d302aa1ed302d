package history

import (
	"bytes"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

// sampleRun is the run every test record is stored under.
var sampleRun = RunRef{WorkflowID: "invoice-INV-9", RunID: "0193a1b2-run"}

// baseTime is the engine clock at event 1 of the sample histories.
var baseTime = time.Date(2025, 3, 14, 9, 26, 53, 589793238, time.UTC)

// mustMsgpack encodes v the way the SDK's msgpack converter does (compact
// integers, so the payload renders as JSON in exports).
func mustMsgpack(v any) []byte {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.SetSortMapKeys(true)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// realisticHistory returns a history of n events shaped like an agent run:
// decision boundaries, activities scheduled with ~100-byte msgpack inputs and
// a retry policy, started and completed with results, timers and signals.
func realisticHistory(n int) []Event {
	evs := make([]Event, 0, n)
	add := func(a Attributes) int64 {
		id := int64(len(evs) + 1)
		evs = append(evs, Event{ID: id, Time: baseTime.Add(time.Duration(id) * 37 * time.Millisecond), Attrs: a})
		return id
	}
	add(&WorkflowStarted{WorkflowType: "PayInvoice", TaskQueue: "agents",
		Input:    Payload{Encoding: "msgpack", Data: mustMsgpack(map[string]any{"invoice": "INV-9", "amount": 1250})},
		Identity: "worker-1@host"})
	policy := func() *RetryPolicy {
		return &RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute,
			MaximumAttempts: 5, NonRetryableErrorTypes: []string{"InvalidArgument"}}
	}
	for turn := 0; len(evs) < n; turn++ {
		wtc := add(&WorkflowTaskCompleted{SeenEventID: int64(len(evs)), Identity: "worker-1@host"})
		if len(evs) >= n {
			break
		}
		switch {
		case turn%10 == 7:
			ts := add(&TimerStarted{TimerID: fmt.Sprint(turn), Duration: 90 * time.Second,
				FireAt: baseTime.Add(time.Duration(turn) * time.Minute), WorkflowTaskCompletedEventID: wtc})
			if len(evs) < n {
				add(&TimerFired{TimerID: fmt.Sprint(turn), StartedEventID: ts})
			}
		case turn%10 == 3:
			add(&SignalReceived{Name: "approve", Identity: "cli@ops",
				Input: Payload{Encoding: "json", Data: []byte(`{"ok":true,"by":"alice@example.com","note":"go ahead"}`)}})
		default:
			in := mustMsgpack(map[string]any{
				"invoice": fmt.Sprintf("INV-%06d", turn), "amount": 12345 + turn, "currency": "EUR",
				"customer": "cust-98765", "note": "monthly subscription renewal, plan pro",
			})
			sch := add(&ActivityScheduled{ActivityID: fmt.Sprint(turn), ActivityType: "SendPayment",
				Input: Payload{Encoding: "msgpack", Data: in},
				Options: ActivityOptions{TaskQueue: "agents", StartToCloseTimeout: time.Minute,
					HeartbeatTimeout: 10 * time.Second, RetryPolicy: policy()},
				Effect: SideEffect, IdempotencyKey: fmt.Sprintf("invoice-INV-9:SendPayment:%016x:1", turn),
				WorkflowTaskCompletedEventID: wtc})
			if len(evs) >= n {
				break
			}
			st := add(&ActivityStarted{ScheduledEventID: sch, Attempt: 1, LeaseEpoch: int64(turn + 1), Identity: "worker-1@host"})
			if len(evs) >= n {
				break
			}
			add(&ActivityCompleted{ScheduledEventID: sch, StartedEventID: st, Identity: "worker-1@host",
				Result: Payload{Encoding: "msgpack", Data: mustMsgpack(map[string]any{"paymentId": fmt.Sprintf("pay_%08d", turn), "status": "succeeded"})}})
		}
	}
	return evs
}

// encodeAll encodes events, failing loudly.
func encodeAll(evs []Event) [][]byte {
	recs := make([][]byte, len(evs))
	for i, ev := range evs {
		b, err := EncodeEvent(ev)
		if err != nil {
			panic(err)
		}
		recs[i] = b
	}
	return recs
}

// populator fills every field it visits with a distinct non-zero value.
// Payloads cycle through msgpack, JSON and opaque binary encodings.
type populator struct{ n int }

func (p *populator) next() int { p.n++; return p.n }

func (p *populator) str(name string, s *string) { *s = fmt.Sprintf("%s-%d", name, p.next()) }
func (p *populator) boolean(_ string, b *bool)  { *b = true }
func (p *populator) int64(_ string, v *int64) {
	n := p.next()
	if n%2 == 0 {
		*v = int64(n)
	} else {
		*v = 1<<40 + int64(n)
	}
}
func (p *populator) int32(_ string, v *int32) { *v = int32(p.next() * 7) }
func (p *populator) duration(_ string, d *time.Duration) {
	*d = time.Duration(p.next())*time.Minute + 1500*time.Millisecond
}
func (p *populator) float64(_ string, f *float64) { *f = 1.5 + float64(p.next()) }
func (p *populator) strings(name string, s *[]string) {
	n := p.next()
	*s = []string{fmt.Sprintf("%s-a%d", name, n), fmt.Sprintf("%s-b%d", name, n)}
}
func (p *populator) time(_ string, t *time.Time) {
	*t = baseTime.Add(time.Duration(p.next())*time.Hour + 123*time.Nanosecond)
}
func (p *populator) enum(_ string, v *uint8, names []string) { p.next(); *v = uint8(len(names) - 1) }
func (p *populator) payload(name string, v *Payload) {
	n := p.next()
	switch n % 3 {
	case 0:
		*v = Payload{Encoding: "msgpack", Data: mustMsgpack(map[string]any{"field": name, "n": n, "ok": true, "ratio": 0.25, "tags": []string{"x", "y"}})}
	case 1:
		*v = Payload{Encoding: "json", Data: []byte(fmt.Sprintf(`{"field":%q,"n":%d,"nested":{"list":[1,2.5,null,"s"]}}`, name, n))}
	default:
		*v = Payload{Encoding: "binary/plain", Data: []byte{0xff, 0x00, byte(n), 0xfe}}
	}
	v.Ref = ChunkHash(nil, []byte(name)) // every payload of a populated event is by reference too
}
func (p *populator) object(_ string, f fielder) { f.fields(p) }
func (p *populator) failurePtr(_ string, f **Failure) {
	*f = new(Failure)
	(*f).fields(p)
}
func (p *populator) retryPolicyPtr(_ string, r **RetryPolicy) {
	*r = new(RetryPolicy)
	(*r).fields(p)
}

// allTypes lists every known event type.
func allTypes() []EventType {
	var ts []EventType
	for t := TypeWorkflowStarted; t < typeCount; t++ {
		ts = append(ts, t)
	}
	return ts
}

// populated returns attributes of type t with every field set.
func populated(t EventType) Attributes {
	a := NewAttributes(t)
	(&populator{n: int(t) * 100}).object("", a.(fielder))
	return a
}

// samples returns one event per type with every field populated, numbered
// from 1, followed by one zero-valued event per type.
func samples() []Event {
	var evs []Event
	for _, t := range allTypes() {
		evs = append(evs, Event{Attrs: populated(t)})
	}
	for _, t := range allTypes() {
		evs = append(evs, Event{Attrs: NewAttributes(t)})
	}
	for i := range evs {
		evs[i].ID = int64(i + 1)
		evs[i].Time = baseTime.Add(time.Duration(i) * 1001 * time.Microsecond)
	}
	return evs
}

// findRefs lists the payloads of a that still hold a chunk reference.
func findRefs(a Attributes, out *[]string) {
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[Payload]() {
				if len(v.Interface().(Payload).Ref) > 0 {
					*out = append(*out, path)
				}
				return
			}
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i), path+"."+v.Type().Field(i).Name)
				}
			}
		}
	}
	walk(reflect.ValueOf(a), "")
}

// TestShardOfIsFixed pins ShardOf: a cluster's servers, old and new, must
// place every workflow id in the same shard for ever.
func TestShardOfIsFixed(t *testing.T) {
	// The expected shards were computed with an independent FNV-1a.
	for id, want := range map[string]int{"": 197, "invoice-INV-9": 192, "pay-INV-9": 77, "assistant-INV-8": 144, "ü": 74} {
		if got := ShardOf(id, 256); got != want {
			t.Errorf("ShardOf(%q, 256) = %d, want %d", id, got, want)
		}
	}
	if got := ShardOf("invoice-INV-9", 1); got != 0 {
		t.Errorf("one shard: %d", got)
	}
}
