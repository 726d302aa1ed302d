package history

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// The record envelope. Every keyed record a store writes is stored sealed:
//
//	crc32c(4, big-endian) | value
//
// where the CRC32C (Castagnoli) covers the record's identity (RecordID:
// its space's letter followed by its key) and then the value. A damaged
// value, and a value read under another key or space than the one it was
// written under, fail the check. Events keep their own checksummed
// envelope (EncodeEvent), which names the event id.
//
// The format is shared by every store: badgerstore uses the RecordID as
// the record's Badger key, pgstore stores the space and key in columns of
// their own; the sealed bytes are the same.

// RecordEnvelopeLen is the length of the checksum in front of a sealed
// record value.
const RecordEnvelopeLen = 4

// spaceLetters are the one-letter names of the spaces (DESIGN.md §3). They
// are part of every stored record's checksum: never change them.
var spaceLetters = [spaceCount]byte{0, 's', 'c', 'q', 't', 'e', 'v', 'm', 'k', 'u', 'd'}

// Letter returns the space's one-letter name, which starts its RecordID, or
// 0 for an invalid space.
func (s Space) Letter() byte {
	if !s.Valid() {
		return 0
	}
	return spaceLetters[s]
}

// spaceOfLetter maps a letter back to its space.
func spaceOfLetter(l byte) (Space, bool) {
	for sp := Space(1); sp.Valid(); sp++ {
		if spaceLetters[sp] == l {
			return sp, true
		}
	}
	return 0, false
}

// RecordID returns the identity a record's checksum covers: sp's letter
// followed by key, in a new slice. The space must be valid.
func RecordID(sp Space, key []byte) []byte {
	id := make([]byte, 0, 1+len(key))
	return append(append(id, sp.Letter()), key...)
}

func recordSum(id, value []byte) uint32 {
	return crc32.Update(crc32.Checksum(id, castagnoli), castagnoli, value)
}

// SealRecord returns the stored form of value under the identity id
// (usually a RecordID; a store may seal records of its own under other
// identities), in a new slice.
func SealRecord(id, value []byte) []byte {
	out := make([]byte, RecordEnvelopeLen, RecordEnvelopeLen+len(value))
	binary.BigEndian.PutUint32(out, recordSum(id, value))
	return append(out, value...)
}

// UnsealRecord checks the stored form of the record under id and returns
// its value (a view of stored). Damage returns a *CorruptError that names
// the space and key when id is a RecordID, else the identity as Key.
func UnsealRecord(id, stored []byte) ([]byte, error) {
	if len(stored) < RecordEnvelopeLen {
		return nil, CorruptRecord(id, "record of %d bytes is shorter than its checksum", len(stored))
	}
	value := stored[RecordEnvelopeLen:]
	if got, want := binary.BigEndian.Uint32(stored), recordSum(id, value); got != want {
		return nil, CorruptRecord(id, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	return value, nil
}

// CorruptRecord describes a damaged record by its identity: a RecordID is
// reported as its space and key, anything else as Key.
func CorruptRecord(id []byte, format string, args ...any) *CorruptError {
	e := &CorruptError{Key: id, Offset: -1, Reason: fmt.Sprintf(format, args...)}
	if len(id) > 0 {
		if sp, ok := spaceOfLetter(id[0]); ok {
			e.Space, e.Key = sp, id[1:]
		}
	}
	return e
}
