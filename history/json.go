package history

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The JSON form of a history is what `cairn history export` writes and what
// the replayer reads. It is meant to be read by people, and it round-trips
// exactly: ImportJSON(ExportJSON(events)) returns events whose EncodeEvent
// bytes are identical to those of the originals.
//
//	{
//	  "workflowId": "invoice-INV-9",
//	  "runId": "0193a1b2-run",
//	  "events": [
//	    {
//	      "id": 1,
//	      "time": "2025-03-14T09:26:53.589793238Z",
//	      "type": "WorkflowStarted",
//	      "attributes": {
//	        "workflowType": "PayInvoice",
//	        "taskQueue": "agents",
//	        "input": {"encoding": "msgpack", "json": {"invoice": "INV-9", "amount": 1250}},
//	        "executionTimeout": "1h30m0s"
//	      }
//	    }
//	  ]
//	}
//
// Rules:
//   - Events are numbered contiguously from 1; "type" is the EventType name;
//     "time" (RFC 3339, UTC, nanoseconds) is left out for a zero time.
//   - Attribute names are the Go field names in lower camel case ("ID" is
//     written "Id"). Fields holding their zero value are left out, except
//     enums (effect, resolution, parentClosePolicy), which are always shown,
//     by name ("SideEffect", "happened", "Terminate"; a number when the value
//     has no name). A nil retry policy or failure is left out; a non-nil
//     empty one is {}.
//   - Durations are Go duration strings ("1m30s"), times RFC 3339 strings,
//     floats JSON numbers (the strings "NaN", "+Inf" and "-Inf" for the
//     values JSON cannot hold).
//   - A string that is not valid UTF-8 is written {"base64": "…"}.
//   - A payload is {"encoding": "…", "json": …} when its data can be shown
//     as JSON without loss, and {"encoding": "…", "base64": "…"} otherwise
//     (no data key at all for nil data). Data in encoding "json" is shown as
//     JSON when it is valid UTF-8 JSON already in compact form. Data in
//     encoding "msgpack" is shown as JSON when it holds only nil, booleans,
//     integers, float64s, UTF-8 strings, arrays and maps with distinct
//     string keys, encoded canonically (the shortest headers, as
//     vmihailenco/msgpack writes with UseCompactInts), so that the JSON
//     converts back to the very same bytes: map order is preserved, and a
//     float64 is always written with a '.' or an exponent ("2.0") so it does
//     not come back as an integer.
//
// ImportJSON is strict: unknown or duplicate fields, wrong types, values out
// of range and events out of sequence are refused with an *ImportError that
// names the event and the field.

// ImportError says why ImportJSON refused its input. It matches ErrInvalid.
type ImportError struct {
	// Index is the event's position in "events" (0-based), or -1 when the
	// problem is outside the events.
	Index int
	// Field is the JSON path of the offending field within the event (or
	// the document), e.g. "attributes.options.startToCloseTimeout"; empty
	// when the problem is the event or the document as a whole.
	Field string
	// Err says what is wrong.
	Err error
}

