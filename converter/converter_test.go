package converter

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

type tagged struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Scores map[int]float64
	Nested []map[string]any
	When   time.Time
	Skip   string `json:"-"`
}

func TestCanonicalMsgpack(t *testing.T) {
	big := map[string]int{}
	for i := 0; i < 200; i++ {
		big[fmt.Sprint("k", i)] = i
	}
	v := tagged{
		Name:   "x",
		Labels: map[string]string{"b": "2", "a": "1", "c": "3"},
		Scores: map[int]float64{3: 0.3, 1: 0.1, 2: 0.2, 1000: 1},
		Nested: []map[string]any{{"z": 1, "y": map[string]int{"q": 1, "p": 2}}},
		When:   time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC),
		Skip:   "dropped",
	}
	var first []byte
	for i := 0; i < 50; i++ { // Go randomises map order: every encoding must agree
		p, err := Default().ToPayload(v)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = p.Data
		} else if !bytes.Equal(first, p.Data) {
			t.Fatalf("encoding %d differs", i)
		}
		b, _ := Default().ToPayload(big)
		b2, _ := Default().ToPayload(big)
		if !bytes.Equal(b.Data, b2.Data) {
			t.Fatal("map encodings differ")
		}
	}
	if _, sorted, _ := scanMsgpack(first); !sorted {
		t.Fatal("not canonical")
	}
	var back tagged
	if err := Default().FromPayload(history.Payload{Encoding: EncodingMsgpack, Data: first}, &back); err != nil {
		t.Fatal(err)
	}
	if back.Name != "x" || back.Labels["c"] != "3" || back.Scores[1000] != 1 || !back.When.Equal(v.When) || back.Skip != "" {
		t.Fatalf("round trip %+v", back)
	}
	if !bytes.Contains(first, []byte("name")) || bytes.Contains(first, []byte("Skip")) {
		t.Fatal("json tags not honoured")
	}
	// Compact ints: an int64 and an int8 of the same value encode alike.
	a, _ := CanonicalEncoding(int64(5))
	b, _ := CanonicalEncoding(int8(5))
	if !bytes.Equal(a, b) || len(a) != 1 {
		t.Fatalf("ints %x %x", a, b)
	}
}

// receipt is a small struct value to round-trip.
type receipt struct {
	PaymentID string
	Amount    int
}

func TestConverters(t *testing.T) {
	in := receipt{PaymentID: "p", Amount: 7}
	for _, enc := range []Converter{NewMsgpack(), NewJSON()} {
		p, err := enc.ToPayload(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, dec := range []Converter{NewMsgpack(), NewJSON()} {
			var out receipt
			if err := dec.FromPayload(p, &out); err != nil || out != in {
				t.Fatalf("%s → %T: %+v %v", p.Encoding, dec, out, err)
			}
		}
	}
	if p, err := Default().ToPayload(nil); err != nil || !p.IsZero() {
		t.Fatalf("nil: %+v %v", p, err)
	}
	out := receipt{PaymentID: "kept"}
	if err := Default().FromPayload(history.Payload{}, &out); err != nil || out.PaymentID != "kept" {
		t.Fatal("a zero payload must leave the value alone")
	}
	if err := Default().FromPayload(history.Payload{Encoding: "rot13", Data: []byte("x")}, &out); !errors.Is(err, ErrUnknownEncoding) {
		t.Fatalf("unknown encoding: %v", err)
	}
	if _, err := Default().ToPayload(make(chan int)); err == nil {
		t.Fatal("a channel must not encode")
	}
}

func TestCanonicalizeRejectsGarbage(t *testing.T) {
	for _, b := range [][]byte{{}, {0xc1}, {0x92, 0x01}, {0xdf, 0xff, 0xff, 0xff, 0xff}, {0xd9, 0x05, 'a'}} {
		if _, err := canonicalizeMsgpack(b); err == nil {
			t.Errorf("%x accepted", b)
		}
	}
	// Two objects back to back are not one value.
	if _, err := canonicalizeMsgpack([]byte{0x01, 0x02}); err == nil {
		t.Error("trailing bytes accepted")
	}
}

func FuzzCanonicalize(f *testing.F) {
	for _, v := range []any{map[string]int{"b": 1, "a": 2}, []any{map[int]string{2: "x", 1: "y"}, nil, true, 1.5}, "s", time.Unix(1, 2)} {
		b, _ := CanonicalEncoding(v)
		f.Add(b)
	}
	f.Add([]byte{0x82, 0xa1, 'b', 0x01, 0xa1, 'a', 0x02})
	f.Fuzz(func(t *testing.T, b []byte) {
		out, err := canonicalizeMsgpack(b)
		if err != nil {
			return
		}
		again, err := canonicalizeMsgpack(out)
		if err != nil || !bytes.Equal(out, again) || len(out) != len(b) {
			t.Fatalf("not idempotent: %x → %x → %x (%v)", b, out, again, err)
		}
	})
}
