package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/vmihailenco/msgpack/v5"
)

// body returns the msgpack part of an encoded record.
func body(t testing.TB, rec []byte) []byte {
	t.Helper()
	rest := rec[headerLen:]
	_, n := binary.Uvarint(rest)
	rest = rest[n:]
	_, n = binary.Varint(rest)
	return rest[n:]
}

// reseal recomputes a record's checksum after a test edited it.
func reseal(rec []byte) []byte {
	binary.BigEndian.PutUint32(rec[2:6], checksum(rec))
	return rec
}

// withBody builds a record with a valid envelope around body.
func withBody(t EventType, id int64, body []byte) []byte {
	rec := []byte{EnvelopeVersion, byte(t), 0, 0, 0, 0}
	rec = binary.AppendUvarint(rec, uint64(id))
	rec = binary.AppendVarint(rec, baseTime.UnixNano())
	return reseal(append(rec, body...))
}

func mustEncode(t testing.TB, ev Event) []byte {
	t.Helper()
	rec, err := EncodeEvent(ev)
	if err != nil {
		t.Fatalf("EncodeEvent(%v): %v", ev, err)
	}
	return rec
}

func TestRoundTripEveryType(t *testing.T) {
	for _, ev := range samples() {
		t.Run(fmt.Sprintf("%d-%s", ev.ID, ev.Type()), func(t *testing.T) {
			rec := mustEncode(t, ev)
			if got := PeekEventType(rec); got != ev.Type() {
				t.Errorf("PeekEventType = %s", got)
			}
			got, err := DecodeEvent(rec, sampleRun, ev.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Time.Equal(ev.Time) || got.Time.Location() != time.UTC {
				t.Errorf("time = %v, want %v in UTC", got.Time, ev.Time)
			}
			if got.ID != ev.ID || !reflect.DeepEqual(got.Attrs, ev.Attrs) {
				t.Errorf("round trip:\n got %#v\nwant %#v", got.Attrs, ev.Attrs)
			}
			if again := mustEncode(t, got); !bytes.Equal(again, rec) {
				t.Errorf("re-encoding differs:\n got %x\nwant %x", again, rec)
			}
			var d EventDecoder
			got2, err := d.Decode(rec, sampleRun, 0)
			if err != nil || !reflect.DeepEqual(got2, got) {
				t.Errorf("EventDecoder: %v, %#v", err, got2.Attrs)
			}
		})
	}
}

func TestRoundTripEdgeValues(t *testing.T) {
	evs := []Event{
		{ID: 1, Attrs: &ActivityScheduled{Input: Payload{Data: []byte{}}, Options: ActivityOptions{
			ScheduleToStartTimeout: math.MinInt64, StartToCloseTimeout: math.MaxInt64,
			RetryPolicy: &RetryPolicy{BackoffCoefficient: math.Copysign(0, -1), MaximumAttempts: math.MinInt32, NonRetryableErrorTypes: []string{}}}}},
		{ID: 1 << 62, Time: time.Unix(0, math.MaxInt64), Attrs: &ActivityStarted{ScheduledEventID: math.MinInt64, Attempt: math.MaxInt32, LeaseEpoch: math.MaxInt64}},
		{ID: 3, Time: time.Unix(0, math.MinInt64), Attrs: &ActivityResolved{Failure: &Failure{}, Result: Payload{Encoding: "x"}}},
		{ID: 4, Attrs: &TimerStarted{FireAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{ID: 5, Attrs: &TimerStarted{FireAt: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}},
		{ID: 6, Attrs: &TimerStarted{FireAt: time.Unix(1<<34-1, 0).UTC()}}, // 8-byte timestamp, no nanos
		{ID: 7, Attrs: &TimerStarted{FireAt: time.Unix(1<<32-1, 0).UTC()}}, // 4-byte timestamp
		{ID: 8, Attrs: &SignalReceived{Name: strings.Repeat("n", 70000), Input: Payload{Encoding: "raw", Data: bytes.Repeat([]byte{1}, 70000)}}},
		{ID: 9, Attrs: &ChildWorkflowStarted{ParentClosePolicy: 200}},
		{ID: 10, Attrs: &ActivityScheduled{Effect: 255, IdempotencyKey: "\x00\xff not utf-8 \xc3"}},
	}
	for _, ev := range evs {
		rec := mustEncode(t, ev)
		got, err := DecodeEvent(rec, sampleRun, ev.ID)
		if err != nil {
			t.Fatalf("%v: %v", ev, err)
		}
		if !reflect.DeepEqual(got.Attrs, ev.Attrs) {
			t.Errorf("%v:\n got %#v\nwant %#v", ev, got.Attrs, ev.Attrs)
		}
		if !got.Time.Equal(ev.Time) {
			t.Errorf("%v: time %v, want %v", ev, got.Time, ev.Time)
		}
		if rp := got.Attrs; ev.ID == 1 {
			if p := rp.(*ActivityScheduled); p.Input.Data == nil || p.Options.RetryPolicy.NonRetryableErrorTypes == nil ||
				!math.Signbit(p.Options.RetryPolicy.BackoffCoefficient) {
				t.Errorf("empty non-nil values or -0 lost: %#v", p)
			}
		}
	}
}

func TestUvarintLen(t *testing.T) {
	for _, x := range []uint64{0, 1, 127, 128, 1<<14 - 1, 1 << 14, 1<<63 - 1, 1 << 63, math.MaxUint64} {
		if got, want := uvarintLen(x), len(binary.AppendUvarint(nil, x)); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", x, got, want)
		}
	}
}

func TestEncodeRefusesInvalidEvents(t *testing.T) {
	for _, ev := range []Event{
		{ID: 1},
		{ID: 0, Attrs: &TimerFired{}},
		{ID: -1, Attrs: &TimerFired{}},
		{ID: 1, Attrs: (*TimerFired)(nil)},
		{ID: 1, Attrs: (*ActivityScheduled)(nil)},
		{ID: 1, Attrs: foreignAttrs{}},
		{ID: 1, Attrs: &TimerStarted{FireAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}},
		{ID: 1, Attrs: &TimerStarted{FireAt: time.Date(0, 12, 31, 23, 59, 59, 0, time.UTC)}},
	} {
		if _, err := EncodeEvent(ev); !errors.Is(err, ErrInvalid) {
			t.Errorf("EncodeEvent(%#v) = %v, want ErrInvalid", ev, err)
		}
	}
}

// foreignAttrs claims a known type without being one of ours.
type foreignAttrs struct{}

func (foreignAttrs) EventType() EventType { return TypeTimerFired }

// TestFieldsCoverEveryStructField checks that each type's field list visits
// every field of the struct, recursively: a field added to event.go but not
// to fields.go fails here.
func TestFieldsCoverEveryStructField(t *testing.T) {
	for _, ty := range allTypes() {
		var missing []string
		findZero(reflect.ValueOf(populated(ty)).Elem(), ty.String(), &missing)
		if len(missing) > 0 {
			t.Errorf("%s: fields not visited by fields(): %v", ty, missing)
		}
	}
}

func findZero(v reflect.Value, path string, missing *[]string) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			if v.IsZero() {
				*missing = append(*missing, path)
			}
			return
		}
		for i := 0; i < v.NumField(); i++ {
			findZero(v.Field(i), path+"."+v.Type().Field(i).Name, missing)
		}
	case reflect.Pointer:
		if v.IsNil() {
			*missing = append(*missing, path)
			return
		}
		findZero(v.Elem(), path, missing)
	default:
		if v.IsZero() {
			*missing = append(*missing, path)
		}
	}
}

