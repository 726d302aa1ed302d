package history

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Doubt marks: a store that may hold less than the outside world saw.
//
// After a store lost acknowledged commits (an accepted data loss), or was
// restored from a backup or a point-in-time copy, its effects ledger may
// say an action was never started, or is still running, while in the lost
// range it was performed. Such an action must not be dispatched again as
// if nothing had happened: its outcome is unknown. A DoubtMark records
// that the store is in that condition. Whoever makes the store so writes
// one (badgerstore on an accepted loss and on a restore, an operator with
// `cairn effects doubt` after a restore the store cannot see, such as a
// database's point-in-time recovery); the engine reads the marks when it
// opens, puts every scheduled or in-flight SideEffect action of every open
// run in doubt, and deletes the marks in the same transaction as the last
// of those changes (docs/reliability.md, "Effects after a restore or an
// accepted loss").
//
// A mark is a record of SpaceMeta under DoubtMarkPrefix + Int(At in unix
// nanoseconds); its value is the mark as JSON.

// DoubtMarkPrefix is the key prefix of the doubt marks in SpaceMeta.
var DoubtMarkPrefix = Key().Str("doubt").Bytes()

// The sources of a doubt mark.
const (
	// DoubtAcceptedLoss: the store was opened over lost acknowledged
	// commits (badgerstore.Options.AcceptDataLoss).
	DoubtAcceptedLoss = "accepted-data-loss"
	// DoubtRestore: the store was restored from a backup (cairn restore).
	DoubtRestore = "restore"
	// DoubtOperator: an operator said so (cairn effects doubt), after a
	// restore the store cannot know about.
	DoubtOperator = "operator"
)

// ErrInvalidDoubtMark is returned for a mark without a reason or a time.
var ErrInvalidDoubtMark = errors.New("history: invalid doubt mark")

// DoubtMark says that a store may have lost what the outside world saw:
// the engine puts the actions that may have been performed in the lost
// range in doubt when it next opens.
type DoubtMark struct {
	// At is when the store was put in this condition (the mark's key).
	At time.Time `json:"at"`
	// Source is who wrote the mark: DoubtAcceptedLoss, DoubtRestore or
	// DoubtOperator.
	Source string `json:"source"`
	// Reason says why, for a person: it is shown with every action put
	// in doubt ("restored from PITR at 10:42", the refusal an accepted
	// loss went past).
	Reason string `json:"reason"`
	// Lost says what is known to be lost, when something is ("group
	// commits 120 to 131", "everything after the backup of …").
	Lost string `json:"lost,omitempty"`
}

// Describe renders the mark for a person: its source, reason and what was
// lost, in one line.
func (m DoubtMark) Describe() string {
	s := m.Reason
	if m.Source != "" {
		s = m.Source + ": " + s
	}
	if m.Lost != "" {
		s += " (lost: " + m.Lost + ")"
	}
	return s
}

// Validate checks that the mark has a reason and a time.
func (m DoubtMark) Validate() error {
	if strings.TrimSpace(m.Reason) == "" || m.At.IsZero() {
		return fmt.Errorf("%w: a doubt mark needs a reason and a time", ErrInvalidDoubtMark)
	}
	return nil
}

// DoubtMarkKey is the SpaceMeta key of a mark made at at.
func DoubtMarkKey(at time.Time) []byte {
	return Key().Str("doubt").Int(at.UnixNano()).Bytes()
}

// Record returns the mark as the SpaceMeta record to write.
func (m DoubtMark) Record() (Record, error) {
	if err := m.Validate(); err != nil {
		return Record{}, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return Record{}, fmt.Errorf("history: encode doubt mark: %w", err)
	}
	return Record{Space: SpaceMeta, Key: DoubtMarkKey(m.At), Value: b}, nil
}

// DecodeDoubtMark decodes a mark's record value. A value that does not
// decode, or a mark without a reason, is an error wrapping ErrCorrupt.
func DecodeDoubtMark(key, value []byte) (DoubtMark, error) {
	var m DoubtMark
	if err := json.Unmarshal(value, &m); err != nil {
		return DoubtMark{}, &CorruptError{Space: SpaceMeta, Key: key, Reason: "doubt mark: " + err.Error()}
	}
	if m.Validate() != nil {
		return DoubtMark{}, &CorruptError{Space: SpaceMeta, Key: key, Reason: "doubt mark without a reason or a time"}
	}
	return m, nil
}

// MarkInDoubt writes a doubt mark into st durably. Use it after any
// restore of st that the store itself cannot see, before an engine opens
// it.
func MarkInDoubt(ctx context.Context, st Store, m DoubtMark) error {
	rec, err := m.Record()
	if err != nil {
		return err
	}
	if err := st.Commit(ctx, &Batch{Puts: []Record{rec}}); err != nil {
		return fmt.Errorf("history: write doubt mark: %w", err)
	}
	return nil
}

// DoubtMarks reads the marks in st, oldest first, with their keys.
func DoubtMarks(ctx context.Context, st Store) ([]DoubtMark, [][]byte, error) {
	recs, err := st.Scan(ctx, SpaceMeta, ScanOptions{Prefix: DoubtMarkPrefix})
	if err != nil {
		return nil, nil, fmt.Errorf("history: read doubt marks: %w", err)
	}
	marks := make([]DoubtMark, 0, len(recs))
	keys := make([][]byte, 0, len(recs))
	for _, r := range recs {
		m, err := DecodeDoubtMark(r.Key, r.Value)
		if err != nil {
			return nil, nil, err
		}
		marks = append(marks, m)
		keys = append(keys, r.Key)
	}
	return marks, keys, nil
}
