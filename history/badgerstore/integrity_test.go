package badgerstore

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/third_party/badger"
	"github.com/rs/zerolog"
)

// TestFormat1Migrates: a directory written before records carried
// checksums (format 1: bare values) opens, its records read back
// unchanged, and it is format 2 afterwards.
func TestFormat1Migrates(t *testing.T) {
	dir := t.TempDir()
	db, err := badger.Open(badger.DefaultOptions(dir).WithLogger(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	err = db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(formatKey, formatV1); err != nil {
			return err
		}
		for i := range 1300 { // more than two migration batches
			k := recordKey(history.SpaceRunState, []byte{byte(i >> 8), byte(i)})
			want[string(k)] = strings.Repeat("x", i%50)
			if err := txn.Set(k, []byte(want[string(k)])); err != nil {
				return err
			}
		}
		k := recordKey(history.SpaceLedger, []byte("pay-1"))
		want[string(k)] = "ledger"
		return txn.Set(k, []byte("ledger"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		s := mustOpen(t, Options{Dir: dir})
		for k, v := range want {
			got, err := s.Get(bg, history.Space(mustSpace(t, k[0])), []byte(k[1:]))
			if err != nil || string(got) != v {
				t.Fatalf("round %d: %x = %q, %v; want %q", round, k, got, err, v)
			}
		}
		if err := s.db.View(func(txn *badger.Txn) error {
			v, _, err := getRaw(txn, formatKey)
			if err == nil && string(v) != string(formatVersion) {
				t.Errorf("format %x after migration", v)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func mustSpace(t *testing.T, prefix byte) history.Space {
	sp, ok := spaceOf(prefix)
	if !ok {
		t.Fatalf("no space for prefix %q", prefix)
	}
	return sp
}

// TestDamagedRecordIsCorrupt: a record value changed under its checksum
// reads as history.ErrCorrupt naming its space and key.
func TestDamagedRecordIsCorrupt(t *testing.T) {
	s := mustOpen(t, Options{Dir: t.TempDir()})
	defer s.Close()
	if err := s.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceLedger, Key: []byte("k"), Value: []byte("paid")}}}); err != nil {
		t.Fatal(err)
	}
	k := recordKey(history.SpaceLedger, []byte("k"))
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(k, append(seal(k, []byte("paid"))[:4:4], "PAID"...)) }); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(bg, history.SpaceLedger, []byte("k"))
	var ce *history.CorruptError
	if !errors.As(err, &ce) || ce.Space != history.SpaceLedger || string(ce.Key) != "k" {
		t.Fatalf("Get of a damaged record: %v, want a CorruptError naming ledger key k", err)
	}
	if _, err := s.Scan(bg, history.SpaceLedger, history.ScanOptions{}); !errors.Is(err, history.ErrCorrupt) {
		t.Fatalf("Scan over a damaged record: %v, want ErrCorrupt", err)
	}
}

// TestRolledBackCommitsRefused: when the integrity file says more commits
// were acknowledged than the database holds, Open refuses with
// ErrCorrupt; AcceptDataLoss opens it, records the loss, and the next
// plain Open succeeds.
func TestRolledBackCommitsRefused(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	for i := range 5 {
		if err := s.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: []byte("n"), Value: []byte{byte(i)}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// What a lost WAL tail looks like: the mark is ahead of the database.
	h, st, err := openHWM(dir)
	if err != nil || st.seq != 5 {
		t.Fatalf("mark %d, %v; want 5", st.seq, err)
	}
	if err := h.reset(8); err != nil {
		t.Fatal(err)
	}
	if err := h.close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir})
	if !errors.Is(err, history.ErrCorrupt) || !strings.Contains(err.Error(), "commits up to 8 were acknowledged") {
		t.Fatalf("Open after a rollback: %v, want ErrCorrupt naming the lost commits", err)
	}
	s, err = Open(Options{Dir: dir, AcceptDataLoss: true})
	if err != nil {
		t.Fatal(err)
	}
	losses, err := s.Losses()
	if err != nil || len(losses) != 1 || losses[0].LostFrom != 6 || losses[0].LostTo != 8 || losses[0].Resumed != 5 {
		t.Fatalf("losses %+v, %v; want commits 6-8 recorded", losses, err)
	}
	marks, _, err := history.DoubtMarks(bg, s)
	if err != nil || len(marks) != 1 || marks[0].Source != history.DoubtAcceptedLoss || marks[0].Lost != "group commits 6 to 8" {
		t.Fatalf("doubt marks %+v, %v; want the accepted loss's", marks, err)
	}
	if err := s.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: []byte("n"), Value: []byte{9}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if got, err := s.Get(bg, history.SpaceMeta, []byte("n")); err != nil || got[0] != 9 {
		t.Fatalf("after the accepted loss: %v, %v", got, err)
	}
}

// TestSequenceSurvivesCompactions: compactions keep only a key's newest
// version, so the commit sequence's older versions vanish from the tables
// as they are compacted (TestCheckVersions has the shapes this leaves,
// among them a base level holding commit 500 while the last level holds
// commit 200). Reopening a store after every round of flushes and real
// compactions must not see a loss.
func TestSequenceSurvivesCompactions(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 60 MiB")
	}
	dir := t.TempDir()
	opts := Options{Dir: dir, NoSync: true, MemTableSize: 8 << 20}
	s := mustOpen(t, opts)
	value := make([]byte, 100<<10)
	_, _ = rand.Read(value)     // incompressible: the tables' sizes move the base level
	seqLevels := map[int]bool{} // levels that held a version of the commit sequence
	for i := range 600 {
		key := fmt.Appendf(nil, "k%05d", i) // distinct keys: the last level grows and the base level moves up
		if err := s.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: key, Value: value}}}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 99 {
			if err := s.Close(); err != nil { // flushes the memtable: an L0 table
				t.Fatal(err)
			}
			s = mustOpen(t, opts)                        // the sequence check runs at every open
			if err := s.db.CompactLevel(0); err != nil { // L0 into the base level
				t.Fatal(err)
			}
			for _, ti := range s.db.Tables() {
				if bytes.Compare(ti.Left, seqKey) <= 0 && bytes.Compare(seqKey, ti.Right) <= 0 {
					seqLevels[ti.Level] = true
				}
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = mustOpen(t, opts)
	defer s.Close()
	t.Logf("levels that held the commit sequence: %v", seqLevels)
}

// TestCheckVersions: the rule the open-time check applies to the versions
// of the commit sequence, on the shapes compactions and losses leave.
func TestCheckVersions(t *testing.T) {
	v := func(seqs ...uint64) []badger.KeyVersion {
		var out []badger.KeyVersion
		for i, s := range seqs {
			out = append(out, badger.KeyVersion{Version: uint64(1000 - i), Value: seal(seqKey, encodeSeq(s))})
		}
		return out
	}
	top := func(seq uint64) *badger.KeyVersion { return &v(seq)[0] }
	for _, tc := range []struct {
		name     string
		mem      []badger.KeyVersion
		top      *badger.KeyVersion
		accepted []LossRecord
		last     uint64
		gap      [2]uint64
	}{
		{name: "memtables only, from the first commit", mem: v(5, 4, 3, 2, 1), last: 5},
		{name: "tables only (compacted: older versions gone)", top: top(500), last: 500},
		{name: "memtables continue the tables", mem: v(503, 502, 501), top: top(500), last: 503},
		{name: "a WAL replayed after its flush overlaps the tables", mem: v(503, 502, 501, 500, 499), top: top(500), last: 503},
		{name: "a failed commit's number written twice", mem: v(503, 502, 502, 501), top: top(500), last: 503},
		{name: "a lost table between tables and memtables", mem: v(503, 502), top: top(400), last: 503, gap: [2]uint64{401, 501}},
		{name: "a hole inside the memtables", mem: v(503, 502, 490, 489), top: top(488), last: 503, gap: [2]uint64{491, 501}},
		{name: "no table although the memtables start late", mem: v(7, 6), last: 7, gap: [2]uint64{1, 5}},
		{name: "a hole accepted before", mem: v(503, 502), top: top(400), accepted: []LossRecord{{LostFrom: 401, LostTo: 501}}, last: 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := checkVersions(tc.mem, tc.top, tc.accepted)
			if err != nil {
				t.Fatal(err)
			}
			if r.last != tc.last || [2]uint64{r.gapFrom, r.gapTo} != tc.gap {
				t.Fatalf("last %d gap %d-%d, want last %d gap %v", r.last, r.gapFrom, r.gapTo, tc.last, tc.gap)
			}
		})
	}
}

