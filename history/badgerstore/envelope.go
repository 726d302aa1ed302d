package badgerstore

import (
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
//
// The envelope is history's (history.SealRecord): a record's Badger key is
// its history.RecordID, so every store seals the same bytes
// (history.RecordEnvelopeLen bytes in front of the value).

// castagnoli is the CRC32C table of the store's own files (hwm.go).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// seal returns the stored form of value under key.
func seal(key, value []byte) []byte { return history.SealRecord(key, value) }

// unseal checks the stored form v of the record under key and returns its
// value (a view of v). Damage returns a *history.CorruptError naming the
// space and key.
func unseal(key, v []byte) ([]byte, error) { return history.UnsealRecord(key, v) }

// corruptRecord describes a damaged record by its Badger key.
func corruptRecord(key []byte, format string, args ...any) error {
	return history.CorruptRecord(key, format, args...)
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
