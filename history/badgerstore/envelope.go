package badgerstore

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/cairnflow/cairn/history"
)

// Record envelope (on-disk format 2). Every value this store writes under a
// record key (run state, current run, tasks, timers, ledger, indexes, meta,
// and the store's own commit sequence) is stored as
//
//	crc32c(4, big-endian) | value
//
// where the CRC32C covers the record's full Badger key and then the value:
// a damaged value, and a value read under another key than the one it was
// written under, fail the check. Events keep their own checksummed
// envelope (history.EncodeEvent), which names the event id.
const envelopeLen = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordSum(key, value []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, value)
}

// seal returns the stored form of value under key.
func seal(key, value []byte) []byte {
	out := make([]byte, envelopeLen, envelopeLen+len(value))
	binary.BigEndian.PutUint32(out, recordSum(key, value))
	return append(out, value...)
}

// unseal checks the stored form v of the record under key and returns its
// value (a view of v). Damage returns a *history.CorruptError naming the
// space and key.
func unseal(key, v []byte) ([]byte, error) {
	if len(v) < envelopeLen {
		return nil, corruptRecord(key, "record of %d bytes is shorter than its checksum", len(v))
	}
	value := v[envelopeLen:]
	if got, want := binary.BigEndian.Uint32(v), recordSum(key, value); got != want {
		return nil, corruptRecord(key, "checksum mismatch (stored %08x, computed %08x)", got, want)
	}
	return value, nil
}

// corruptRecord describes a damaged record by its Badger key.
func corruptRecord(key []byte, format string, args ...any) error {
	e := &history.CorruptError{Key: key, Offset: -1}
	if len(key) > 0 {
		if sp, ok := spaceOf(key[0]); ok {
			e.Space, e.Key = sp, key[1:]
		}
	}
	e.Reason = sprintf(format, args...)
	return e
}

// spaceOf maps a record key's first byte back to its space.
func spaceOf(prefix byte) (history.Space, bool) {
	for sp := history.Space(1); sp.Valid(); sp++ {
		if p, _ := spacePrefix(sp); p == prefix {
			return sp, true
		}
	}
	return 0, false
}