// TestCrashCopyOpens: a directory copied while its store is open (what a
// kill -9 leaves: the last commits only in the WAL, replayed at open) opens
// without a false alarm and holds every commit. The check reads the
// memtables' versions of the commit sequence before Badger flushes them.
func TestCrashCopyOpens(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	for i := range 50 {
		if err := s.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")}}}); err != nil {
			t.Fatal(err)
		}
	}
	// The live memtable holds every version of the commit sequence.
	if mem, _, err := s.db.KeyVersions(seqKey); err != nil || len(mem) != 50 {
		t.Fatalf("KeyVersions found %d memtable versions (%v), want 50", len(mem), err)
	}
	crash := filepath.Join(t.TempDir(), "crash")
	if err := copyTree(dir, crash); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := Open(Options{Dir: crash})
	if err != nil {
		t.Fatalf("a crash copy of a healthy store: %v", err)
	}
	defer c.Close()
	if c.seq != 50 {
		t.Fatalf("commit sequence %d after the crash copy, want 50", c.seq)
	}
}

// copyTree copies the regular files of src into dst (no LOCK).
func copyTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// crashCopy commits n batches to a new store, copies its directory while
// it is open (what a kill -9 leaves), closes it and returns the copy.
func crashCopy(t *testing.T, n int, closeFirst bool) string {
	t.Helper()
	dir := t.TempDir()
	s := mustOpen(t, Options{Dir: dir})
	for i := range n {
		if err := s.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte{'v'}, 200)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if closeFirst {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "copy")
	if err := copyTree(dir, out); err != nil {
		t.Fatal(err)
	}
	if !closeFirst {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestWALDamageBeforeValidRecords: a flipped byte in the middle of the WAL
// is not taken for the end of the log, since valid records of later
// transactions follow it: Open names the file and the offset.
func TestWALDamageBeforeValidRecords(t *testing.T) {
	dir := crashCopy(t, 40, false)
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	if len(mems) != 1 {
		t.Fatalf("%d WAL files", len(mems))
	}
	b, err := os.ReadFile(mems[0])
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(b, []byte("k20")) // a record in the middle
	if at < 0 {
		t.Fatal("record k20 not found in the WAL")
	}
	b[at] ^= 0x40
	if err := os.WriteFile(mems[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir})
	var ce *history.CorruptError
	if !errors.As(err, &ce) || ce.File != mems[0] || ce.Offset <= 0 || !strings.Contains(ce.Reason, "later transaction") {
		t.Fatalf("Open over a damaged WAL record: %v, want a CorruptError naming %s, an offset and the valid records after it", err, mems[0])
	}
}

// TestManifestCutAtAChangeSet: a MANIFEST that lost its last change sets
// (cut exactly between two, so every remaining one is valid) is refused:
// the integrity file knows how much of it was synced.
func TestManifestCutAtAChangeSet(t *testing.T) {
	dir := crashCopy(t, 40, true) // the close flushed a table: a change set
	h, st, err := openHWM(dir)
	if err != nil {
		t.Fatal(err)
	}
	_ = h.close()
	path := filepath.Join(dir, "MANIFEST")
	fi, err := os.Stat(path)
	if err != nil || st.manifest != fi.Size() || st.manifest <= 8 {
		t.Fatalf("recorded manifest size %d, file %v %v", st.manifest, fi.Size(), err)
	}
	// Find the start of the last change set: entries are len(4) crc(4) body.
	b, _ := os.ReadFile(path)
	last := int64(8)
	for off := int64(8); off+8 <= int64(len(b)); {
		n := int64(b[off])<<24 | int64(b[off+1])<<16 | int64(b[off+2])<<8 | int64(b[off+3])
		last = off
		off += 8 + n
	}
	if err := os.Truncate(path, last); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir})
	if !errors.Is(err, history.ErrCorrupt) || !strings.Contains(err.Error(), "MANIFEST") || !strings.Contains(err.Error(), "synced") {
		t.Fatalf("Open over a MANIFEST cut at a change set: %v, want ErrCorrupt naming the MANIFEST", err)
	}
}

