package history

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The seed corpora live in testdata/fuzz/<FuzzName>/: the files named
// seed-* are written by `go test -run TestUpdateFuzzCorpus -update`, the
// others are inputs the fuzzer once found failing (keep them). Seeds run as
// ordinary tests with `go test`.

// FuzzDecodeEvent feeds raw records to DecodeEvent: it must never panic,
// must refuse damage as ErrCorrupt, and whatever decodes must re-encode and
// decode to an equal event.
func FuzzDecodeEvent(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := DecodeEvent(data, sampleRun, 0)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "decoder panic") {
				t.Fatalf("DecodeEvent(%x) = %v", data, err)
			}
			return
		}
		checkReencodes(t, ev)
		var d EventDecoder
		if ev2, err := d.Decode(data, sampleRun, ev.ID); err != nil || !eventsEqual(ev2, ev) {
			t.Fatalf("EventDecoder disagrees: %v %#v", err, ev2.Attrs)
		}
	})
}

// FuzzDecodeEventBody wraps the fuzzer's type byte and body in a valid
// envelope (with a correct checksum), so that the msgpack decoder itself is
// exercised. Besides the properties of FuzzDecodeEvent, whatever decodes
// must also round-trip exactly through the JSON export.
func FuzzDecodeEventBody(f *testing.F) {
	f.Fuzz(func(t *testing.T, typ byte, body []byte) {
		rec := withBody(EventType(typ%uint8(typeCount)), 1, body)
		ev, err := DecodeEvent(rec, sampleRun, 1)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || strings.Contains(err.Error(), "decoder panic") {
				t.Fatalf("DecodeEvent(%x) = %v", rec, err)
			}
			return
		}
		checkReencodes(t, ev)
		var d EventDecoder
		if ev2, err := d.Decode(rec, sampleRun, 1); err != nil || !eventsEqual(ev2, ev) {
			t.Fatalf("EventDecoder disagrees: %v %#v", err, ev2.Attrs)
		}
		checkJSONRoundTrip(t, []Event{ev})
	})
}

// FuzzImportJSON feeds documents to ImportJSON: it must never panic, must
// refuse bad input as ErrInvalid, and whatever imports must export and
// import again to events with the same encoding, and the same export.
func FuzzImportJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc []byte) {
		run, evs, err := ImportJSON(bytes.NewReader(doc))
		if err != nil {
			var ie *ImportError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &ie) {
				t.Fatalf("ImportJSON = %v", err)
			}
			return
		}
		var out bytes.Buffer
		if err := ExportJSON(&out, run, evs); err != nil {
			t.Fatalf("imported events do not export: %v", err)
		}
		run2, evs2, err := ImportJSON(bytes.NewReader(out.Bytes()))
		if err != nil || run2 != run || len(evs2) != len(evs) {
			t.Fatalf("export does not import: %v\n%s", err, out.String())
		}
		for i := range evs {
			if !bytes.Equal(mustEncode(t, evs[i]), mustEncode(t, evs2[i])) {
				t.Fatalf("event %d changed:\n%#v\n%#v", i+1, evs[i].Attrs, evs2[i].Attrs)
			}
		}
		var again bytes.Buffer
		if err := ExportJSON(&again, run2, evs2); err != nil || again.String() != out.String() {
			t.Fatalf("export is not stable: %v\n%s\n---\n%s", err, out.String(), again.String())
		}
	})
}

// corruptRecords returns damaged versions of a valid record of event 3,
// by name. Every one must be refused as corrupt.
func corruptRecords(t testing.TB) map[string][]byte {
	good := mustEncode(t, Event{ID: 3, Time: baseTime, Attrs: populated(TypeActivityCompleted)})
	edit := func(f func([]byte) []byte) []byte { return f(bytes.Clone(good)) }
	var badBody mpWriter
	badBody.writeArrayHeader(2)
	badBody.writeInt(1)
	badBody.writeString("started event id should be an integer")
	return map[string][]byte{
		"truncated":       good[:len(good)/2],
		"truncated-body":  reseal(bytes.Clone(good[:len(good)-3])),
		"header-only":     good[:headerLen],
		"bit-flipped":     edit(func(r []byte) []byte { r[len(r)/2] ^= 0x10; return r }),
		"bad-version":     edit(func(r []byte) []byte { r[0] = 9; return reseal(r) }),
		"bad-type":        edit(func(r []byte) []byte { r[1] = 0xee; return reseal(r) }),
		"bad-crc":         edit(func(r []byte) []byte { binary.BigEndian.PutUint32(r[2:6], 0xdeadbeef); return r }),
		"trailing":        reseal(append(bytes.Clone(good), "trailing garbage"...)),
		"wrong-id":        mustEncode(t, Event{ID: 4, Time: baseTime, Attrs: populated(TypeActivityCompleted)}),
		"bad-body":        withBody(TypeActivityCompleted, 3, badBody.b),
		"body-wrong-type": withBody(TypeTimerStarted, 3, body(t, good)),
	}
}

