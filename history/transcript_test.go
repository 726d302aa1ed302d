package history

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// TestToolResultText: strings as they are, anything else as JSON with
// sorted keys, nothing as null, whatever the encoding.
func TestToolResultText(t *testing.T) {
	mp := func(v any) Payload {
		b, err := msgpack.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return Payload{Encoding: "msgpack", Data: b}
	}
	for _, c := range []struct {
		p    Payload
		want string
	}{
		{mp("pay_001"), "pay_001"},
		{mp(map[string]any{"b": 1, "a": []any{true, "x"}}), `{"a":[true,"x"],"b":1}`},
		{Payload{Encoding: "json", Data: []byte(`{"z": 1, "a": 2}`)}, `{"a":2,"z":1}`},
		{Payload{}, "null"},
	} {
		got, err := ToolResultText(c.p)
		if err != nil || got != c.want {
			t.Errorf("ToolResultText(%s %q) = %q, %v; want %q", c.p.Encoding, c.p.Data, got, err, c.want)
		}
	}
	if _, err := ToolResultText(Payload{Encoding: "binary/protobuf", Data: []byte{1}}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an unknown encoding: %v", err)
	}
}

// TestContentReference: a message entry may name its content's payload;
// EntryMessage reads it back; a malformed reference is refused on decode.
func TestContentReference(t *testing.T) {
	m := MemChunks{}
	b, _ := msgpack.Marshal(map[string]any{"ok": true})
	ref := m.Add(Chunk{Parent: RootRef, Data: b})
	e := TranscriptEntry{Message: &ChatMessage{Role: "tool", ToolCallID: "c1"}, Content: &ContentRef{Ref: ref, Encoding: "msgpack"}}
	data, err := AppendTranscript(nil, e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTranscript(data)
	if err != nil || len(got) != 1 || got[0].Content == nil {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	msg, err := EntryMessage(context.Background(), m, got[0])
	if err != nil || msg.Content != `{"ok":true}` || msg.ToolCallID != "c1" {
		t.Fatalf("message %+v, %v", msg, err)
	}
	if _, err := EntryMessage(context.Background(), MemChunks{}, got[0]); !errors.Is(err, ErrChunkNotFound) {
		t.Fatalf("a missing chunk: %v", err)
	}
	for name, bad := range map[string]TranscriptEntry{
		"content and a reference": {Message: &ChatMessage{Role: "tool", Content: "x"}, Content: &ContentRef{Ref: ref}},
		"a short hash":            {Message: &ChatMessage{Role: "tool"}, Content: &ContentRef{Ref: ref[:8]}},
		"a config":                {Config: &ChatConfig{Model: "m"}, Content: &ContentRef{Ref: ref}},
	} {
		data, _ := AppendTranscript(nil, bad)
		if _, err := DecodeTranscript(data); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "content reference") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
