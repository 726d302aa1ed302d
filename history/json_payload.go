package history

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// payloadJSON returns the JSON text that shows p's data, when the data can
// be shown as JSON and read back to the same bytes.
func payloadJSON(p Payload) ([]byte, bool) {
	switch p.Encoding {
	case "json":
		if !utf8.Valid(p.Data) || !json.Valid(p.Data) {
			return nil, false
		}
		var c bytes.Buffer
		if json.Compact(&c, p.Data) != nil || !bytes.Equal(c.Bytes(), p.Data) {
			return nil, false
		}
		return p.Data, true
	case "msgpack":
		r := mpReader{b: p.Data}
		js, ok := renderMsgpack(nil, &r, 0)
		if !ok || r.err != nil || r.remaining() != 0 {
			return nil, false
		}
		// Keep the rendering only if importing it reproduces the data
		// exactly (this rejects non-canonical encodings: an int64 written
		// in 9 bytes, a float32, a long header for a short string …).
		back, err := jsonToMsgpack(js)
		if err != nil || !bytes.Equal(back, p.Data) {
			return nil, false
		}
		return js, true
	}
	return nil, false
}

// maxRenderDepth bounds the nesting of msgpack shown as JSON.
const maxRenderDepth = 64

// renderMsgpack appends the JSON rendering of one msgpack value, keeping map
// order. It reports false for anything JSON cannot show exactly.
func renderMsgpack(b []byte, r *mpReader, depth int) ([]byte, bool) {
	if depth > maxRenderDepth {
		return nil, false
	}
	c, ok := r.peek()
	if !ok {
		return nil, false
	}
	switch {
	case c == mpNil:
		r.off++
		return append(b, "null"...), true
	case c == mpTrue || c == mpFalse:
		r.off++
		return strconv.AppendBool(b, c == mpTrue), true
	case c == mpUint64:
		p, ok := r.readN(9)
		if !ok {
			return nil, false
		}
		var u uint64
		for _, x := range p[1:] {
			u = u<<8 | uint64(x)
		}
		return strconv.AppendUint(b, u, 10), true
	case c <= 0x7f || c >= 0xe0 || (c >= mpUint8 && c <= mpInt64):
		v := r.readInt(math.MinInt64, math.MaxInt64)
		return strconv.AppendInt(b, v, 10), r.err == nil
	case c == mpFloat64:
		f := r.readFloat()
		if r.err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, false
		}
		return appendJSONFloat(b, f), true
	case c&0xe0 == mpFixStr || c == mpStr8 || c == mpStr16 || c == mpStr32:
		s := r.readStrBytes()
		if r.err != nil || !utf8.Valid(s) {
			return nil, false
		}
		return appendJSONString(b, string(s)), true
	case c&0xf0 == mpFixArray || c == mpArray16 || c == mpArray32:
		n, _ := r.readArrayLen()
		if r.err != nil {
			return nil, false
		}
		b = append(b, '[')
		for i := 0; i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = renderMsgpack(b, r, depth+1); !ok {
				return nil, false
			}
		}
		return append(b, ']'), true
	case c&0xf0 == mpFixMap || c == mpMap16 || c == mpMap32:
		n, _ := r.readMapLen()
		if r.err != nil {
			return nil, false
		}
		seen := make(map[string]struct{}, n)
		b = append(b, '{')
		for i := 0; i < n; i++ {
			if c, ok := r.peek(); !ok || !(c&0xe0 == mpFixStr || c == mpStr8 || c == mpStr16 || c == mpStr32) {
				return nil, false // JSON keys are strings
			}
			k := r.readStrBytes()
			if r.err != nil || !utf8.Valid(k) {
				return nil, false
			}
			if _, dup := seen[string(k)]; dup {
				return nil, false
			}
			seen[string(k)] = struct{}{}
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, string(k))
			b = append(b, ':')
			if b, ok = renderMsgpack(b, r, depth+1); !ok {
				return nil, false
			}
		}
		return append(b, '}'), true
	}
	return nil, false // float32, binary, extensions: no exact JSON form
}

// jsonToMsgpack converts one JSON value to canonical msgpack, keeping object
// member order: shortest headers, integers in the shortest form, numbers
// with a '.' or an exponent as float64. Duplicate object keys, integers
// outside the int64/uint64 range and float overflow are errors.
func jsonToMsgpack(js []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var w mpWriter
	if err := convertJSONValue(dec, &w, 0); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return w.b, w.err
}

// maxJSONDepth bounds the nesting of payload JSON converted to msgpack.
const maxJSONDepth = 1000

func convertJSONValue(dec *json.Decoder, w *mpWriter, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("JSON nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch v := tok.(type) {
	case nil:
		w.writeNil()
	case bool:
		w.writeBool(v)
	case string:
		w.writeString(v)
	case json.Number:
		return writeJSONNumber(w, string(v))
	case json.Delim:
		// The header needs the count: convert the elements into a scratch
		// writer, then copy them after the header.
		var inner mpWriter
		n := 0
		switch v {
		case '[':
			for ; dec.More(); n++ {
				if err := convertJSONValue(dec, &inner, depth+1); err != nil {
					return err
				}
			}
			w.writeArrayHeader(n)
		case '{':
			seen := map[string]bool{}
			for ; dec.More(); n++ {
				k, err := dec.Token()
				if err != nil {
					return err
				}
				key := k.(string) // the decoder only yields string keys here
				if seen[key] {
					return fmt.Errorf("duplicate key %q", key)
				}
				seen[key] = true
				inner.writeString(key)
				if err := convertJSONValue(dec, &inner, depth+1); err != nil {
					return err
				}
			}
			w.writeMapHeader(n)
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return err
		}
		w.b = append(w.b, inner.b...)
		if inner.err != nil {
			w.fail(inner.err)
		}
	}
	return nil
}

func writeJSONNumber(w *mpWriter, s string) error {
	if strings.ContainsAny(s, ".eE") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return fmt.Errorf("number %s: %w", s, err)
		}
		w.writeFloat64(f)
		return nil
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		w.writeInt(i)
		return nil
	}
	u, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return fmt.Errorf("integer %s out of range", s)
	}
	w.writeUint(u)
	return nil
}