// nameCollector records the field names a fields method visits, with
// nested structs' names prefixed.
type nameCollector struct {
	prefix string
	names  []string
}

func (c *nameCollector) add(n string)                             { c.names = append(c.names, c.prefix+n) }
func (c *nameCollector) str(n string, _ *string)                  { c.add(n) }
func (c *nameCollector) boolean(n string, _ *bool)                { c.add(n) }
func (c *nameCollector) int64(n string, _ *int64)                 { c.add(n) }
func (c *nameCollector) int32(n string, _ *int32)                 { c.add(n) }
func (c *nameCollector) duration(n string, _ *time.Duration)      { c.add(n) }
func (c *nameCollector) float64(n string, _ *float64)             { c.add(n) }
func (c *nameCollector) strings(n string, _ *[]string)            { c.add(n) }
func (c *nameCollector) time(n string, _ *time.Time)              { c.add(n) }
func (c *nameCollector) enum(n string, _ *uint8, _ []string)      { c.add(n) }
func (c *nameCollector) payload(n string, _ *Payload)             { c.add(n) }
func (c *nameCollector) object(n string, f fielder)               { c.nested(n, f) }
func (c *nameCollector) failurePtr(n string, _ **Failure)         { c.nested(n, new(Failure)) }
func (c *nameCollector) retryPolicyPtr(n string, _ **RetryPolicy) { c.nested(n, new(RetryPolicy)) }
func (c *nameCollector) nested(n string, f fielder) {
	c.add(n)
	outer := c.prefix
	c.prefix += n + "."
	f.fields(c)
	c.prefix = outer
}