// Error names the event and the field.
func (e *ImportError) Error() string {
	where := "document"
	if e.Index >= 0 {
		where = fmt.Sprintf("events[%d]", e.Index)
	}
	if e.Field != "" {
		where += "." + e.Field
	}
	return fmt.Sprintf("history: invalid history JSON: %s: %v", where, e.Err)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ImportError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the underlying cause.
func (e *ImportError) Unwrap() error { return e.Err }

// Document is a whole exported history: the run, its events and, for a
// self-contained export, the payload chunks its events reference (keyed by
// hex hash), so that it replays without the server that recorded it.
type Document struct {
	Run    RunRef
	Events []Event
	// Chunks are the chunks reachable from the events' references; nil for
	// an export that keeps references only.
	Chunks MemChunks
}

// ExportJSON writes run and its events as an indented JSON document (see the
// format above). The events must be numbered contiguously from 1 and must be
// encodable (EncodeEvent); otherwise ExportJSON returns an error wrapping
// ErrInvalid and writes nothing. The output is stable: the same events
// always produce the same bytes.
func ExportJSON(w io.Writer, run RunRef, events []Event) error {
	return ExportDocument(w, Document{Run: run, Events: events})
}

// ExportDocument is ExportJSON with the document's chunks, written after
// the events as "chunks": {"<hex hash>": {"parent": "<hex>", "base64":
// "…"}}, in hash order. Each chunk is checked against its hash.
func ExportDocument(w io.Writer, d Document) error {
	run, events := d.Run, d.Events
	if run.WorkflowID == "" || run.RunID == "" {
		return fmt.Errorf("%w: export: empty workflow or run id", ErrInvalid)
	}
	e := jsonExporter{}
	e.b = append(e.b, `{"workflowId":`...)
	e.string(run.WorkflowID)
	e.b = append(e.b, `,"runId":`...)
	e.string(run.RunID)
	e.b = append(e.b, `,"events":[`...)
	var rec []byte
	for i, ev := range events {
		if ev.ID != int64(i+1) {
			return fmt.Errorf("%w: export: event %d at position %d (events must be numbered from 1)", ErrInvalid, ev.ID, i)
		}
		var err error
		if rec, err = AppendEvent(rec[:0], ev); err != nil {
			return fmt.Errorf("export: %w", err)
		}
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.event(ev)
	}
	e.b = append(e.b, ']')
	if len(d.Chunks) > 0 {
		if err := e.chunks(d.Chunks); err != nil {
			return err
		}
	}
	e.b = append(e.b, '}')
	var out bytes.Buffer
	out.Grow(2 * len(e.b))
	if err := json.Indent(&out, e.b, "", "  "); err != nil {
		return fmt.Errorf("history: export: produced invalid JSON: %w", err) // a bug
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

// chunks writes the "chunks" object, keys sorted.
func (e *jsonExporter) chunks(m MemChunks) error {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.b = append(e.b, `,"chunks":{`...)
	for i, k := range keys {
		c := m[k]
		if hex.EncodeToString(c.Hash()) != k {
			return fmt.Errorf("%w: export: chunk %s does not match its hash", ErrInvalid, k)
		}
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.string(k)
		e.b = append(e.b, ':', '{')
		if c.Parent != nil {
			e.b = append(e.b, `"parent":`...)
			e.string(hex.EncodeToString(c.Parent))
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, `"base64":"`...)
		e.b = base64.StdEncoding.AppendEncode(e.b, c.Data)
		e.b = append(e.b, '"', '}')
	}
	e.b = append(e.b, '}')
	return nil
}

// event writes one (encodable) event as a compact JSON object.
func (e *jsonExporter) event(ev Event) {
	e.b = append(e.b, `{"id":`...)
	e.b = strconv.AppendInt(e.b, ev.ID, 10)
	if !ev.Time.IsZero() {
		e.b = append(e.b, `,"time":"`...)
		e.b = ev.Time.UTC().AppendFormat(e.b, time.RFC3339Nano)
		e.b = append(e.b, '"')
	}
	e.b = append(e.b, `,"type":"`...)
	e.b = append(e.b, ev.Type().String()...)
	e.b = append(e.b, `","attributes":{`...)
	e.first = true
	ev.Attrs.(fielder).fields(e)
	e.b = append(e.b, "}}"...)
}

// jsonExporter writes an object's fields as compact JSON.
type jsonExporter struct {
	b     []byte
	first bool // no field written yet in the innermost object
}

func (e *jsonExporter) key(name string) {
	if !e.first {
		e.b = append(e.b, ',')
	}
	e.first = false
	e.b = append(e.b, '"')
	e.b = append(e.b, name...)
	e.b = append(e.b, '"', ':')
}

// string writes s as a JSON string, or as {"base64": …} when it is not
// valid UTF-8.
func (e *jsonExporter) string(s string) {
	if utf8.ValidString(s) {
		e.b = appendJSONString(e.b, s)
		return
	}
	e.b = append(e.b, `{"base64":"`...)
	e.b = base64.StdEncoding.AppendEncode(e.b, []byte(s))
	e.b = append(e.b, '"', '}')
}

func (e *jsonExporter) str(name string, p *string) {
	if *p != "" {
		e.key(name)
		e.string(*p)
	}
}

func (e *jsonExporter) boolean(name string, p *bool) {
	if *p {
		e.key(name)
		e.b = append(e.b, "true"...)
	}
}

func (e *jsonExporter) int64(name string, p *int64) {
	if *p != 0 {
		e.key(name)
		e.b = strconv.AppendInt(e.b, *p, 10)
	}
}

func (e *jsonExporter) int32(name string, p *int32) {
	if *p != 0 {
		e.key(name)
		e.b = strconv.AppendInt(e.b, int64(*p), 10)
	}
}

func (e *jsonExporter) duration(name string, p *time.Duration) {
	if *p != 0 {
		e.key(name)
		e.b = appendJSONString(e.b, p.String())
	}
}

func (e *jsonExporter) float64(name string, p *float64) {
	if math.Float64bits(*p) != 0 { // -0 is not zero here
		e.key(name)
		e.b = appendJSONFloat(e.b, *p)
	}
}

func (e *jsonExporter) strings(name string, p *[]string) {
	if *p == nil {
		return
	}
	e.key(name)
	e.b = append(e.b, '[')
	for i, s := range *p {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.string(s)
	}
	e.b = append(e.b, ']')
}

func (e *jsonExporter) time(name string, p *time.Time) {
	if !p.IsZero() {
		e.key(name)
		e.b = append(e.b, '"')
		e.b = p.UTC().AppendFormat(e.b, time.RFC3339Nano)
		e.b = append(e.b, '"')
	}
}

func (e *jsonExporter) enum(name string, p *uint8, names []string) {
	e.key(name)
	if int(*p) < len(names) && names[*p] != "" {
		e.b = appendJSONString(e.b, names[*p])
	} else {
		e.b = strconv.AppendUint(e.b, uint64(*p), 10)
	}
}

func (e *jsonExporter) payload(name string, p *Payload) {
	if p.Encoding == "" && p.Data == nil && p.Ref == nil {
		return
	}
	e.key(name)
	e.b = append(e.b, '{')
	e.first = true
	if p.Encoding != "" {
		e.key("encoding")
		e.string(p.Encoding)
	}
	if p.Data != nil {
		if js, ok := payloadJSON(*p); ok {
			e.key("json")
			e.b = append(e.b, js...)
		} else {
			e.key("base64")
			e.b = append(e.b, '"')
			e.b = base64.StdEncoding.AppendEncode(e.b, p.Data)
			e.b = append(e.b, '"')
		}
	}
	if p.Ref != nil {
		e.key("ref")
		e.string(hex.EncodeToString(p.Ref))
	}
	e.b = append(e.b, '}')
	e.first = false
}

// nested writes f as an object; an empty object is left out unless keep.
func (e *jsonExporter) nested(name string, f fielder, keep bool) {
	mark, wasFirst := len(e.b), e.first
	e.key(name)
	e.b = append(e.b, '{')
	e.first = true
	f.fields(e)
	if e.first && !keep {
		e.b, e.first = e.b[:mark], wasFirst
		return
	}
	e.b = append(e.b, '}')
	e.first = false
}

func (e *jsonExporter) object(name string, p fielder) { e.nested(name, p, false) }

func (e *jsonExporter) failurePtr(name string, p **Failure) {
	if *p != nil {
		e.nested(name, *p, true)
	}
}

func (e *jsonExporter) retryPolicyPtr(name string, p **RetryPolicy) {
	if *p != nil {
		e.nested(name, *p, true)
	}
}

// appendJSONString appends s (valid UTF-8) as a JSON string, escaping only
// what JSON requires.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendJSONFloat appends f as a JSON number that always reads back as a
// float: with a '.' or an exponent. Values JSON cannot hold are strings.
func appendJSONFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, 'g', -1, 64)
	if !bytes.ContainsAny(b[start:], ".e") {
		b = append(b, '.', '0')
	}
	return b
}

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

// ImportJSON reads a document written by ExportJSON. It returns the run and
// its events, which EncodeEvent encodes to exactly the bytes of the events
// that were exported. Any problem returns an *ImportError (matching
// ErrInvalid) naming the event and the field; ImportJSON never panics.
func ImportJSON(r io.Reader) (RunRef, []Event, error) {
	d, err := ImportDocument(r)
	return d.Run, d.Events, err
}

// ImportDocument reads a document written by ExportDocument (or
// ExportJSON), chunks included; each chunk is checked against its hash.
func ImportDocument(r io.Reader) (Document, error) {
	run, events, chunks, err := importDocument(r)
	return Document{Run: run, Events: events, Chunks: chunks}, err
}

func importDocument(r io.Reader) (RunRef, []Event, MemChunks, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return RunRef{}, nil, nil, fmt.Errorf("history: import: %w", err)
	}
	docErr := func(field string, err error) (RunRef, []Event, MemChunks, error) {
		return RunRef{}, nil, nil, &ImportError{Index: -1, Field: field, Err: err}
	}
	doc, err := parseObject(data)
	if err != nil {
		return docErr("", err)
	}
	var run RunRef
	for _, f := range []struct {
		name string
		p    *string
	}{{"workflowId", &run.WorkflowID}, {"runId", &run.RunID}} {
		raw, ok := doc.take(f.name)
		if !ok {
			return docErr(f.name, errors.New("missing"))
		}
		if *f.p, err = parseJSONString(raw); err != nil {
			return docErr(f.name, err)
		}
		if *f.p == "" {
			return docErr(f.name, errors.New("empty"))
		}
	}
	rawEvents, ok := doc.take("events")
	if !ok {
		return docErr("events", errors.New("missing"))
	}
	var chunks MemChunks
	if raw, ok := doc.take("chunks"); ok {
		if chunks, err = importChunks(raw); err != nil {
			return docErr("chunks", err)
		}
	}
	if err := doc.unknown(); err != nil {
		return docErr("", err)
	}
	var list []json.RawMessage
	if err := strictUnmarshal(rawEvents, &list); err != nil || list == nil {
		return docErr("events", fmt.Errorf("not an array: %v", err))
	}
	events := make([]Event, len(list))
	var rec []byte
	for i, raw := range list {
		ev, field, err := importEvent(raw, int64(i+1))
		if err != nil {
			return RunRef{}, nil, nil, &ImportError{Index: i, Field: field, Err: err}
		}
		if rec, err = AppendEvent(rec[:0], ev); err != nil {
			return RunRef{}, nil, nil, &ImportError{Index: i, Err: err}
		}
		events[i] = ev
	}
	return run, events, chunks, nil
}

