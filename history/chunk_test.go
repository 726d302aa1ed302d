package history

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func TestChunkRoundTripAndCorruption(t *testing.T) {
	root := Chunk{Data: []byte("system prompt|")}
	rh := root.Hash()
	child := Chunk{Parent: rh, Data: []byte("user: pay INV-9|")}
	for _, c := range []Chunk{root, child, {}} {
		key := c.Hash()
		got, err := DecodeChunk(key, EncodeChunk(c))
		if err != nil {
			t.Fatalf("decode %x: %v", key, err)
		}
		if !bytes.Equal(got.Parent, c.Parent) || !bytes.Equal(got.Data, c.Data) {
			t.Fatalf("round trip: got %+v want %+v", got, c)
		}
	}
	enc := EncodeChunk(child)
	for i := range enc {
		bad := bytes.Clone(enc)
		bad[i] ^= 0x40
		if _, err := DecodeChunk(child.Hash(), bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip of byte %d: got %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := DecodeChunk(child.Hash(), enc[:len(enc)-1]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := DecodeChunk(child.Hash(), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("empty: %v", err)
	}
	// The same bytes split differently are different chunks; the parent is
	// part of the content.
	if bytes.Equal(ChunkHash(nil, []byte("ab")), ChunkHash(ChunkHash(nil, []byte("a")), []byte("b"))) {
		t.Fatal("hash ignores the split")
	}
}

func TestResolveChain(t *testing.T) {
	m := MemChunks{}
	var tip []byte
	want := ""
	for _, part := range []string{"a", "bb", "", "ccc"} {
		tip = m.Add(Chunk{Parent: tip, Data: []byte(part)})
		want += part
	}
	p := Payload{Encoding: "x", Ref: tip, Data: []byte("dd")}
	got, err := ResolveBytes(context.Background(), m, p)
	if err != nil || string(got) != want+"dd" {
		t.Fatalf("resolve = %q, %v; want %q", got, err, want+"dd")
	}
	r, err := Resolve(context.Background(), m, Payload{Encoding: "x", Ref: tip})
	if err != nil || string(r.Data) != want || r.Ref != nil || r.Encoding != "x" {
		t.Fatalf("Resolve = %+v, %v", r, err)
	}
	if _, err := ResolveBytes(context.Background(), m, Payload{Ref: ChunkHash(nil, []byte("missing"))}); !errors.Is(err, ErrChunkNotFound) {
		t.Fatalf("missing chunk: %v", err)
	}
	// A chunk held under the wrong hash is refused.
	forged := MemChunks{}
	h := ChunkHash(nil, []byte("real"))
	forged[string(hexOf(h))] = Chunk{Data: []byte("forged")}
	if _, err := ResolveBytes(context.Background(), forged, Payload{Ref: h}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("forged chunk: %v", err)
	}
}

func hexOf(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

func TestSamePayload(t *testing.T) {
	prefix := ChunkHash(nil, []byte("prefix"))
	ext := Payload{Encoding: "m", Ref: prefix, Data: []byte("new")}
	stored := Payload{Encoding: "m", Ref: ext.StoredRef()}
	inline := Payload{Encoding: "m", Data: []byte("big")}
	for _, c := range []struct {
		a, b Payload
		same bool
	}{
		{ext, stored, true},
		{stored, ext, true},
		{inline, Payload{Encoding: "m", Ref: ChunkHash(nil, []byte("big"))}, true},
		{inline, inline, true},
		{inline, Payload{Encoding: "j", Data: []byte("big")}, false},
		{ext, Payload{Encoding: "m", Ref: prefix, Data: []byte("other")}, false},
		{stored, Payload{Encoding: "m", Ref: prefix}, false},
	} {
		if got := SamePayload(c.a, c.b); got != c.same {
			t.Errorf("SamePayload(%+v, %+v) = %v", c.a, c.b, got)
		}
	}
}

func TestVisitPayloadsSeesEveryPayload(t *testing.T) {
	for _, ty := range allTypes() {
		a := populated(ty)
		var names []string
		VisitPayloads(a, func(name string, p *Payload) {
			if p.Ref == nil {
				t.Errorf("%s.%s: visited a payload the populator did not fill", ty, name)
			}
			names = append(names, name)
			p.Ref = nil
		})
		// After clearing every visited Ref, no payload may still hold one.
		var left []string
		findRefs(a, &left)
		if len(left) > 0 {
			t.Errorf("%s: payloads not visited: %v (visited %v)", ty, left, names)
		}
	}
}

func TestDocumentWithChunksRoundTrips(t *testing.T) {
	m := MemChunks{}
	root := m.Add(Chunk{Data: []byte("root")})
	tip := m.Add(Chunk{Parent: root, Data: []byte{0, 1, 2}})
	run := RunRef{WorkflowID: "w", RunID: "r"}
	evs := []Event{{ID: 1, Time: baseTime, Attrs: &WorkflowStarted{WorkflowType: "A", TaskQueue: "q", Input: Payload{Encoding: "x", Ref: tip}}}}
	var buf bytes.Buffer
	if err := ExportDocument(&buf, Document{Run: run, Events: evs, Chunks: m}); err != nil {
		t.Fatal(err)
	}
	d, err := ImportDocument(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ResolveBytes(context.Background(), d.Chunks, d.Events[0].Attrs.(*WorkflowStarted).Input)
	if err != nil || string(got) != "root\x00\x01\x02" {
		t.Fatalf("resolved %q, %v", got, err)
	}
	// A chunk whose content was edited is refused on import.
	bad := bytes.Replace(buf.Bytes(), []byte("cm9vdA=="), []byte("cm9vdQ=="), 1)
	if _, err := ImportDocument(bytes.NewReader(bad)); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("edited chunk: %v", err)
	}
	// The plain import still reads the events.
	if _, evs2, err := ImportJSON(bytes.NewReader(buf.Bytes())); err != nil || len(evs2) != 1 {
		t.Fatalf("ImportJSON: %v", err)
	}
}