// jsonName is the naming rule for JSON fields: lower camel case, "ID"
// written "Id".
func jsonName(goName string) string {
	s := []rune(strings.ReplaceAll(goName, "ID", "Id"))
	s[0] = unicode.ToLower(s[0])
	return string(s)
}

func expectedNames(ty reflect.Type, prefix string) []string {
	var names []string
	for i := 0; i < ty.NumField(); i++ {
		f := ty.Field(i)
		name := prefix + jsonName(f.Name)
		names = append(names, name)
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[time.Time]() && ft != reflect.TypeFor[Payload]() {
			names = append(names, expectedNames(ft, name+".")...)
		}
	}
	return names
}

// TestFieldOrderAndNames checks that fields() visits the struct's fields in
// declaration order (the wire order) under their JSON names.
func TestFieldOrderAndNames(t *testing.T) {
	for _, ty := range allTypes() {
		a := NewAttributes(ty)
		var c nameCollector
		a.(fielder).fields(&c)
		want := expectedNames(reflect.TypeOf(a).Elem(), "")
		if !reflect.DeepEqual(c.names, want) {
			t.Errorf("%s: fields() visits\n%q\nstruct order and naming rule say\n%q", ty, c.names, want)
		}
	}
}

// libraryEncode encodes v the way the documented format says
// vmihailenco/msgpack does.
func libraryEncode(t testing.TB, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseArrayEncodedStructs(true)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestBodyIsWhatTheLibraryWrites checks the documented format: the body is
// exactly what github.com/vmihailenco/msgpack/v5 writes for the struct, and
// the library reads it back to the same values.
func TestBodyIsWhatTheLibraryWrites(t *testing.T) {
	for _, ev := range samples() {
		rec := mustEncode(t, ev)
		b := body(t, rec)
		if want := libraryEncode(t, ev.Attrs); !bytes.Equal(b, want) {
			t.Errorf("%s body:\n ours    %x\n library %x", ev.Type(), b, want)
			continue
		}
		back := NewAttributes(ev.Type())
		if err := msgpack.Unmarshal(b, back); err != nil {
			t.Errorf("%s: library cannot read the body: %v", ev.Type(), err)
			continue
		}
		if ts, ok := back.(*TimerStarted); ok {
			ts.FireAt = ts.FireAt.UTC() // the library decodes to local time
		}
		if !reflect.DeepEqual(back, ev.Attrs) {
			t.Errorf("%s: library reads\n%#v\nwant %#v", ev.Type(), back, ev.Attrs)
		}
	}
}

// TestWriterMatchesLibrary checks the primitive encodings at every size
// boundary against the library.
func TestWriterMatchesLibrary(t *testing.T) {
	check := func(what string, ours []byte, v any) {
		t.Helper()
		if want := libraryEncode(t, v); !bytes.Equal(ours, want) {
			t.Errorf("%s: ours %x, library %x", what, ours, want)
		}
	}
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, 1<<32 - 1, 1 << 32, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	for _, v := range ints {
		var w mpWriter
		w.writeInt(v)
		check(fmt.Sprint("int ", v), w.b, v)
		r := mpReader{b: w.b}
		if got := r.readInt(math.MinInt64, math.MaxInt64); got != v || r.err != nil || r.remaining() != 0 {
			t.Errorf("readInt(%x) = %d, %v", w.b, got, r.err)
		}
		// The library's default (non-compact) encodings are read too.
		r = mpReader{b: mustLibraryDefault(v)}
		if got := r.readInt(math.MinInt64, math.MaxInt64); got != v || r.err != nil {
			t.Errorf("readInt(library default %d) = %d, %v", v, got, r.err)
		}
	}
	var w mpWriter
	w.writeUint(math.MaxUint64)
	check("uint max", w.b, uint64(math.MaxUint64))
	for _, n := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("s", n)
		w = mpWriter{}
		w.writeString(s)
		check(fmt.Sprint("string ", n), w.b, s)
		w = mpWriter{}
		w.writeBin([]byte(s))
		check(fmt.Sprint("bin ", n), w.b, []byte(s))
	}
	for _, n := range []int{0, 15, 16, 65535, 65536} {
		w = mpWriter{}
		w.writeArrayHeader(n)
		for range n {
			w.writeNil()
		}
		check(fmt.Sprint("array ", n), w.b, make([]any, n))
		w = mpWriter{}
		w.writeMapHeader(n)
		m := make(map[string]any, n)
		for i := range n {
			k := fmt.Sprint(i)
			w.writeString(k)
			w.writeNil()
			m[k] = nil
		}
		if n <= 1 {
			check(fmt.Sprint("map ", n), w.b, m)
		} else if h := mapHeaderLen(n); !bytes.Equal(w.b[:h], libraryEncode(t, m)[:h]) {
			got, want := w.b[:h], libraryEncode(t, m)[:h]
			t.Errorf("map %d header: ours %x, library %x", n, got, want)
		}
	}
	for _, f := range []float64{0, -1.5, math.Inf(1), math.SmallestNonzeroFloat64} {
		w = mpWriter{}
		w.writeFloat64(f)
		check(fmt.Sprint("float ", f), w.b, f)
	}
	for _, tm := range []time.Time{
		{}, time.Unix(0, 0), time.Unix(1<<32-1, 0), time.Unix(1<<32, 0), time.Unix(5, 1), time.Unix(1<<34-1, 999999999),
		time.Unix(1<<34, 0), time.Unix(-1, 0), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
	} {
		w = mpWriter{}
		w.writeTime(tm)
		check(fmt.Sprint("time ", tm), w.b, tm)
		r := mpReader{b: w.b}
		if got := r.readTime(); !got.Equal(tm) || r.err != nil || got.Location() != time.UTC {
			t.Errorf("readTime(%x) = %v, %v; want %v", w.b, got, r.err, tm)
		}
	}
	w = mpWriter{}
	w.writeBool(true)
	w.writeBool(false)
	w.writeNil()
	if want := append(append(libraryEncode(t, true), libraryEncode(t, false)...), libraryEncode(t, nil)...); !bytes.Equal(w.b, want) {
		t.Errorf("bool/nil: ours %x, library %x", w.b, want)
	}
}

