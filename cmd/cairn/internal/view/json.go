// Package view is how Cairn's values look to people and to scripts: the
// one JSON convention shared by the CLI's --json and the web UI, payloads
// rendered as JSON, and a history laid out as a timeline.
//
//	b, err := view.Marshal(describeResponse) // {"info": {"workflowId": …, "status": "paused", …}, …}
//	rows := view.Timeline(events)            // one row per event: name, duration, attempt, detail
//	fmt.Println(view.PayloadText(p))         // {"Invoice":"INV-9","Amount":4200}
//
// The JSON convention (the same as the history export's, history/json.go):
//
//   - Keys are the Go field names in lower camel case, "ID" written "Id"
//     and "IDs" "Ids" ("workflowId", "scheduledEventId", "runIds").
//   - Empty strings, zero times, zero durations, nil pointers, empty slices
//     and maps, and empty payloads are left out; numbers and booleans are
//     always written; and so is a field tagged `view:"keep"` — the list of
//     a list command's answer, so that an empty one is {"effects": []},
//     not {}.
//   - Times are RFC 3339 strings (UTC), durations Go duration strings
//     ("1m30s"), enums their names ("running", "SideEffect", "happened"),
//     byte slices base64 strings.
//   - A payload is {"encoding": "msgpack", "json": <value>}: its data
//     decoded and shown as JSON; {"encoding": …, "base64": "…"} when it
//     cannot be decoded.
//   - An event is the export's event object ({"id", "time", "type",
//     "attributes"}).
//
// view imports no engine: it sees only engine/api, history and the SDK's
// converter.
package view

import (
	"bytes"
	"encoding"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/cairnflow/cairn/history"
)

// Marshal renders v as compact JSON by the package's convention. Values
// that implement json.Marshaler (events, statuses) render themselves.
func Marshal(v any) ([]byte, error) {
	var e encoder
	if err := e.value(reflect.ValueOf(v), 0); err != nil {
		return nil, err
	}
	return e.b, nil
}

// MarshalIndent is Marshal, indented with two spaces.
func MarshalIndent(v any) ([]byte, error) {
	b, err := Marshal(v)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, fmt.Errorf("view: produced invalid JSON: %w", err) // a bug
	}
	return out.Bytes(), nil
}

// Key returns the JSON key of a Go field name: lower camel case, "ID"
// written "Id" and "IDs" "Ids" ("ScheduledEventID" → "scheduledEventId",
// "RunIDs" → "runIds", "ID" → "id").
func Key(field string) string {
	r := []rune(field)
	// "ID" at the end of a word, or "IDs", becomes "Id" ("Ids").
	for i := 0; i+1 < len(r); i++ {
		if r[i] == 'I' && r[i+1] == 'D' && wordEnds(r, i+2) {
			r[i+1] = 'd'
		}
	}
	// Lower the leading capitals, but keep the last of a run that starts
	// a word ("HTTPCode" → "httpCode").
	n := 0
	for n < len(r) && unicode.IsUpper(r[n]) {
		n++
	}
	switch {
	case n == 0:
	case n == len(r) || n == 1:
		for i := 0; i < n; i++ {
			r[i] = unicode.ToLower(r[i])
		}
	default:
		for i := 0; i < n-1; i++ {
			r[i] = unicode.ToLower(r[i])
		}
	}
	return string(r)
}

// wordEnds reports whether a word of r ends at i, or at i+1 with a
// plural "s" ("ID" and "IDs" are words, "IDentity" is not).
func wordEnds(r []rune, i int) bool {
	if i < len(r) && r[i] == 's' {
		i++
	}
	return i == len(r) || unicode.IsUpper(r[i])
}

// maxDepth bounds nesting (a cycle would be a bug, not data).
const maxDepth = 64

type encoder struct{ b []byte }

var (
	payloadType   = reflect.TypeFor[history.Payload]()
	durationType  = reflect.TypeFor[time.Duration]()
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	stringerType  = reflect.TypeFor[fmt.Stringer]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

// omit reports whether a field holding v is left out.
func omit(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		return v.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return v.IsNil()
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	}
	switch v.Type() {
	case timeType:
		return v.Interface().(time.Time).IsZero()
	case durationType:
		return v.Int() == 0
	case payloadType:
		return v.Interface().(history.Payload).IsZero()
	}
	return false
}

