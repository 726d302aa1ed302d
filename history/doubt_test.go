package history_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
)

// TestDoubtMarkRecord: a mark round-trips through its record; one without
// a reason is refused when written and is damage when read.
func TestDoubtMarkRecord(t *testing.T) {
	m := history.DoubtMark{At: time.Date(2026, 12, 2, 10, 42, 0, 0, time.UTC), Source: history.DoubtOperator, Reason: "restored from PITR", Lost: "10 minutes"}
	rec, err := m.Record()
	if err != nil || rec.Space != history.SpaceMeta || string(rec.Key) != string(history.DoubtMarkKey(m.At)) {
		t.Fatalf("record %+v, %v", rec, err)
	}
	got, err := history.DecodeDoubtMark(rec.Key, rec.Value)
	if err != nil || !got.At.Equal(m.At) || got.Reason != m.Reason || got.Describe() != "operator: restored from PITR (lost: 10 minutes)" {
		t.Fatalf("decoded %+v (%q), %v", got, got.Describe(), err)
	}
	if _, err := (history.DoubtMark{At: m.At}).Record(); !errors.Is(err, history.ErrInvalidDoubtMark) {
		t.Fatalf("a mark without a reason: %v", err)
	}
	for _, v := range []string{`{`, `{"at":"2026-12-02T10:42:00Z"}`} {
		if _, err := history.DecodeDoubtMark(rec.Key, []byte(v)); !errors.Is(err, history.ErrCorrupt) {
			t.Fatalf("%s: %v, want ErrCorrupt", v, err)
		}
	}
}
