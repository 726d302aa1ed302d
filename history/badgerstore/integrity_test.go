package badgerstore

import (
	"errors"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/third_party/badger"
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
