package history

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
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