// TestDamagedKeyRegistryRewritten: without encryption Badger's
// KEYREGISTRY holds no key, only a fixed sanity text; a flipped bit, a
// zeroed file or a cut one made Open refuse the whole directory (and no
// override got past it: only a backup restore), although nothing was
// lost. The registry is now rewritten (with a warning) and every record
// is served.
func TestDamagedKeyRegistryRewritten(t *testing.T) {
	master := crashCopy(t, 30, false)
	for _, damage := range []string{"flip", "zero", "cut", "empty"} {
		t.Run(damage, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "copy")
			if err := copyTree(master, dir); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, badger.KeyRegistryFileName)
			b, err := os.ReadFile(path)
			if err != nil || len(b) < 28 {
				t.Fatalf("registry of %d bytes: %v", len(b), err)
			}
			switch damage {
			case "flip":
				b[20] ^= 0x04 // in the sanity text
			case "zero":
				clear(b)
			case "cut":
				b = b[:20]
			case "empty":
				b = nil
			}
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			var logs syncBuffer
			l := zerolog.New(&logs)
			s, err := Open(Options{Dir: dir, Logger: &l})
			if err != nil {
				t.Fatalf("Open with a damaged %s: %v", badger.KeyRegistryFileName, err)
			}
			defer s.Close()
			for i := range 30 {
				if v, err := s.Get(bg, history.SpaceMeta, fmt.Appendf(nil, "k%d", i)); err != nil || len(v) != 200 {
					t.Fatalf("record k%d: %d bytes, %v", i, len(v), err)
				}
			}
			if !strings.Contains(logs.String(), "was rewritten") {
				t.Fatalf("no warning about the rewritten registry:\n%s", logs.String())
			}
		})
	}
}

