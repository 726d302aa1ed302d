package api

import (
	"bytes"
	"sync"

	"github.com/vmihailenco/msgpack/v5"
)

// MarshalMsgpack encodes v the way the API travels and the engine stores
// its records: structs as msgpack arrays of their fields in declaration
// order, not maps keyed by field name. Decoding (UnmarshalMsgpack) accepts
// both forms, so data written as maps by earlier versions still reads.
//
// Arrays are positional: a field of a type encoded this way may be added
// only at the end of its struct, never removed, reordered or retyped, and
// what decodes such arrays must be UnmarshalMsgpack (msgpack.Unmarshal
// refuses an array of another length than its struct's fields).
// TestMsgpackFieldOrder pins the order of the types on the wire.
//
// Why: with field names, encoding and decoding the messages of one
// workflow was about a fifth of the CPU of the server and the worker;
// arrays skip writing, reading and looking up every name.
func MarshalMsgpack(v any) ([]byte, error) {
	e := encoders.Get().(*arrayEncoder)
	e.buf.Reset()
	err := e.enc.Encode(v)
	b := bytes.Clone(e.buf.Bytes())
	if e.buf.Cap() <= 64<<10 { // do not keep a huge buffer alive
		encoders.Put(e)
	}
	return b, err
}

type arrayEncoder struct {
	buf bytes.Buffer
	enc *msgpack.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := &arrayEncoder{}
	e.enc = msgpack.NewEncoder(&e.buf)
	e.enc.UseArrayEncodedStructs(true)
	return e
}}
