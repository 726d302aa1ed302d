/*
 * Cairn additions to Badger (see CAIRN-PATCHES.md): typed corruption and
 * full-disk errors, the scan for valid log records after a damaged one, and
 * preallocation of memory-mapped files.
 */

package badger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"sort"

	"github.com/cairnflow/cairn/third_party/badger/y"
)

// ErrCorrupt is matched (errors.Is) by every error that reports damaged or
// missing data in Badger's files. The error is a *CorruptError naming the
// file and offset where known.
var ErrCorrupt = errors.New("badger: data corrupt")

// ErrNoSpace is matched by errors caused by a full filesystem (ENOSPC or
// EDQUOT) while Badger reserved room for a write. Nothing of the write was
// applied.
var ErrNoSpace = y.ErrNoSpace

// CorruptError says which file is damaged, where, and how.
type CorruptError struct {
	Path   string // the file ("" when unknown)
	Offset int64  // byte offset in the file (-1 when unknown)
	Reason string
	// Relaxable: an open without the integrity checks (DetectLogDamage
	// off, no ManifestMinSize) goes past this damage, as upstream Badger
	// would, losing what it hides (log records, manifest changes). Other
	// damage (a table, a manifest that does not parse) fails that open too.
	Relaxable bool
}

// Error implements error.
func (e *CorruptError) Error() string {
	switch {
	case e.Path == "":
		return "badger: data corrupt: " + e.Reason
	case e.Offset < 0:
		return fmt.Sprintf("badger: data corrupt: %s: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("badger: data corrupt: %s at offset %d: %s", e.Path, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func corruptf(path string, off int64, format string, args ...any) error {
	return &CorruptError{Path: path, Offset: off, Reason: fmt.Sprintf(format, args...)}
}

// relaxable is corruptf for damage that only the integrity checks refuse
// (CorruptError.Relaxable).
func relaxable(path string, off int64, format string, args ...any) error {
	return &CorruptError{Path: path, Offset: off, Reason: fmt.Sprintf(format, args...), Relaxable: true}
}

// asCorrupt wraps err as a CorruptError about path unless it already is one
// (or is a full disk, which is no damage).
func asCorrupt(path string, err error) error {
	if err == nil || errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNoSpace) {
		return err
	}
	return corruptf(path, -1, "%v", err)
}

// allocChunk is how much of a memory-mapped log file is allocated at a time.
const allocChunk = 1 << 20

// reserve makes sure the blocks backing lf.Data[0:end] exist on disk, so
// that storing into the memory map cannot raise SIGBUS on a full disk.
func (lf *logFile) reserve(end int64) error {
	if lf.Fd == nil || end <= lf.allocated {
		return nil
	}
	want := min(max(end, lf.allocated+allocChunk), int64(len(lf.Data)))
	if want < end {
		want = end
	}
	if err := y.Allocate(lf.Fd, lf.allocated, want-lf.allocated); err != nil {
		return err
	}
	lf.allocated = want
	return nil
}

// validEntryAfter looks for a complete entry, with a matching checksum,
// starting after off in a log file, whose commit timestamp is not skip (the
// transaction that may legitimately be torn at the end of the log). It
// returns the entry's offset and version, or -1.
//
// A log is written by one committer, one transaction at a time, and every
// transaction is synced before the next is written: a valid record of
// another transaction after a damaged one proves the damage hit data that
// was synced, not a torn tail.
func (lf *logFile) validEntryAfter(off uint32, skip uint64) (int64, uint64) {
	if lf.encryptionEnabled() {
		return -1, 0
	}
	data := lf.Data
	if n := int(lf.size.Load()); n < len(data) {
		data = data[:n]
	}
	const minEntry = 2 + 1 + 1 + 1 + 8 + crc32.Size // header, an 8-byte ts, crc
	for s := int(off) + 1; s+minEntry <= len(data); s++ {
		// An entry's third byte starts its key length, which is never 0.
		if s+8 <= len(data) && binary.LittleEndian.Uint64(data[s:]) == 0 {
			s += 5
			continue
		}
		if data[s+2] == 0 || data[s]&(bitTxn|bitFinTxn) == 0 {
			continue
		}
		var h header
		hlen := decodeHeaderSafe(&h, data[s:])
		if hlen <= 0 || h.klen < 8 || h.klen > 1<<16 {
			continue
		}
		end := s + hlen + int(h.klen) + int(h.vlen)
		if int(h.vlen) > len(data) || end+crc32.Size > len(data) {
			continue
		}
		if crc32.Checksum(data[s:end], y.CastagnoliCrcTable) != binary.BigEndian.Uint32(data[end:]) {
			continue
		}
		ts := y.ParseTs(data[s+hlen : s+hlen+int(h.klen)])
		if ts == skip {
			continue
		}
		return int64(s), ts
	}
	return -1, 0
}

// validValueAfter looks for a complete value-log record with a matching
// checksum after off in a value-log file (whose records carry no
// transaction marks), and returns its offset or -1. One after the point
// where a replay stopped proves that the stop was damage, not a torn tail.
func (lf *logFile) validValueAfter(off uint32) int64 {
	if lf.encryptionEnabled() {
		return -1
	}
	data := lf.Data
	if n := int(lf.size.Load()); n < len(data) {
		data = data[:n]
	}
	const minEntry = 2 + 1 + 1 + 1 + 8 + crc32.Size
	for s := int(off) + 1; s+minEntry <= len(data); s++ {
		if s+8 <= len(data) && binary.LittleEndian.Uint64(data[s:]) == 0 {
			s += 5
			continue
		}
		if data[s+2] == 0 || data[s]&(bitTxn|bitFinTxn) != 0 {
			continue
		}
		var h header
		hlen := decodeHeaderSafe(&h, data[s:])
		if hlen <= 0 || h.klen < 8 || h.klen > 1<<16 {
			continue
		}
		end := s + hlen + int(h.klen) + int(h.vlen)
		if int(h.vlen) > len(data) || end+crc32.Size > len(data) {
			continue
		}
		if crc32.Checksum(data[s:end], y.CastagnoliCrcTable) == binary.BigEndian.Uint32(data[end:]) {
			return int64(s)
		}
	}
	return -1
}

// decodeHeaderSafe is header.Decode that reports a truncated or malformed
// header as 0 instead of reading past buf.
func decodeHeaderSafe(h *header, buf []byte) int {
	if len(buf) < 3 {
		return 0
	}
	h.meta, h.userMeta = buf[0], buf[1]
	i := 2
	klen, n := binary.Uvarint(buf[i:])
	if n <= 0 || klen > 1<<32-1 {
		return 0
	}
	i += n
	vlen, n := binary.Uvarint(buf[i:])
	if n <= 0 || vlen > 1<<32-1 {
		return 0
	}
	i += n
	exp, n := binary.Uvarint(buf[i:])
	if n <= 0 {
		return 0
	}
	h.klen, h.vlen, h.expiresAt = uint32(klen), uint32(vlen), exp
	return i + n
}

// recoverAsError turns a panic in fn into an error about path: damaged
// input must never take the process down.
func recoverAsError(path string, err *error) {
	if r := recover(); r != nil {
		*err = corruptf(path, -1, "panic while reading: %v", r)
	}
}

// KeyVersion is one version of a key and its value.
type KeyVersion struct {
	Version uint64
	Value   []byte
}

// KeyVersions returns every version of key held in the memtables (newest
// first, all of them: memtables never drop versions) and the newest
// version held in the tables, if any (compaction keeps a key's newest
// version and drops older ones, so only the newest is dependable there).
// Values stored in the value log are not read: Value is then nil (Cairn
// patch, for the commit-sequence check).
func (db *DB) KeyVersions(key []byte) (mem []KeyVersion, newestInTables *KeyVersion, err error) {
	if db.IsClosed() {
		return nil, nil, ErrDBClosed
	}
	tables, decr := db.getMemTables()
	defer decr()
	for _, mt := range tables {
		it := mt.sl.NewIterator()
		for it.Seek(y.KeyWithTs(key, math.MaxUint64)); it.Valid() && bytes.Equal(y.ParseKey(it.Key()), key); it.Next() {
			vs := it.Value()
			kv := KeyVersion{Version: y.ParseTs(it.Key())}
			if vs.Meta&bitValuePointer == 0 {
				kv.Value = y.SafeCopy(nil, vs.Value)
			}
			mem = append(mem, kv)
		}
		_ = it.Close()
	}
	sort.Slice(mem, func(i, j int) bool { return mem[i].Version > mem[j].Version })
	vs, err := db.lc.get(y.KeyWithTs(key, math.MaxUint64), y.ValueStruct{}, 0)
	if err != nil {
		return nil, nil, err
	}
	if vs.Version > 0 && vs.Meta&bitDelete == 0 {
		kv := &KeyVersion{Version: vs.Version}
		if vs.Meta&bitValuePointer == 0 {
			kv.Value = y.SafeCopy(nil, vs.Value)
		}
		newestInTables = kv
	}
	return mem, newestInTables, nil
}

// CompactLevel runs one compaction of level into the level below it, as
// Badger's compactors would, and waits for it (Cairn patch: tests drive
// compactions with it instead of waiting for the background ones). It
// returns nil when the level has nothing to compact.
func (db *DB) CompactLevel(level int) error {
	if level < 0 || level >= db.opt.MaxLevels-1 {
		return fmt.Errorf("badger: no level %d to compact", level)
	}
	p := compactionPriority{level: level, score: 2, adjusted: 2, t: db.lc.levelTargets()}
	if err := db.lc.doCompact(1000, p); err != nil && !errors.Is(err, errFillTables) {
		return err
	}
	return nil
}

// CompactAll compacts every level's tables down into the last level, one
// compaction at a time, with the background compactions stopped (Cairn
// patch: badgerstore's Reclaim after deletes). A key deleted or a version
// overwritten at or below the discard timestamp is dropped on the way
// (compactions rewrite tables, never move them), so deleted bytes leave
// the disk. What the memtables hold is not compacted until it is flushed.
func (db *DB) CompactAll() error {
	db.stopCompactions()
	defer db.startCompactions()
	last := db.opt.MaxLevels - 1
	for level := 0; level < last; level++ {
		for tries := 0; db.lc.levels[level].numTables() > 0; tries++ {
			if tries > 1<<16 {
				return fmt.Errorf("badger: level %d still holds %d tables after %d compactions", level, db.lc.levels[level].numTables(), tries)
			}
			p := compactionPriority{level: level, score: 2, adjusted: 2, t: db.lc.levelTargets()}
			if err := db.lc.doCompact(1001, p); err != nil && !errors.Is(err, errFillTables) {
				return err
			}
		}
	}
	return nil
}