// importChunks reads the "chunks" object, checking every chunk's hash.
func importChunks(raw []byte) (MemChunks, error) {
	var m map[string]struct {
		Parent string `json:"parent"`
		Base64 string `json:"base64"`
	}
	if err := strictUnmarshal(raw, &m); err != nil {
		return nil, err
	}
	out := make(MemChunks, len(m))
	for k, v := range m {
		var c Chunk
		var err error
		if v.Parent != "" {
			if c.Parent, err = hex.DecodeString(v.Parent); err != nil || len(c.Parent) != HashSize {
				return nil, fmt.Errorf("chunk %s: bad parent %q", k, v.Parent)
			}
		}
		if c.Data, err = base64.StdEncoding.DecodeString(v.Base64); err != nil {
			return nil, fmt.Errorf("chunk %s: %w", k, err)
		}
		if hex.EncodeToString(c.Hash()) != k {
			return nil, fmt.Errorf("chunk %s: %w: its content does not match its hash", k, ErrCorrupt)
		}
		out[k] = c
	}
	return out, nil
}

// importEvent reads one event, which must carry id want (0: any id). On error it also
// returns the path of the field at fault.
func importEvent(raw []byte, want int64) (Event, string, error) {
	obj, err := parseObject(raw)
	if err != nil {
		return Event{}, "", err
	}
	var ev Event
	rawID, ok := obj.take("id")
	if !ok {
		return Event{}, "id", errors.New("missing")
	}
	if ev.ID, err = parseJSONInt(rawID, 1, math.MaxInt64); err != nil {
		return Event{}, "id", err
	}
	if want != 0 && ev.ID != want {
		return Event{}, "id", fmt.Errorf("event %d where event %d was expected (events are numbered from 1, without gaps)", ev.ID, want)
	}
	if rawTime, ok := obj.take("time"); ok {
		if ev.Time, err = parseJSONTime(rawTime); err != nil {
			return Event{}, "time", err
		}
		if !eventTimeOK(ev.Time) {
			return Event{}, "time", fmt.Errorf("%s is outside the years 1678-2262 an event time can hold", ev.Time)
		}
	}
	rawType, ok := obj.take("type")
	if !ok {
		return Event{}, "type", errors.New("missing")
	}
	var name string
	if err := strictUnmarshal(rawType, &name); err != nil {
		return Event{}, "type", err
	}
	t, ok := ParseEventType(name)
	if !ok {
		return Event{}, "type", fmt.Errorf("unknown event type %q", name)
	}
	ev.Attrs = NewAttributes(t)
	if rawAttrs, ok := obj.take("attributes"); ok {
		im := jsonImporter{prefix: "attributes."}
		im.readObject(rawAttrs, ev.Attrs.(fielder))
		if im.err != nil {
			return Event{}, im.errField, im.err
		}
	}
	if err := obj.unknown(); err != nil {
		return Event{}, "", err
	}
	return ev, "", nil
}

