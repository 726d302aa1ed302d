package view

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// Payload renders p as {"encoding": …, "json": <value>}, or with "base64"
// in place of "json" when its data cannot be decoded. An empty payload is
// null.
func Payload(p history.Payload) json.RawMessage {
	if p.IsZero() {
		return json.RawMessage("null")
	}
	enc, _ := json.Marshal(p.Encoding)
	if p.ByRef() {
		// Stored by reference (a transcript chunk chain): its bytes are
		// elsewhere (GetChunks); show the reference, and the bytes this
		// payload adds.
		return json.RawMessage(fmt.Sprintf(`{"encoding":%s,"ref":%q,"addedBytes":%d}`, enc, hex.EncodeToString(p.Ref), len(p.Data)))
	}
	if js, ok := decode(p); ok {
		return json.RawMessage(fmt.Sprintf(`{"encoding":%s,"json":%s}`, enc, js))
	}
	return json.RawMessage(fmt.Sprintf(`{"encoding":%s,"base64":%q}`, enc, base64.StdEncoding.EncodeToString(p.Data)))
}

// PayloadValue returns p's data as JSON (compact), or false when it cannot
// be decoded.
func PayloadValue(p history.Payload) (json.RawMessage, bool) {
	if p.IsZero() || p.ByRef() {
		return nil, false
	}
	return decode(p)
}

// PayloadText renders p for a table cell: its JSON, or a description of
// what could not be decoded ("<12 bytes zstd>"); "" for an empty payload.
func PayloadText(p history.Payload) string {
	if p.IsZero() {
		return ""
	}
	if p.ByRef() {
		return fmt.Sprintf("<%s by reference %s…>", p.Encoding, hex.EncodeToString(p.Ref)[:12])
	}
	if js, ok := decode(p); ok {
		return string(js)
	}
	return fmt.Sprintf("<%d bytes %s>", len(p.Data), p.Encoding)
}

// PayloadIndent renders p's JSON indented, for people reading one value.
func PayloadIndent(p history.Payload) string {
	js, ok := PayloadValue(p)
	if !ok {
		return PayloadText(p)
	}
	var b bytes.Buffer
	if json.Indent(&b, js, "", "  ") != nil {
		return string(js)
	}
	return b.String()
}

// decode turns a payload's data into compact JSON with the SDK's default
// converter (which reads both msgpack and JSON payloads).
func decode(p history.Payload) (json.RawMessage, bool) {
	if p.Encoding == sdk.EncodingJSON {
		var c bytes.Buffer
		if json.Compact(&c, p.Data) != nil {
			return nil, false
		}
		return c.Bytes(), true
	}
	var v any
	if err := sdk.DefaultConverter().FromPayload(p, &v); err != nil {
		return nil, false
	}
	b, err := json.Marshal(jsonable(v, 0))
	if err != nil {
		return nil, false
	}
	return b, true
}

// jsonable turns msgpack's map[any]any into maps JSON can encode.
func jsonable(v any, depth int) any {
	if depth > maxDepth {
		return nil
	}
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e, depth+1)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e, depth+1)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e, depth+1)
		}
		return x
	}
	return v
}

// JSONInput turns a flag's or a form's JSON text into a JSON payload (the
// SDK's converters decode JSON payloads as well as msgpack ones). Empty
// text is the empty payload.
func JSONInput(what, s string) (history.Payload, error) {
	if strings.TrimSpace(s) == "" {
		return history.Payload{}, nil
	}
	if !json.Valid([]byte(s)) {
		return history.Payload{}, fmt.Errorf("%s is not valid JSON: %s (quote strings: '\"text\"')", what, abbreviate(s, 80))
	}
	return history.Payload{Encoding: sdk.EncodingJSON, Data: []byte(strings.TrimSpace(s))}, nil
}

// JSONFile reads a JSON payload from a file ("-" is standard input's
// file, given by the caller as stdin).
func JSONFile(what, path string) (history.Payload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return history.Payload{}, fmt.Errorf("%s: %w", what, err)
	}
	return JSONInput(what+" "+path, string(b))
}

func abbreviate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