func mapHeaderLen(n int) int {
	switch {
	case n < 16:
		return 1
	case n <= math.MaxUint16:
		return 3
	}
	return 5
}

func mustLibraryDefault(v any) []byte {
	b, err := msgpack.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestDecodeToleratesOlderAndNewerRecords checks the compatibility rules:
// missing trailing fields read as zero, extra trailing elements are skipped,
// at the top level and in nested structs.
func TestDecodeToleratesOlderAndNewerRecords(t *testing.T) {
	var w mpWriter
	// An ActivityScheduled of an "older" version: 3 fields, nothing after the
	// input.
	w.writeArrayHeader(3)
	w.writeString("a1")
	w.writeString("Pay")
	w.writeArrayHeader(1) // a payload with only its encoding
	w.writeString("json")
	got, err := DecodeEvent(withBody(TypeActivityScheduled, 4, w.b), sampleRun, 4)
	if err != nil {
		t.Fatal(err)
	}
	want := &ActivityScheduled{ActivityID: "a1", ActivityType: "Pay", Input: Payload{Encoding: "json"}}
	if !reflect.DeepEqual(got.Attrs, want) {
		t.Errorf("older record: got %#v", got.Attrs)
	}

	// A "newer" ActivityStarted: two extra fields of any shape at the end,
	// and a nested Failure with an extra field in an ActivityFailed.
	w = mpWriter{}
	w.writeArrayHeader(7)
	w.writeInt(3)
	w.writeInt(2)
	w.writeInt(9)
	w.writeString("w")
	w.writeBool(true)
	w.writeMapHeader(1) // extra: {"k": [1, {bin}, ext]}
	w.writeString("k")
	w.writeArrayHeader(3)
	w.writeInt(1)
	w.writeMapHeader(1)
	w.writeBin([]byte("x"))
	w.writeFloat64(2)
	w.b = append(w.b, mpFixExt1, 7, 0)
	w.b = append(w.b, mpExt16, 0, 2, 9, 1, 2) // extra: ext16
	got, err = DecodeEvent(withBody(TypeActivityStarted, 5, w.b), sampleRun, 5)
	if err != nil {
		t.Fatal(err)
	}
	if want := (&ActivityStarted{ScheduledEventID: 3, Attempt: 2, LeaseEpoch: 9, Identity: "w", Reconcile: true}); !reflect.DeepEqual(got.Attrs, want) {
		t.Errorf("newer record: got %#v", got.Attrs)
	}

	w = mpWriter{}
	w.writeArrayHeader(3)
	w.writeInt(3)
	w.writeNil() // nil reads as zero
	w.writeArrayHeader(7)
	for _, s := range []string{"T", "M"} {
		w.writeString(s)
	}
	w.writeBool(true)
	w.writeArrayHeader(4) // payload with an extra element
	w.writeString("e")
	w.writeBin([]byte{1})
	w.writeNil()
	w.writeInt(77)
	w.writeString("stack")
	w.writeString("extra1")
	w.writeArrayHeader(0)
	got, err = DecodeEvent(withBody(TypeActivityFailed, 6, w.b), sampleRun, 6)
	if err != nil {
		t.Fatal(err)
	}
	wantF := &ActivityFailed{ScheduledEventID: 3, Failure: Failure{Type: "T", Message: "M", NonRetryable: true, Details: Payload{Encoding: "e", Data: []byte{1}}, Stack: "stack"}}
	if !reflect.DeepEqual(got.Attrs, wantF) {
		t.Errorf("nested newer record: got %#v", got.Attrs)
	}
}

// wide is a struct with more than 15 fields, so that its array header is
// an array16: no attribute struct is that wide yet.
type wide struct {
	A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q string
	R                                                 int64
	S                                                 Payload
}

func (w *wide) fields(v fieldVisitor) {
	for i, p := range []*string{&w.A, &w.B, &w.C, &w.D, &w.E, &w.F, &w.G, &w.H, &w.I, &w.J, &w.K, &w.L, &w.M, &w.N, &w.O, &w.P, &w.Q} {
		v.str(fmt.Sprint(i), p)
	}
	v.int64("r", &w.R)
	v.payload("s", &w.S)
}

func TestWideStruct(t *testing.T) {
	in := &wide{A: "a", H: "h", Q: "q", R: -5, S: Payload{Encoding: "e", Data: []byte{1}}}
	var e binEncoder
	e.w.writeInt(42) // something before, as in a record
	e.writeStruct(in)
	if want := append([]byte{42}, libraryEncode(t, in)...); !bytes.Equal(e.w.b, want) {
		t.Fatalf("wide struct:\n ours    %x\n library %x", e.w.b, want)
	}
	d := binDecoder{r: mpReader{b: e.w.b[1:]}}
	var out wide
	d.readStruct("wide", &out)
	if d.r.err != nil || d.r.remaining() != 0 || !reflect.DeepEqual(&out, in) {
		t.Fatalf("decoded %#v, %v", out, d.r.err)
	}
}

func sampleRecords(t testing.TB) []Event {
	t.Helper()
	return samples()[:len(allTypes())] // the populated ones
}

// checkCorrupt asserts err is a CorruptError naming the sample run and id.
func checkCorrupt(t *testing.T, err error, id int64, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: decoded without error", what)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("%s: error %v does not match ErrCorrupt", what, err)
	}
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Run != sampleRun || ce.EventID != id {
		t.Fatalf("%s: error %#v does not name run and event %d", what, err, id)
	}
	msg := err.Error()
	for _, want := range []string{`workflow "invoice-INV-9"`, `run "0193a1b2-run"`, fmt.Sprintf("event %d:", id)} {
		if !strings.Contains(msg, want) {
			t.Fatalf("%s: message %q does not contain %q", what, msg, want)
		}
	}
	if strings.Contains(msg, "decoder panic") {
		t.Fatalf("%s: the decoder panicked: %s", what, msg)
	}
}