func (e *encoder) value(v reflect.Value, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("view: value nested deeper than %d", maxDepth)
	}
	if !v.IsValid() {
		e.b = append(e.b, "null"...)
		return nil
	}
	t := v.Type()
	switch t {
	case payloadType:
		e.b = append(e.b, Payload(v.Interface().(history.Payload))...)
		return nil
	case durationType:
		e.b = strconv.AppendQuote(e.b, time.Duration(v.Int()).String())
		return nil
	case timeType:
		e.b = strconv.AppendQuote(e.b, v.Interface().(time.Time).UTC().Format(time.RFC3339Nano))
		return nil
	case rawType:
		if v.Len() == 0 {
			e.b = append(e.b, "null"...)
		} else {
			e.b = append(e.b, v.Bytes()...)
		}
		return nil
	}
	if v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			e.b = append(e.b, "null"...)
			return nil
		}
		if t.Implements(marshalerType) && v.Kind() == reflect.Pointer {
			return e.marshaler(v)
		}
		return e.value(v.Elem(), depth+1)
	}
	if t.Implements(marshalerType) {
		return e.marshaler(v)
	}
	switch v.Kind() {
	case reflect.Struct:
		return e.object(v, depth)
	case reflect.Map:
		return e.mapValue(v, depth)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			e.b = strconv.AppendQuote(e.b, base64.StdEncoding.EncodeToString(v.Bytes()))
			return nil
		}
		fallthrough
	case reflect.Array:
		e.b = append(e.b, '[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				e.b = append(e.b, ',')
			}
			if err := e.value(v.Index(i), depth+1); err != nil {
				return err
			}
		}
		e.b = append(e.b, ']')
		return nil
	case reflect.String:
		e.str(v.String())
		return nil
	case reflect.Bool:
		e.b = strconv.AppendBool(e.b, v.Bool())
		return nil
	}
	if t.Implements(stringerType) && t.PkgPath() != "" && (isInt(v.Kind()) || isUint(v.Kind())) {
		e.str(v.Interface().(fmt.Stringer).String()) // an enum: its name
		return nil
	}
	switch {
	case isInt(v.Kind()):
		e.b = strconv.AppendInt(e.b, v.Int(), 10)
	case isUint(v.Kind()):
		e.b = strconv.AppendUint(e.b, v.Uint(), 10)
	case v.Kind() == reflect.Float32 || v.Kind() == reflect.Float64:
		b, err := json.Marshal(v.Float())
		if err != nil {
			e.str(strconv.FormatFloat(v.Float(), 'g', -1, 64)) // NaN, ±Inf
			return nil
		}
		e.b = append(e.b, b...)
	default:
		return fmt.Errorf("view: cannot render a %s", t)
	}
	return nil
}

func isInt(k reflect.Kind) bool { return k >= reflect.Int && k <= reflect.Int64 }
func isUint(k reflect.Kind) bool {
	return k >= reflect.Uint && k <= reflect.Uintptr
}

func (e *encoder) marshaler(v reflect.Value) error {
	b, err := v.Interface().(json.Marshaler).MarshalJSON()
	if err != nil {
		return fmt.Errorf("view: %s: %w", v.Type(), err)
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return fmt.Errorf("view: %s wrote invalid JSON: %w", v.Type(), err)
	}
	e.b = append(e.b, c.Bytes()...)
	return nil
}

func (e *encoder) str(s string) {
	b, _ := json.Marshal(s) // a string always encodes
	e.b = append(e.b, b...)
}

func (e *encoder) object(v reflect.Value, depth int) error {
	e.b = append(e.b, '{')
	first := true
	if err := e.fields(v, &first, depth); err != nil {
		return err
	}
	e.b = append(e.b, '}')
	return nil
}

// fields writes a struct's fields; those of an embedded struct are
// written as the outer struct's own, as encoding/json does.
func (e *encoder) fields(v reflect.Value, first *bool, depth int) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if f.Anonymous && f.Tag.Get("json") != "-" {
			fv := v.Field(i)
			if fv.Kind() == reflect.Pointer && fv.Type().Elem().Kind() == reflect.Struct {
				if fv.IsNil() {
					continue
				}
				fv = fv.Elem()
			}
			if fv.Kind() == reflect.Struct {
				if err := e.fields(fv, first, depth+1); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() || f.Tag.Get("json") == "-" {
			continue
		}
		fv := v.Field(i)
		keep := f.Tag.Get("view") == "keep"
		if omit(fv) && !keep {
			continue
		}
		if !*first {
			e.b = append(e.b, ',')
		}
		*first = false
		e.str(Key(f.Name))
		e.b = append(e.b, ':')
		if keep && fv.Kind() == reflect.Slice && fv.Len() == 0 {
			e.b = append(e.b, "[]"...) // an empty list, not null
			continue
		}
		if err := e.value(fv, depth+1); err != nil {
			return err
		}
	}
	return nil
}

func (e *encoder) mapValue(v reflect.Value, depth int) error {
	if v.IsNil() {
		e.b = append(e.b, "null"...)
		return nil
	}
	type entry struct {
		key string
		val reflect.Value
	}
	entries := make([]entry, 0, v.Len())
	it := v.MapRange()
	for it.Next() {
		entries = append(entries, entry{mapKey(it.Key()), it.Value()})
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.key, b.key) })
	e.b = append(e.b, '{')
	for i, en := range entries {
		if i > 0 {
			e.b = append(e.b, ',')
		}
		e.str(en.key)
		e.b = append(e.b, ':')
		if err := e.value(en.val, depth+1); err != nil {
			return err
		}
	}
	e.b = append(e.b, '}')
	return nil
}

func mapKey(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return k.String()
	}
	if k.Type().Implements(textType) {
		if b, err := k.Interface().(encoding.TextMarshaler).MarshalText(); err == nil {
			return string(b)
		}
	}
	if k.Type().Implements(stringerType) {
		return k.Interface().(fmt.Stringer).String()
	}
	return fmt.Sprint(k.Interface())
}
