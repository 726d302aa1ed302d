package badgerstore

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/third_party/badger"
)

// seqKey holds the number of the last group commit. Every group commit
// writes it in its own transaction (seal(seqKey, seq) — one small key per
// fsync), so the versions of this key that Badger still holds must form an
// unbroken run ending at the integrity file's mark.
var seqKey = []byte("\x00cairn.seq")

// lossKeyPrefix starts the records of data losses an operator accepted
// (Options.AcceptDataLoss): lossKeyPrefix + 8-byte big-endian unix nanos
// → a sealed JSON LossRecord.
var lossKeyPrefix = []byte("\x00cairn.loss.")

// LossRecord is what the store wrote down when it was opened with
// Options.AcceptDataLoss over damage it would otherwise have refused.
type LossRecord struct {
	At time.Time `json:"at"`
	// Refused is the error the store would have refused to open with.
	Refused string `json:"refused"`
	// LostFrom and LostTo are the group commits known lost (0 when the
	// numbers are not known); each group commit holds one or more
	// acknowledged Commit calls.
	LostFrom uint64 `json:"lost_from,omitempty"`
	LostTo   uint64 `json:"lost_to,omitempty"`
	// Resumed is the commit number the store went on from.
	Resumed uint64 `json:"resumed"`
}

func encodeSeq(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// seqRange is the outcome of checkSequence.
type seqRange struct {
	last uint64 // newest commit number in the database (0: none)
	// gapFrom..gapTo are missing commits between versions Badger holds.
	gapFrom, gapTo uint64
}

// checkSequence reads the versions of seqKey that Badger holds and checks
// that no commit is missing between them. Memtables hold every version
// (in order: Badger flushes them oldest first); tables hold only the
// newest version compaction left, which must be the commit just before
// the oldest one in the memtables. Gaps an operator accepted before
// (accepted, from the LossRecords) are not reported again.
func checkSequence(db *badger.DB, accepted []LossRecord) (seqRange, error) {
	mem, top, err := db.KeyVersions(seqKey)
	if err != nil {
		return seqRange{}, readError("read commit sequence", err)
	}
	return checkVersions(mem, top, accepted)
}

// checkVersions is checkSequence on the versions read: mem newest first,
// top the newest version in the tables (nil: none).
func checkVersions(mem []badger.KeyVersion, top *badger.KeyVersion, accepted []LossRecord) (seqRange, error) {
	var r seqRange
	decode := func(v []byte) (uint64, error) {
		if v == nil {
			return 0, corruptRecord(seqKey, "commit sequence in the value log")
		}
		v, err := unseal(seqKey, v)
		if err != nil {
			return 0, err
		}
		if len(v) != 8 {
			return 0, corruptRecord(seqKey, "commit sequence of %d bytes", len(v))
		}
		return binary.BigEndian.Uint64(v), nil
	}
	gap := func(from, to uint64) {
		for _, l := range accepted {
			if l.LostFrom <= from && to <= l.LostTo {
				return
			}
		}
		if r.gapTo == 0 {
			r.gapFrom, r.gapTo = from, to
		}
	}
	var prev, oldest uint64
	for i, kv := range mem {
		seq, err := decode(kv.Value)
		if err != nil {
			return r, err
		}
		switch {
		case i == 0:
			r.last = seq
		case seq > prev:
			return r, corruptRecord(seqKey, "commit %d is older than commit %d", seq, prev)
		case seq+1 < prev:
			gap(seq+1, prev-1)
		}
		prev, oldest = seq, seq
	}
	if top == nil {
		if len(mem) > 0 && oldest > 1 {
			gap(1, oldest-1) // tables that held the earlier commits are gone
		}
		return r, nil
	}
	t, err := decode(top.Value)
	if err != nil {
		return r, err
	}
	if len(mem) > 0 && t+1 < oldest {
		gap(t+1, oldest-1)
	}
	r.last = max(r.last, t)
	return r, nil
}

// verifySequence compares the database's commits with the integrity file's
// mark. It returns nil, or a *history.CorruptError describing the loss.
func verifySequence(r seqRange, hwm uint64, dir string) error {
	switch {
	case r.gapTo != 0:
		return corruptFile(dir, -1, "acknowledged group commits %d to %d are missing from the database (it holds commits up to %d): a log or table lost data", r.gapFrom, r.gapTo, r.last)
	case r.last < hwm:
		return corruptFile(dir, -1, "the database ends at group commit %d but commits up to %d were acknowledged (%s): %d acknowledged commits were lost or rolled back", r.last, hwm, HWMFile, hwm-r.last)
	}
	return nil
}

// recordLoss writes a LossRecord durably and, in the same transaction,
// the doubt mark that makes the engine put the actions the lost commits
// may have performed in doubt when it opens (history.DoubtMark).
func recordLoss(db *badger.DB, rec LossRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	mark, err := lossMark(rec).Record()
	if err != nil {
		return err
	}
	key := binary.BigEndian.AppendUint64(bytes.Clone(lossKeyPrefix), uint64(rec.At.UnixNano()))
	markKey := recordKey(history.SpaceMeta, mark.Key)
	return db.Update(func(txn *badger.Txn) error {
		if err := txn.Set(key, seal(key, b)); err != nil {
			return err
		}
		return txn.Set(markKey, seal(markKey, mark.Value))
	})
}

// lossMark is the doubt mark of an accepted data loss.
func lossMark(rec LossRecord) history.DoubtMark {
	m := history.DoubtMark{At: rec.At, Source: history.DoubtAcceptedLoss,
		Reason: "the store was opened over lost acknowledged commits (--accept-data-loss): " + rec.Refused}
	if rec.LostFrom != 0 {
		m.Lost = fmt.Sprintf("group commits %d to %d", rec.LostFrom, rec.LostTo)
	}
	return m
}

// Losses returns the data losses accepted with Options.AcceptDataLoss, oldest
// first.
func (s *Store) Losses() ([]LossRecord, error) { return losses(s.db) }

func losses(db *badger.DB) ([]LossRecord, error) {
	var out []LossRecord
	err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: lossKeyPrefix})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			raw, err := it.Item().ValueCopy(nil)
			if err != nil {
				return readError("read loss record", err)
			}
			v, err := unseal(it.Item().Key(), raw)
			if err != nil {
				return err
			}
			var rec LossRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return corruptRecord(it.Item().KeyCopy(nil), "loss record: %v", err)
			}
			out = append(out, rec)
		}
		return it.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("badgerstore: losses: %w", err)
	}
	return out, nil
}