func TestTruncationAtEveryLength(t *testing.T) {
	for _, ev := range sampleRecords(t) {
		rec := mustEncode(t, ev)
		for n := 0; n < len(rec); n++ {
			for _, want := range []int64{ev.ID, 0} {
				_, err := DecodeEvent(rec[:n], sampleRun, ev.ID)
				checkCorrupt(t, err, ev.ID, fmt.Sprintf("%s truncated to %d (want %d)", ev.Type(), n, want))
			}
		}
	}
}

func TestEveryBitFlipIsDetected(t *testing.T) {
	for _, ev := range sampleRecords(t) {
		rec := mustEncode(t, ev)
		for bit := 0; bit < 8*len(rec); bit++ {
			bad := bytes.Clone(rec)
			bad[bit/8] ^= 1 << (bit % 8)
			_, err := DecodeEvent(bad, sampleRun, ev.ID)
			checkCorrupt(t, err, ev.ID, fmt.Sprintf("%s bit %d flipped", ev.Type(), bit))
		}
	}
}

func TestCorruptRecords(t *testing.T) {
	good := mustEncode(t, Event{ID: 7, Time: baseTime, Attrs: populated(TypeActivityScheduled)})
	edit := func(f func(rec []byte) []byte) []byte { return f(bytes.Clone(good)) }
	body := func(b ...byte) []byte { return withBody(TypeActivityStarted, 7, b) }
	cases := []struct {
		name   string
		rec    []byte
		reason string
	}{
		{"empty", nil, "truncated"},
		{"unknown version", edit(func(r []byte) []byte { r[0] = 2; return reseal(r) }), "unknown envelope version 2"},
		{"version zero", edit(func(r []byte) []byte { r[0] = 0; return r }), "unknown envelope version 0"},
		{"unknown type", edit(func(r []byte) []byte { r[1] = byte(typeCount); return reseal(r) }), "unknown event type"},
		{"type zero", edit(func(r []byte) []byte { r[1] = 0; return reseal(r) }), "unknown event type 0"},
		{"type of another event", edit(func(r []byte) []byte { r[1] = byte(TypeTimerFired); return reseal(r) }), "TimerFired body"},
		{"wrong checksum", edit(func(r []byte) []byte { r[5]++; return r }), "checksum mismatch"},
		{"trailing bytes", reseal(append(bytes.Clone(good), 0x00)), "trailing bytes"},
		{"trailing garbage", reseal(append(bytes.Clone(good), "garbage"...)), "trailing bytes"},
		{"wrong event id", mustEncode(t, Event{ID: 8, Attrs: &TimerFired{}}), "record holds event 8"},
		{"event id zero", withBodyID(0), "bad event id"},
		{"event id too large", withBodyID(1<<62 + 1), "bad event id"},
		{"no body", body(), "body is not an array"},
		{"nil body", body(mpNil), "body is not an array"},
		{"body not an array", body(0xa1, 'x'), "expected array, found string"},
		{"int for string", body(0x94, 1, 2, 3, 0x01), "identity: expected string, found integer"},
		{"string for int", body(0x91, 0xa1, 'x'), "scheduledEventId: expected integer, found string"},
		{"int32 overflow", body(0x92, 1, mpUint32, 0x80, 0, 0, 0), "attempt: integer 2147483648 out of range"},
		{"int64 overflow", body(0x91, mpUint64, 0x80, 0, 0, 0, 0, 0, 0, 0), "out of range"},
		{"bad bool", body(0x95, 1, 1, 1, 0xa0, 0x05), "reconcile: expected bool, found integer"},
		{"reserved code", body(0x91, 0xc1), "reserved code 0xc1"},
		{"huge array", body(mpArray32, 0xff, 0xff, 0xff, 0xff, 1), "unexpected end of data"},
		{"huge string", body(0x94, 1, 1, 1, mpStr32, 0xff, 0xff, 0xff, 0xff), "identity: unexpected end of data"},
		{"huge skipped map", body(0x96, 1, 1, 1, 0xa0, 0xc2, mpMap32, 0x7f, 0xff, 0xff, 0xff), "unexpected end of data"},
		{"truncated extra", body(0x96, 1, 1, 1, 0xa0, 0xc2, 0x92, 1), "unexpected end of data"},
		{"enum out of range", withBody(TypeActivityScheduled, 7, []byte{0x95, 0xa0, 0xa0, 0x90, 0x90, mpUint16, 1, 0}), "effect: integer 256 out of range"},
		{"negative enum", withBody(TypeActivityScheduled, 7, []byte{0x95, 0xa0, 0xa0, 0x90, 0x90, 0xff}), "effect: integer -1 out of range"},
		{"nested error", withBody(TypeActivityScheduled, 7, []byte{0x94, 0xa0, 0xa0, 0x90, 0x96, 0xa0, 0, 0, 0, 0, 0x91, 0xa1, 'x'}), "options.retryPolicy.initialInterval: expected integer, found string"},
		{"bad timestamp length", withBody(TypeTimerStarted, 7, []byte{0x93, 0xa0, 0, mpFixExt2, 0xff, 0, 0}), "fireAt: timestamp of 2 bytes"},
		{"timestamp nanos", withBody(TypeTimerStarted, 7, []byte{0x93, 0xa0, 0, mpExt8, 12, 0xff, 0x3b, 0x9a, 0xca, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}), "fireAt: timestamp with 1000000000 nanoseconds"},
		{"timestamp year", withBody(TypeTimerStarted, 7, []byte{0x93, 0xa0, 0, mpExt8, 12, 0xff, 0, 0, 0, 0, 0x7f, 0, 0, 0, 0, 0, 0, 0}), "outside years 1-9999"},
		{"other extension for time", withBody(TypeTimerStarted, 7, []byte{0x93, 0xa0, 0, mpFixExt4, 5, 0, 0, 0, 0}), "expected timestamp, found extension 5"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeEvent(c.rec, sampleRun, 7)
			checkCorrupt(t, err, 7, c.name)
			if !strings.Contains(err.Error(), c.reason) {
				t.Errorf("error %q does not say %q", err, c.reason)
			}
		})
	}
	// Without an expected id the error names the id read from the record.
	_, err := DecodeEvent(reseal(append(bytes.Clone(good), 1)), sampleRun, 0)
	checkCorrupt(t, err, 7, "trailing, want 0")
}