// vlogCrashCopy commits three values large enough for the value log, one
// per commit, and returns a copy of the directory taken while the store
// is open (so the file holding them is the value log's last one, which
// Badger replays at open), with the offset of each value's record in it.
func vlogCrashCopy(t *testing.T) (dir, vlog string, values [][]byte, at []int) {
	t.Helper()
	src := t.TempDir()
	s := mustOpen(t, Options{Dir: src})
	for i := range 3 {
		v := bytes.Repeat([]byte{'a' + byte(i)}, 1100<<10)
		if err := s.Commit(bg, &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: fmt.Appendf(nil, "big%d", i), Value: v}}}); err != nil {
			t.Fatal(err)
		}
		values = append(values, v)
	}
	dir = filepath.Join(t.TempDir(), "copy")
	if err := copyTree(src, dir); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	vlogs, _ := filepath.Glob(filepath.Join(dir, "*.vlog"))
	sort.Strings(vlogs)
	vlog = vlogs[len(vlogs)-1]
	b, err := os.ReadFile(vlog)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		j := bytes.Index(b, bytes.Repeat([]byte{'a' + byte(i)}, 64))
		if j < 0 {
			t.Fatalf("value %d not found in %s", i, vlog)
		}
		at = append(at, j)
	}
	return dir, vlog, values, at
}

