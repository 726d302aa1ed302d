package history

import (
	"encoding/binary"
	"fmt"
)

// Keys for records are tuples encoded so that bytewise order equals tuple
// order and no tuple is a prefix of another's encoding unless it is a prefix
// tuple: a string is written with every 0x00 byte escaped as 0x00 0xFF and
// terminated by 0x00 0x01; an int64 is 8 bytes big-endian with the sign bit
// flipped. Tuple-prefix scans are therefore exact: Key().Str("a") never
// matches the records of Key().Str("ab").

// KeyBuilder builds a record key. The zero value is ready to use.
type KeyBuilder struct{ b []byte }

// Key starts a new key.
func Key() *KeyBuilder { return &KeyBuilder{b: make([]byte, 0, 48)} }

// Str appends a string element.
func (k *KeyBuilder) Str(s string) *KeyBuilder {
	for i := 0; i < len(s); i++ {
		c := s[i]
		k.b = append(k.b, c)
		if c == 0 {
			k.b = append(k.b, 0xFF)
		}
	}
	k.b = append(k.b, 0x00, 0x01)
	return k
}

// Int appends an int64 element.
func (k *KeyBuilder) Int(v int64) *KeyBuilder {
	k.b = binary.BigEndian.AppendUint64(k.b, uint64(v)^(1<<63))
	return k
}

// Bytes returns the encoded key.
func (k *KeyBuilder) Bytes() []byte { return k.b }

// KeyReader decodes a key written by KeyBuilder, element by element.
type KeyReader struct {
	b   []byte
	err error
}

// ReadKey starts decoding key.
func ReadKey(key []byte) *KeyReader { return &KeyReader{b: key} }

// Str decodes a string element.
func (r *KeyReader) Str() string {
	if r.err != nil {
		return ""
	}
	out := make([]byte, 0, len(r.b))
	for i := 0; i < len(r.b); i++ {
		c := r.b[i]
		if c != 0 {
			out = append(out, c)
			continue
		}
		if i+1 >= len(r.b) {
			break
		}
		switch r.b[i+1] {
		case 0xFF:
			out = append(out, 0)
			i++
		case 0x01:
			r.b = r.b[i+2:]
			return string(out)
		default:
			r.err = fmt.Errorf("%w: bad escape in key", ErrInvalid)
			return ""
		}
	}
	r.err = fmt.Errorf("%w: unterminated string in key", ErrInvalid)
	return ""
}

// Int decodes an int64 element.
func (r *KeyReader) Int() int64 {
	if r.err != nil {
		return 0
	}
	if len(r.b) < 8 {
		r.err = fmt.Errorf("%w: short int in key", ErrInvalid)
		return 0
	}
	v := int64(binary.BigEndian.Uint64(r.b) ^ (1 << 63))
	r.b = r.b[8:]
	return v
}

// Rest returns the undecoded remainder.
func (r *KeyReader) Rest() []byte { return r.b }

// Err returns the first decoding error.
func (r *KeyReader) Err() error { return r.err }

// ShardOf returns the shard of a workflow id among n shards (n > 0): the
// 32-bit FNV-1a hash of the id, modulo n. Every server of a cluster must
// agree on it, and a cluster's shard count never changes (docs/scale-out.md),
// so this function never changes either.
func ShardOf(workflowID string, n int) int {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := 0; i < len(workflowID); i++ {
		h ^= uint32(workflowID[i])
		h *= prime
	}
	return int(h % uint32(n))
}