func withBodyID(id uint64) []byte {
	rec := []byte{EnvelopeVersion, byte(TypeTimerFired), 0, 0, 0, 0}
	rec = binary.AppendUvarint(rec, id)
	rec = append(rec, 0, 0x90)
	return reseal(rec)
}

// TestCorruptFixtures decodes the damaged records kept in
// testdata/corrupt: each must be refused as corrupt, naming the event.
func TestCorruptFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/corrupt/*.bin")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		rec, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		_, err = DecodeEvent(rec, sampleRun, 3)
		checkCorrupt(t, err, 3, f)
	}
}

// TestRandomBodiesNeverPanic feeds random and mutated bodies, with valid
// envelopes, to the decoder: every outcome must be a value or a clean
// error, never a recovered panic.
func TestRandomBodiesNeverPanic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seeds := make([][]byte, 0)
	for _, ev := range sampleRecords(t) {
		seeds = append(seeds, body(t, mustEncode(t, ev)))
	}
	for i := 0; i < 20000; i++ {
		ty := allTypes()[rng.IntN(len(allTypes()))]
		var b []byte
		if i%2 == 0 {
			b = bytes.Clone(seeds[rng.IntN(len(seeds))])
			for range 1 + rng.IntN(4) {
				if len(b) > 0 {
					b[rng.IntN(len(b))] = byte(rng.Uint32())
				}
			}
		} else {
			b = make([]byte, rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.Uint32())
			}
		}
		ev, err := DecodeEvent(withBody(ty, 1, b), sampleRun, 1)
		if err != nil {
			if strings.Contains(err.Error(), "decoder panic") {
				t.Fatalf("body %x: %v", b, err)
			}
			continue
		}
		checkReencodes(t, ev)
	}
}

// checkReencodes asserts that a decoded event encodes, and decodes again to
// an equal event whose encoding is the same.
func checkReencodes(t testing.TB, ev Event) {
	t.Helper()
	rec, err := EncodeEvent(ev)
	if err != nil {
		t.Fatalf("decoded event %v does not encode: %v", ev, err)
	}
	again, err := DecodeEvent(rec, sampleRun, ev.ID)
	if err != nil {
		t.Fatalf("re-encoded event does not decode: %v", err)
	}
	if !eventsEqual(again, ev) {
		t.Fatalf("re-decoded event differs:\n got %#v\nwant %#v", again.Attrs, ev.Attrs)
	}
	if rec2 := mustEncode(t, again); !bytes.Equal(rec2, rec) {
		t.Fatalf("encoding is not stable:\n%x\n%x", rec, rec2)
	}
}

// eventsEqual compares events, treating times by instant and NaN floats as
// equal to themselves.
func eventsEqual(a, b Event) bool {
	if a.ID != b.ID || !a.Time.Equal(b.Time) {
		return false
	}
	return reflect.DeepEqual(a.Attrs, b.Attrs) || nanEqual(a.Attrs, b.Attrs)
}

func nanEqual(a, b Attributes) bool {
	x, ok1 := a.(*ActivityScheduled)
	y, ok2 := b.(*ActivityScheduled)
	if !ok1 || !ok2 || x.Options.RetryPolicy == nil || y.Options.RetryPolicy == nil {
		return false
	}
	cx, cy := *x, *y
	px, py := *x.Options.RetryPolicy, *y.Options.RetryPolicy
	if math.Float64bits(px.BackoffCoefficient) != math.Float64bits(py.BackoffCoefficient) {
		return false
	}
	px.BackoffCoefficient, py.BackoffCoefficient = 0, 0
	cx.Options.RetryPolicy, cy.Options.RetryPolicy = &px, &py
	return reflect.DeepEqual(&cx, &cy)
}

func BenchmarkDecodeEvent(b *testing.B) {
	for _, ty := range []EventType{TypeActivityScheduled, TypeActivityStarted, TypeActivityCompleted, TypeWorkflowTaskCompleted} {
		var ev Event
		for _, e := range realisticHistory(20) {
			if e.Type() == ty {
				ev = e
				break
			}
		}
		rec := mustEncode(b, ev)
		b.Run(ty.String(), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(rec)))
			for b.Loop() {
				if _, err := DecodeEvent(rec, sampleRun, ev.ID); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncodeEvent(b *testing.B) {
	ev := realisticHistory(3)[2]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeEvent(ev); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeHistory10k decodes a realistic 10,000-event history with
// DecodeEvent, record by record (pure decode, no store).
func BenchmarkDecodeHistory10k(b *testing.B) {
	recs := encodeAll(realisticHistory(10000))
	size := 0
	for _, r := range recs {
		size += len(r)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		for i, r := range recs {
			if _, err := DecodeEvent(r, sampleRun, int64(i+1)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/history")
}

// BenchmarkEventDecoderHistory10k is BenchmarkDecodeHistory10k with one
// EventDecoder per history.
func BenchmarkEventDecoderHistory10k(b *testing.B) {
	recs := encodeAll(realisticHistory(10000))
	b.ReportAllocs()
	for b.Loop() {
		var d EventDecoder
		for i, r := range recs {
			if _, err := d.Decode(r, sampleRun, int64(i+1)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/history")
}

// BenchmarkEncodeHistory10k encodes the same history into a reused buffer.
func BenchmarkEncodeHistory10k(b *testing.B) {
	evs := realisticHistory(10000)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			var err error
			if buf, err = AppendEvent(buf[:0], ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "ms/history")
}

// TestCompatV1 decodes records written by the first version of the body
// format (testdata/compat/v1.records: one hex record per line) and compares
// them with the same events exported then (testdata/compat/v1.json).
// Appending fields to a struct keeps this test passing; reordering,
// removing or retyping a field breaks it, as it would break every stored
// history. -update only creates the files when they are missing: before
// the first release they may be deleted and rewritten, after it never.
func TestCompatV1(t *testing.T) {
	recPath, jsonPath := filepath.Join("testdata", "compat", "v1.records"), filepath.Join("testdata", "compat", "v1.json")
	if *update {
		if _, err := os.Stat(recPath); errors.Is(err, os.ErrNotExist) {
			var lines []string
			for _, ev := range samples() {
				lines = append(lines, fmt.Sprintf("%x", mustEncode(t, ev)))
			}
			if err := os.MkdirAll(filepath.Dir(recPath), 0o755); err != nil {
				t.Fatal(err)
			}
			var doc bytes.Buffer
			if err := ExportJSON(&doc, sampleRun, samples()); err != nil {
				t.Fatal(err)
			}
			if os.WriteFile(recPath, []byte(strings.Join(lines, "\n")+"\n"), 0o644) != nil ||
				os.WriteFile(jsonPath, doc.Bytes(), 0o644) != nil {
				t.Fatal("cannot write the compat fixtures")
			}
		}
	}
	recs, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	run, want, err := ImportJSON(bytes.NewReader(doc))
	if err != nil || run != sampleRun {
		t.Fatalf("the v1 export no longer imports: %v", err)
	}
	lines := strings.Fields(string(recs))
	if len(lines) != len(want) {
		t.Fatalf("%d records, %d events", len(lines), len(want))
	}
	var d EventDecoder
	for i, line := range lines {
		var rec []byte
		if _, err := fmt.Sscanf(line, "%x", &rec); err != nil {
			t.Fatal(err)
		}
		got, err := d.Decode(rec, sampleRun, int64(i+1))
		if err != nil {
			t.Fatalf("v1 record %d no longer decodes: %v", i+1, err)
		}
		if !eventsEqual(got, want[i]) {
			t.Errorf("v1 record %d (%s) decodes differently:\n got %#v\nwant %#v", i+1, got.Type(), got.Attrs, want[i].Attrs)
		}
	}
}