// jsonObject is a parsed JSON object: its members by exact name.
type jsonObject struct {
	members map[string]json.RawMessage
	order   []string
}

// parseObject parses raw as one JSON object, refusing duplicate members.
func parseObject(raw []byte) (*jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("expected an object, found %s", describeJSON(raw))
	}
	obj := &jsonObject{members: map[string]json.RawMessage{}}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if _, dup := obj.members[key]; dup {
			return nil, fmt.Errorf("duplicate field %q", key)
		}
		obj.members[key] = v
		obj.order = append(obj.order, key)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the object")
	}
	return obj, nil
}

// take returns and removes the member called name.
func (o *jsonObject) take(name string) (json.RawMessage, bool) {
	v, ok := o.members[name]
	delete(o.members, name)
	return v, ok
}

// unknown reports the first member that was not taken.
func (o *jsonObject) unknown() error {
	for _, k := range o.order {
		if _, ok := o.members[k]; ok {
			return fmt.Errorf("unknown field %q", k)
		}
	}
	return nil
}

// describeJSON names the kind of a JSON value for error messages.
func describeJSON(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// strictUnmarshal decodes raw into v, refusing null and trailing data.
func strictUnmarshal(raw []byte, v any) error {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return errors.New("null is not allowed")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("expected %s, found %s", jsonKind(v), describeJSON(raw))
	}
	return nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case *string:
		return "a string"
	case *[]json.RawMessage:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// parseJSONString reads a string written by jsonExporter.string.
func parseJSONString(raw []byte) (string, error) {
	if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '{' {
		obj, err := parseObject(t)
		if err != nil {
			return "", err
		}
		b64, ok := obj.take("base64")
		if !ok {
			return "", errors.New(`expected a string or {"base64": …}`)
		}
		if err := obj.unknown(); err != nil {
			return "", err
		}
		b, err := parseBase64(b64)
		return string(b), err
	}
	var s string
	err := strictUnmarshal(raw, &s)
	return s, err
}

func parseBase64(raw []byte) ([]byte, error) {
	var s string
	if err := strictUnmarshal(raw, &s); err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("bad base64: %w", err)
	}
	if b == nil {
		b = []byte{}
	}
	return b, nil
}