// TestCorruptRecordsAreRefused checks the generated corrupt records (the
// same as the fixtures and seeds) directly.
func TestCorruptRecordsAreRefused(t *testing.T) {
	for name, rec := range corruptRecords(t) {
		_, err := DecodeEvent(rec, sampleRun, 3)
		checkCorrupt(t, err, 3, name)
	}
}

// TestUpdateFuzzCorpus rewrites the seed corpora and the corrupt fixtures
// (with -update).
func TestUpdateFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz/*/seed-* and testdata/corrupt")
	}
	write := func(dir, name string, values ...any) {
		var b strings.Builder
		b.WriteString("go test fuzz v1\n")
		for _, v := range values {
			switch v := v.(type) {
			case []byte:
				fmt.Fprintf(&b, "[]byte(%q)\n", v)
			case byte:
				fmt.Fprintf(&b, "byte(%q)\n", v)
			}
		}
		path := filepath.Join("testdata", "fuzz", dir, "seed-"+name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll("testdata/corrupt", 0o755); err != nil {
		t.Fatal(err)
	}
	for name, rec := range corruptRecords(t) {
		write("FuzzDecodeEvent", "corrupt-"+name, rec)
		if err := os.WriteFile(filepath.Join("testdata", "corrupt", name+".bin"), rec, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	evs := samples()
	for _, ev := range evs {
		kind := "full"
		if ev.ID > int64(len(allTypes())) {
			kind = "zero"
		}
		name := fmt.Sprintf("%s-%s", kind, ev.Type())
		rec := mustEncode(t, ev)
		if kind == "full" && ev.ID%4 == 0 || kind == "zero" && ev.ID%8 == 0 {
			write("FuzzDecodeEvent", "valid-"+name, rec)
		}
		write("FuzzDecodeEventBody", "valid-"+name, byte(ev.Type()), body(t, rec))
	}
	// Bodies of older and newer versions, and damaged ones.
	sched := body(t, mustEncode(t, Event{ID: 1, Attrs: populated(TypeActivityScheduled)}))
	var w mpWriter
	w.writeArrayHeader(9)
	w.b = append(w.b, sched[1:]...)
	w.writeMapHeader(1)
	w.writeString("future")
	w.writeArrayHeader(2)
	w.writeBin([]byte{1})
	w.b = append(w.b, mpFixExt1, 3, 0)
	for name, b := range map[string][]byte{
		"newer-scheduled":     w.b,
		"older-scheduled":     append([]byte{0x93}, sched[1:len(sched)/3]...),
		"truncated-scheduled": sched[:len(sched)-5],
		"nil":                 {mpNil},
		"deep":                append(bytes.Repeat([]byte{0x91}, 200), 0x01),
		"huge-array":          {mpArray32, 0xff, 0xff, 0xff, 0xff},
		"huge-string":         {0x91, mpStr32, 0x7f, 0xff, 0xff, 0xff},
		"timestamp-96":        {0x93, 0xa1, 't', 0x05, mpExt8, 12, 0xff, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9},
		"float32-coefficient": {0x96, 0xa0, 0xa0, 0x92, 0xa0, 0xc0, 0x96, 0xa0, 0, 0, 0, 0, 0x95, 0, mpFloat32, 0x3f, 0xc0, 0, 0},
	} {
		typ := TypeActivityScheduled
		if name == "timestamp-96" {
			typ = TypeTimerStarted
		}
		write("FuzzDecodeEventBody", name, byte(typ), b)
	}
	var golden bytes.Buffer
	if err := ExportJSON(&golden, sampleRun, goldenHistory()); err != nil {
		t.Fatal(err)
	}
	write("FuzzImportJSON", "golden", golden.Bytes())
	// Every type, a few events per seed: small inputs fuzz faster.
	all := samples()
	for i := 0; i < len(all); i += 6 {
		var doc bytes.Buffer
		if err := ExportJSON(&doc, sampleRun, renumber(all[i:min(i+6, len(all))])); err != nil {
			t.Fatal(err)
		}
		write("FuzzImportJSON", fmt.Sprintf("types-%02d", i), doc.Bytes())
	}
	for name, doc := range map[string]string{
		"minimal":       `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"TimerFired","attributes":{"timerId":"t"}}]}`,
		"empty":         `{"workflowId":"w","runId":"r","events":[]}`,
		"base64-string": `{"workflowId":{"base64":"/w=="},"runId":"r","events":[{"id":1,"type":"SignalReceived","attributes":{"name":{"base64":"gA=="},"input":{"encoding":"msgpack","json":[1,-1,2.5,"x",{"a":null}]}}}]}`,
		"floats":        `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"ActivityScheduled","attributes":{"options":{"retryPolicy":{"backoffCoefficient":"NaN"}},"effect":2,"input":{"encoding":"json","json":{ "a" : [ 1 , 2 ] }}}}]}`,
		"bad-gap":       `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"TimerFired"},{"id":3,"type":"TimerFired"}]}`,
		"bad-field":     `{"workflowId":"w","runId":"r","events":[{"id":1,"type":"ActivityScheduled","attributes":{"options":{"startToCloseTimeout":"soon"}}}]}`,
	} {
		write("FuzzImportJSON", name, []byte(doc))
	}
}