// TestValueLogDamageKeepsLaterValues: a flipped bit in one large value in
// the value log's last file made Badger cut the file there at open, so
// every later value in it read as damaged too. Only the damaged one does
// now.
func TestValueLogDamageKeepsLaterValues(t *testing.T) {
	dir, vlog, values, at := vlogCrashCopy(t)
	f, err := os.OpenFile(vlog, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{'a' ^ 0x10}, int64(at[0]+1000)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	s := mustOpen(t, Options{Dir: dir})
	defer s.Close()
	if _, err := s.Get(bg, history.SpaceRunState, []byte("big0")); !errors.Is(err, history.ErrCorrupt) {
		t.Fatalf("the damaged value: %v, want ErrCorrupt", err)
	}
	for i := 1; i < 3; i++ {
		if v, err := s.Get(bg, history.SpaceRunState, fmt.Appendf(nil, "big%d", i)); err != nil || !bytes.Equal(v, values[i]) {
			t.Fatalf("value %d, after the damaged one: %d bytes, %v; want it intact", i, len(v), err)
		}
	}
}

// TestValueLogDamagedHeaderIsAnError: a value-log record whose header is
// damaged — key and value lengths whose 32-bit sum overflows past Badger's
// bound check, or a length varint that overflows — panicked slicing the
// record, and the error path left the file's read lock held, so that the
// next Close waited forever. Each is an error now, and Close returns.
func TestValueLogDamagedHeaderIsAnError(t *testing.T) {
	for name, crafted := range map[string][]byte{
		// klen 0xFFFFFF00, vlen 0x200: their 32-bit sum is 0x100.
		"lengths overflow": {0, 0, 0x80, 0xfe, 0xff, 0xff, 0x0f, 0x80, 0x04, 0x00},
		"varint overflows": {0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		t.Run(name, func(t *testing.T) {
			dir, vlog, values, at := vlogCrashCopy(t)
			b, err := os.ReadFile(vlog)
			if err != nil {
				t.Fatal(err)
			}
			start := bytes.LastIndex(b[:at[1]], []byte("big1")) // value 1's key
			// The record: meta 0, userMeta 0, klen 13 (the space's prefix
			// byte, "big1", the version), vlen in 3 varint bytes,
			// expiresAt 0, the key.
			hdr := start - 1 - 7
			if start < 0 || hdr < 0 || b[hdr] != 0 || b[hdr+1] != 0 || b[hdr+2] != 13 || b[hdr+6] != 0 {
				t.Fatalf("unexpected record header at %d", hdr)
			}
			f, err := os.OpenFile(vlog, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(crafted, int64(hdr)); err != nil {
				t.Fatal(err)
			}
			_ = f.Close()
			s := mustOpen(t, Options{Dir: dir})
			if _, err := s.Get(bg, history.SpaceRunState, []byte("big1")); !errors.Is(err, history.ErrCorrupt) {
				t.Fatalf("a value whose record header is damaged: %v, want ErrCorrupt", err)
			}
			if v, err := s.Get(bg, history.SpaceRunState, []byte("big2")); err != nil || !bytes.Equal(v, values[2]) {
				t.Fatalf("the value after it: %d bytes, %v", len(v), err)
			}
			closed := make(chan error, 1)
			go func() { closed <- s.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute): // a bound on a hang, not a wait for time
				t.Fatal("Close did not return: the damaged read left the value log locked")
			}
		})
	}
}

// TestCompactionDamageFailsWrites: a table block damaged on disk makes
// every compaction that reads it fail; Badger retries them for ever. Level
// 0 then fills up behind it, and once the memtables are full too, every
// commit waited for ever (a hang, not an error). Now such commits fail with
// ErrCorrupt naming the table, reads go on, and Close returns. (Level 0's
// thresholds are lowered so that it fills within a few MiB.)
func TestCompactionDamageFailsWrites(t *testing.T) {
	dir := t.TempDir()
	tweak := func(o badger.Options) badger.Options {
		return o.WithNumLevelZeroTables(1).WithNumLevelZeroTablesStall(2)
	}
	opts := Options{Dir: dir, MemTableSize: 8 << 20, NumMemTables: 2, NoSync: true}
	val := bytes.Repeat([]byte("v"), 32000)
	write := func(s *Store, round byte, n int) error {
		for i := 0; i < n; i += 10 {
			var b history.Batch
			for j := i; j < i+10; j++ {
				b.Puts = append(b.Puts, history.Record{Space: history.SpaceMeta, Key: fmt.Appendf(nil, "k%05d", j), Value: append([]byte{round}, val...)})
			}
			if err := s.Commit(bg, &b); err != nil {
				return err
			}
		}
		return nil
	}
	s, err := open(opts, testHooks{badger: tweak})
	if err != nil {
		t.Fatal(err)
	}
	if err := write(s, 'a', 100); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil { // a table in level 0…
		t.Fatal(err)
	}
	s, err = open(opts, testHooks{badger: tweak})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.db.CompactLevel(0); err != nil { // …compacted into the base level
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("no table")
	}
	sort.Slice(ssts, func(i, j int) bool { return fileSize(ssts[i]) > fileSize(ssts[j]) })
	f, err := os.OpenFile(ssts[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 4096), fileSize(ssts[0])/2&^4095); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	s, err = open(opts, testHooks{badger: tweak})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for round := byte('b'); round < 'z'; round++ { // the same keys again: every compaction reads the damaged table
			if err := write(s, round, 320); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if !errors.Is(err, history.ErrCorrupt) || !strings.Contains(err.Error(), ".sst") {
			t.Fatalf("writes behind a compaction that fails on a damaged table: %v, want ErrCorrupt naming the table", err)
		}
		t.Logf("commit refused: %v", err)
	case <-time.After(2 * time.Minute): // a bound on a hang, not a wait for time
		t.Fatal("a commit has waited for 2 minutes behind a compaction that cannot proceed")
	}
	if _, err := s.Get(bg, history.SpaceMeta, []byte("k00000")); err != nil && !errors.Is(err, history.ErrCorrupt) {
		t.Fatalf("a read after the refusal: %v", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return")
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
