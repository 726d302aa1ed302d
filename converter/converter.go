package converter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/history"
)

// The encoding names the built-in converters write into history.Payload.
const (
	// EncodingMsgpack is the default encoding: MessagePack, canonical (map
	// entries sorted by their encoded key, integers in their most compact
	// form), so that equal values always encode to equal bytes.
	EncodingMsgpack = "msgpack"
	// EncodingJSON is encoding/json (map keys sorted).
	EncodingJSON = "json"
)

// ErrUnknownEncoding is returned when a payload names an encoding the
// converter cannot decode.
var ErrUnknownEncoding = errors.New("converter: unknown payload encoding")

// Converter turns Go values into payloads and back. It is the plug-in point
// for other serialisations and for codecs (compression, encryption): wrap a
// built-in converter and transform Payload.Data on the way in and out.
//
// A converter used for workflows must be deterministic: replay compares the
// encoded arguments of each command with the recorded ones, so the same
// value must always encode to the same bytes.
type Converter interface {
	// ToPayload encodes v. A nil v encodes to the zero Payload.
	ToPayload(v any) (history.Payload, error)
	// FromPayload decodes p into the value v points to. A zero Payload
	// leaves *v untouched (the zero value for a fresh variable).
	FromPayload(p history.Payload, v any) error
}

// Default returns the converter used when none is configured: it
// encodes canonical MessagePack and decodes both MessagePack and JSON
// payloads.
func Default() Converter { return msgpackConverter{} }

// NewMsgpack returns the canonical MessagePack converter (the
// default). It decodes JSON payloads too.
func NewMsgpack() Converter { return msgpackConverter{} }

// NewJSON returns a converter that encodes with encoding/json (map
// keys sorted, so deterministic). It decodes MessagePack payloads too, so a
// workflow can switch converters without breaking old histories.
func NewJSON() Converter { return jsonConverter{} }

type msgpackConverter struct{}

func (msgpackConverter) ToPayload(v any) (history.Payload, error) {
	if v == nil {
		return history.Payload{}, nil
	}
	data, err := marshalCanonical(v)
	if err != nil {
		return history.Payload{}, fmt.Errorf("converter: encode %T as msgpack: %w", v, err)
	}
	return history.Payload{Encoding: EncodingMsgpack, Data: data}, nil
}

func (msgpackConverter) FromPayload(p history.Payload, v any) error { return decodePayload(p, v) }

type jsonConverter struct{}

func (jsonConverter) ToPayload(v any) (history.Payload, error) {
	if v == nil {
		return history.Payload{}, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return history.Payload{}, fmt.Errorf("converter: encode %T as json: %w", v, err)
	}
	return history.Payload{Encoding: EncodingJSON, Data: data}, nil
}

func (jsonConverter) FromPayload(p history.Payload, v any) error { return decodePayload(p, v) }

// decodePayload decodes either built-in encoding.
func decodePayload(p history.Payload, v any) error {
	if p.IsZero() {
		return nil
	}
	switch p.Encoding {
	case EncodingMsgpack:
		d := decoders.Get().(*decoderState)
		d.r.Reset(p.Data)
		d.dec.Reset(&d.r)
		d.dec.SetCustomStructTag("json")
		err := d.dec.Decode(v)
		d.r.Reset(nil)
		d.dec.Reset(nil)
		decoders.Put(d)
		if err != nil {
			return fmt.Errorf("converter: decode msgpack payload into %T: %w", v, err)
		}
		return nil
	case EncodingJSON:
		if err := json.Unmarshal(p.Data, v); err != nil {
			return fmt.Errorf("converter: decode json payload into %T: %w", v, err)
		}
		return nil
	}
	return fmt.Errorf("%w %q", ErrUnknownEncoding, p.Encoding)
}

// marshalCanonical encodes v as canonical MessagePack: compact integers,
// struct fields in declaration order (the msgpack tag, else the json tag,
// names them), and every map's entries sorted by their encoded key bytes.
func marshalCanonical(v any) ([]byte, error) {
	s := encoders.Get().(*encoderState)
	s.buf.Reset()
	s.enc.Reset(&s.buf)
	s.enc.UseCompactInts(true)
	s.enc.SetCustomStructTag("json")
	err := s.enc.Encode(v)
	var data []byte
	if err == nil {
		data = bytes.Clone(s.buf.Bytes())
	}
	if s.buf.Cap() <= 64<<10 {
		s.enc.Reset(nil)
		encoders.Put(s)
	}
	if err != nil {
		return nil, err
	}
	if !mayHoldMap(reflect.TypeOf(v)) {
		return data, nil
	}
	return canonicalizeMsgpack(data)
}

// encoderState and decoderState are pooled with their buffers, so that
// encoding a payload allocates only its bytes.
type encoderState struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

type decoderState struct {
	r   bytes.Reader
	dec *msgpack.Decoder
}

var (
	encoders = sync.Pool{New: func() any { return &encoderState{enc: msgpack.NewEncoder(nil)} }}
	decoders = sync.Pool{New: func() any { return &decoderState{dec: msgpack.NewDecoder(nil)} }}
)

// CanonicalEncoding returns the canonical MessagePack encoding of v, the
// bytes Cairn uses as an activity's idempotency key material. Equal values
// give equal bytes whatever converter the workflow uses for its payloads.
func CanonicalEncoding(v any) ([]byte, error) {
	if v == nil {
		return nil, nil
	}
	return marshalCanonical(v)
}

var mapTypes sync.Map // reflect.Type → bool

var (
	customEncoderType = reflect.TypeFor[msgpack.CustomEncoder]()
	marshalerType     = reflect.TypeFor[msgpack.Marshaler]()
)

// mayHoldMap reports whether values of t can encode a msgpack map whose
// entry order is not fixed by the type (a Go map, an interface, a custom
// encoder). Structs encode as maps too, but in a fixed field order.
func mayHoldMap(t reflect.Type) bool {
	if t == nil {
		return false
	}
	if v, ok := mapTypes.Load(t); ok {
		return v.(bool)
	}
	r := holdsMap(t, map[reflect.Type]bool{})
	mapTypes.Store(t, r)
	return r
}

func holdsMap(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false
	}
	seen[t] = true
	if t.Implements(customEncoderType) || t.Implements(marshalerType) ||
		reflect.PointerTo(t).Implements(customEncoderType) || reflect.PointerTo(t).Implements(marshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Map, reflect.Interface:
		return true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return holdsMap(t.Elem(), seen)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if holdsMap(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}

// IsCanonical reports whether c is the built-in MessagePack converter, whose
// payloads' bytes are already the canonical encoding (CanonicalEncoding):
// a caller that needs the canonical bytes of a value it encoded with c can
// use the payload's Data as they are.
func IsCanonical(c Converter) bool {
	_, ok := c.(msgpackConverter)
	return ok
}
