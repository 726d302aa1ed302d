package badgerstore

import (
	"encoding/binary"

	"github.com/cairnflow/cairn/history"
)

// Key layout. Everything lives in one Badger DB; the first byte of a key
// names what it is:
//
//	h tuple(wf, run) id(8, big-endian)  → encoded event (history.EncodeEvent)
//	l tuple(wf, run)                    → last event id of the run (8, big-endian)
//	s|c|q|t|e|v|m|k|u key               → record of a history.Space (see spacePrefix), sealed (envelope.go)
//	0x00 "cairn.format"                 → on-disk format version (bare)
//	0x00 "cairn.seq"                    → number of the group commit that wrote it, sealed (integrity.go)
//	0x00 "cairn.loss." nanos(8)         → an accepted data loss (LossRecord JSON), sealed
//	0x00 "cairn.migrate"                → last record key migrated from format 1 (bare; only during migration)
//
// tuple is history.Key().Str(wf).Str(run): prefix-free, so the events of run
// "a" never share a prefix with those of run "ab".
const (
	prefixEvent byte = 'h'
	prefixHead  byte = 'l'
)

// formatKey holds the on-disk format version; formatVersion is the one this
// code writes and reads.
var (
	formatKey = []byte("\x00cairn.format")
	// formatVersion 2: every record value sealed in its envelope
	// (envelope.go). Format 1 stored record values bare; Open migrates it.
	formatVersion = []byte{2}
	formatV1      = []byte{1}
)

// maxKeyLen bounds record keys (Badger's own limit is 65000 bytes, including
// our prefix and its 8-byte version suffix).
const maxKeyLen = 60000

// spacePrefix returns the key prefix of a record space: its letter
// (history.Space.Letter, which follows DESIGN.md §3; never change them).
func spacePrefix(sp history.Space) (byte, bool) {
	l := sp.Letter()
	return l, l != 0
}

// recordKey returns the Badger key of a record. The space must be valid.
func recordKey(sp history.Space, key []byte) []byte { return history.RecordID(sp, key) }

// runTuple is tuple(wf, run).
func runTuple(run history.RunRef) []byte {
	return history.Key().Str(run.WorkflowID).Str(run.RunID).Bytes()
}

// prefixed returns prefix + t, with room for extra bytes.
func prefixed(prefix byte, t []byte, extra int) []byte {
	k := make([]byte, 0, 1+len(t)+extra)
	return append(append(k, prefix), t...)
}

// eventPrefix is the common prefix of a run's event keys.
func eventPrefix(run history.RunRef) []byte { return prefixed(prefixEvent, runTuple(run), 8) }

// runKeys returns a run's head key (its name in the heads cache and in a
// batch's set of runs; no longer a stored record: stores written by earlier
// builds may hold such records, which are ignored) and eventPrefix(run).
func runKeys(run history.RunRef) (head, events []byte) {
	t := runTuple(run)
	return prefixed(prefixHead, t, 0), prefixed(prefixEvent, t, 8)
}

// eventKey appends the 8-byte id to an event prefix (in a new slice).
func eventKey(prefix []byte, id int64) []byte {
	k := make([]byte, len(prefix), len(prefix)+8)
	copy(k, prefix)
	return binary.BigEndian.AppendUint64(k, uint64(id))
}

// eventIDOf returns the id in an event key with the given prefix length.
func eventIDOf(key []byte, prefixLen int) (int64, bool) {
	if len(key) != prefixLen+8 {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(key[prefixLen:])), true
}

// prefixEnd returns the smallest key greater than every key starting with
// p, or nil when there is none (p is all 0xFF).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
