package sdk

import "github.com/cairnflow/cairn/converter"

// The encoding names the built-in converters write into history.Payload
// (converter.EncodingMsgpack, converter.EncodingJSON).
const (
	// EncodingMsgpack is the default encoding: canonical MessagePack.
	EncodingMsgpack = converter.EncodingMsgpack
	// EncodingJSON is encoding/json (map keys sorted).
	EncodingJSON = converter.EncodingJSON
)

// ErrUnknownEncoding is returned when a payload names an encoding the
// converter cannot decode.
var ErrUnknownEncoding = converter.ErrUnknownEncoding

// Converter turns Go values into payloads and back (converter.Converter).
type Converter = converter.Converter

// DefaultConverter returns the converter used when none is configured: it
// encodes canonical MessagePack and decodes both MessagePack and JSON.
func DefaultConverter() Converter { return converter.Default() }

// NewMsgpackConverter returns the canonical MessagePack converter (the
// default). It decodes JSON payloads too.
func NewMsgpackConverter() Converter { return converter.NewMsgpack() }

// NewJSONConverter returns a converter that encodes with encoding/json (map
// keys sorted, so deterministic). It decodes MessagePack payloads too.
func NewJSONConverter() Converter { return converter.NewJSON() }

// CanonicalEncoding returns the canonical MessagePack encoding of v, the
// bytes replay compares and idempotency keys hash.
func CanonicalEncoding(v any) ([]byte, error) { return converter.CanonicalEncoding(v) }
