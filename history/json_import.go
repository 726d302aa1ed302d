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
	"strconv"
	"strings"
	"time"
)

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
