package api

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// UnmarshalMsgpack decodes b into v (a pointer) as msgpack.Unmarshal
// does, and also when a struct in b was encoded as an array
// (MarshalMsgpack) by a version of the struct with fewer or more fields:
// the fields b lacks are left zero and the elements past the last field
// are ignored. That is what makes "append a field at the end" compatible
// in both directions: a record written before the field existed still
// reads, and so does a message from a peer that knows a newer field.
//
// The library alone refuses both ("number of fields in array-encoded
// struct has changed"): UnmarshalMsgpack then rewrites b's arrays to the
// shapes of v's types and decodes again. The rewrite runs only after such
// a refusal, so a record of the current shape costs nothing more.
func UnmarshalMsgpack(b []byte, v any) error {
	err := msgpack.Unmarshal(b, v)
	if err == nil || !isShapeError(err) {
		return err
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return err
	}
	fixed, rerr := reshapeMsgpack(b, rv.Type().Elem())
	if rerr != nil {
		return fmt.Errorf("%w (and reading it as another version's: %w)", err, rerr)
	}
	rv.Elem().Set(reflect.Zero(rv.Type().Elem())) // the failed decode may have filled part of it
	return msgpack.Unmarshal(fixed, v)
}

// isShapeError reports whether err is the library refusing an array whose
// length is not its struct's number of fields.
func isShapeError(err error) bool {
	return strings.Contains(err.Error(), "number of fields in array-encoded struct has changed")
}

// reshapeMsgpack rewrites the msgpack value b, decoded into type t, so
// that every struct encoded as an array has exactly the fields the library
// expects of its Go type.
func reshapeMsgpack(b []byte, t reflect.Type) ([]byte, error) {
	var out bytes.Buffer
	r := reshaper{dec: msgpack.NewDecoder(bytes.NewReader(b)), out: &out}
	r.enc = msgpack.NewEncoder(&out)
	if err := r.value(t); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

type reshaper struct {
	dec *msgpack.Decoder
	enc *msgpack.Encoder
	out *bytes.Buffer
}

var (
	timeType        = reflect.TypeFor[time.Time]()
	customDecoder   = reflect.TypeFor[msgpack.CustomDecoder]()
	unmarshalerType = reflect.TypeFor[msgpack.Unmarshaler]()
)

// opaque reports whether values of t are decoded as a whole (by their own
// decoder, as an extension, or as any value): copied as they are.
func opaque(t reflect.Type) bool {
	return t == timeType || t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(customDecoder) ||
		reflect.PointerTo(t).Implements(unmarshalerType)
}

// copyValue copies the next value as it is.
func (r *reshaper) copyValue() error {
	raw, err := r.dec.DecodeRaw()
	if err != nil {
		return err
	}
	r.out.Write(raw)
	return nil
}

// value rewrites the next value, to be decoded into t.
func (r *reshaper) value(t reflect.Type) error {
	if opaque(t) {
		return r.copyValue()
	}
	c, err := r.dec.PeekCode()
	if err != nil {
		return err
	}
	if c == msgpcode.Nil {
		return r.copyValue()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return r.value(t.Elem())
	case reflect.Struct:
		return r.structValue(t, c)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 || !isArrayCode(c) {
			return r.copyValue()
		}
		return r.array(t.Elem())
	case reflect.Map:
		if !isMapCode(c) {
			return r.copyValue()
		}
		return r.mapValue(func() error { return r.copyValue() }, func() error { return r.value(t.Elem()) })
	}
	return r.copyValue()
}

// array rewrites an array's elements, each to be decoded into elem.
func (r *reshaper) array(elem reflect.Type) error {
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if err := r.enc.EncodeArrayLen(n); err != nil {
		return err
	}
	for range max(n, 0) {
		if err := r.value(elem); err != nil {
			return err
		}
	}
	return nil
}

// mapValue rewrites a map's entries with key and val.
func (r *reshaper) mapValue(key, val func() error) error {
	n, err := r.dec.DecodeMapLen()
	if err != nil {
		return err
	}
	if err := r.enc.EncodeMapLen(n); err != nil {
		return err
	}
	for range max(n, 0) {
		if err := key(); err != nil {
			return err
		}
		if err := val(); err != nil {
			return err
		}
	}
	return nil
}

// structValue rewrites a struct: an array to exactly the type's fields
// (nil for the missing ones, the extra ones dropped), the fields of a map
// (by name) in place.
func (r *reshaper) structValue(t reflect.Type, c byte) error {
	fields, ok := msgpackFields(t)
	switch {
	case !ok:
		return r.copyValue()
	case isMapCode(c):
		return r.structMap(fields)
	case !isArrayCode(c):
		return r.copyValue()
	}
	n, err := r.dec.DecodeArrayLen()
	if err != nil {
		return err
	}
	if err := r.enc.EncodeArrayLen(len(fields)); err != nil {
		return err
	}
	for i := range max(n, 0) {
		if i >= len(fields) {
			if err := r.dec.Skip(); err != nil { // a field of a newer version
				return err
			}
			continue
		}
		if err := r.value(fields[i].Type); err != nil {
			return err
		}
	}
	for range len(fields) - max(n, 0) {
		if err := r.enc.EncodeNil(); err != nil { // a field of an older version's record: zero
			return err
		}
	}
	return nil
}

// structMap rewrites a struct encoded as a map keyed by field name.
func (r *reshaper) structMap(fields []reflect.StructField) error {
	var name string
	return r.mapValue(func() error {
		raw, err := r.dec.DecodeRaw()
		if err != nil {
			return err
		}
		r.out.Write(raw)
		name = ""
		_ = msgpack.Unmarshal(raw, &name) // a key that is no string names no field
		return nil
	}, func() error {
		for _, f := range fields {
			if msgpackName(f) == name {
				return r.value(f.Type)
			}
		}
		return r.copyValue()
	})
}

// msgpackFields returns the fields the library encodes of struct t, in
// order; ok is false for a struct whose fields it lays out otherwise
// (embedded structs, the _msgpack options field), left as it is.
func msgpackFields(t reflect.Type) ([]reflect.StructField, bool) {
	var out []reflect.StructField
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous || f.Name == "_msgpack" {
			return nil, false
		}
		if !f.IsExported() || msgpackName(f) == "-" {
			continue
		}
		out = append(out, f)
	}
	return out, true
}

// msgpackName is the name the library gives field f.
func msgpackName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
	if name == "" {
		return f.Name
	}
	return name
}

func isArrayCode(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMapCode(c byte) bool {
	return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32
}