// parseJSONInt reads an integer in [lo, hi].
func parseJSONInt(raw []byte, lo, hi int64) (int64, error) {
	s := string(bytes.TrimSpace(raw))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if describeJSON(raw) != "a number" {
			return 0, fmt.Errorf("expected an integer, found %s", describeJSON(raw))
		}
		return 0, fmt.Errorf("%s is not an integer in range", s)
	}
	if v < lo || v > hi {
		return 0, fmt.Errorf("%d is out of range [%d, %d]", v, lo, hi)
	}
	return v, nil
}

func parseJSONTime(raw []byte) (time.Time, error) {
	var s string
	if err := strictUnmarshal(raw, &s); err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// eventTimeOK reports whether t survives the envelope's nanosecond clock.
func eventTimeOK(t time.Time) bool {
	return t.IsZero() || time.Unix(0, t.UnixNano()).Equal(t)
}

// jsonImporter reads an object's fields from JSON; the first error sticks.
type jsonImporter struct {
	obj      *jsonObject
	prefix   string // path of the innermost object, ending in "."
	err      error
	errField string
}

func (im *jsonImporter) fail(name string, err error) {
	if im.err == nil {
		im.err, im.errField = err, im.prefix+name
	}
}

// readObject reads raw (a JSON object) into f, which holds zero values.
func (im *jsonImporter) readObject(raw []byte, f fielder) {
	obj, err := parseObject(raw)
	if err != nil {
		im.err, im.errField = err, strings.TrimSuffix(im.prefix, ".")
		return
	}
	outerObj := im.obj
	im.obj = obj
	f.fields(im)
	if err := obj.unknown(); err != nil && im.err == nil {
		im.err, im.errField = err, strings.TrimSuffix(im.prefix, ".")
	}
	im.obj = outerObj
}

// take returns the member name, unless an error already occurred.
func (im *jsonImporter) take(name string) (json.RawMessage, bool) {
	if im.err != nil {
		return nil, false
	}
	return im.obj.take(name)
}

func (im *jsonImporter) str(name string, p *string) {
	if raw, ok := im.take(name); ok {
		s, err := parseJSONString(raw)
		if err != nil {
			im.fail(name, err)
		}
		*p = s
	}
}

func (im *jsonImporter) boolean(name string, p *bool) {
	if raw, ok := im.take(name); ok {
		switch string(bytes.TrimSpace(raw)) {
		case "true":
			*p = true
		case "false":
			*p = false
		default:
			im.fail(name, fmt.Errorf("expected a boolean, found %s", describeJSON(raw)))
		}
	}
}

func (im *jsonImporter) int64(name string, p *int64) {
	if raw, ok := im.take(name); ok {
		v, err := parseJSONInt(raw, math.MinInt64, math.MaxInt64)
		if err != nil {
			im.fail(name, err)
		}
		*p = v
	}
}

func (im *jsonImporter) int32(name string, p *int32) {
	if raw, ok := im.take(name); ok {
		v, err := parseJSONInt(raw, math.MinInt32, math.MaxInt32)
		if err != nil {
			im.fail(name, err)
		}
		*p = int32(v)
	}
}

func (im *jsonImporter) duration(name string, p *time.Duration) {
	if raw, ok := im.take(name); ok {
		var s string
		if err := strictUnmarshal(raw, &s); err != nil {
			im.fail(name, fmt.Errorf(`expected a duration string like "1m30s": %w`, err))
			return
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			im.fail(name, err)
		}
		*p = d
	}
}

func (im *jsonImporter) float64(name string, p *float64) {
	raw, ok := im.take(name)
	if !ok {
		return
	}
	switch string(bytes.TrimSpace(raw)) {
	case `"NaN"`:
		*p = math.NaN()
		return
	case `"+Inf"`:
		*p = math.Inf(1)
		return
	case `"-Inf"`:
		*p = math.Inf(-1)
		return
	}
	if describeJSON(raw) != "a number" {
		im.fail(name, fmt.Errorf("expected a number, found %s", describeJSON(raw)))
		return
	}
	f, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
	if err != nil {
		im.fail(name, err)
	}
	*p = f
}

func (im *jsonImporter) strings(name string, p *[]string) {
	raw, ok := im.take(name)
	if !ok {
		return
	}
	var list []json.RawMessage
	if err := strictUnmarshal(raw, &list); err != nil {
		im.fail(name, err)
		return
	}
	s := make([]string, len(list))
	for i, r := range list {
		var err error
		if s[i], err = parseJSONString(r); err != nil {
			im.fail(fmt.Sprintf("%s[%d]", name, i), err)
			return
		}
	}
	*p = s
}

func (im *jsonImporter) time(name string, p *time.Time) {
	if raw, ok := im.take(name); ok {
		t, err := parseJSONTime(raw)
		if err == nil && (t.Unix() < minAttrTime || t.Unix() > maxAttrTime) {
			err = fmt.Errorf("%s is outside years 1-9999", t)
		}
		if err != nil {
			im.fail(name, err)
		}
		*p = t
	}
}

func (im *jsonImporter) enum(name string, p *uint8, names []string) {
	raw, ok := im.take(name)
	if !ok {
		return
	}
	if describeJSON(raw) == "a number" {
		v, err := parseJSONInt(raw, 0, math.MaxUint8)
		if err != nil {
			im.fail(name, err)
		}
		*p = uint8(v)
		return
	}
	var s string
	if err := strictUnmarshal(raw, &s); err != nil {
		im.fail(name, err)
		return
	}
	for i, n := range names {
		if n != "" && n == s {
			*p = uint8(i)
			return
		}
	}
	im.fail(name, fmt.Errorf("unknown value %q (known: %s)", s, strings.Join(nonEmpty(names), ", ")))
}

func nonEmpty(names []string) []string {
	var out []string
	for _, n := range names {
		if n != "" {
			out = append(out, n)
		}
	}
	return out
}

func (im *jsonImporter) payload(name string, p *Payload) {
	raw, ok := im.take(name)
	if !ok {
		return
	}
	obj, err := parseObject(raw)
	if err != nil {
		im.fail(name, err)
		return
	}
	if enc, ok := obj.take("encoding"); ok {
		if p.Encoding, err = parseJSONString(enc); err != nil {
			im.fail(name+".encoding", err)
			return
		}
	}
	js, hasJSON := obj.take("json")
	b64, hasB64 := obj.take("base64")
	if ref, ok := obj.take("ref"); ok {
		s, err := parseJSONString(ref)
		if err == nil {
			p.Ref, err = hex.DecodeString(s)
		}
		if err == nil && len(p.Ref) != HashSize {
			err = fmt.Errorf("a chunk reference is %d bytes, not %d", HashSize, len(p.Ref))
		}
		if err != nil {
			im.fail(name+".ref", err)
			return
		}
	}
	if err := obj.unknown(); err != nil {
		im.fail(name, err)
		return
	}
	switch {
	case hasJSON && hasB64:
		im.fail(name, errors.New(`both "json" and "base64"`))
	case hasB64:
		if p.Data, err = parseBase64(b64); err != nil {
			im.fail(name+".base64", err)
		}
	case hasJSON && p.Encoding == "json":
		var c bytes.Buffer
		if err := json.Compact(&c, js); err != nil {
			im.fail(name+".json", err)
			return
		}
		p.Data = c.Bytes()
	case hasJSON && p.Encoding == "msgpack":
		if p.Data, err = jsonToMsgpack(js); err != nil {
			im.fail(name+".json", err)
		}
	case hasJSON:
		im.fail(name+".json", fmt.Errorf(`"json" data needs encoding "json" or "msgpack", not %q`, p.Encoding))
	case p.Encoding == "" && p.Ref == nil:
		im.fail(name, errors.New("empty payload (leave the field out instead)"))
	}
}

func (im *jsonImporter) nested(name string, raw []byte, f fielder) {
	outer := im.prefix
	im.prefix += name + "."
	im.readObject(raw, f)
	im.prefix = outer
}

func (im *jsonImporter) object(name string, p fielder) {
	if raw, ok := im.take(name); ok {
		im.nested(name, raw, p)
	}
}

func (im *jsonImporter) failurePtr(name string, p **Failure) {
	if raw, ok := im.take(name); ok {
		*p = new(Failure)
		im.nested(name, raw, *p)
	}
}

func (im *jsonImporter) retryPolicyPtr(name string, p **RetryPolicy) {
	if raw, ok := im.take(name); ok {
		*p = new(RetryPolicy)
		im.nested(name, raw, *p)
	}
}
