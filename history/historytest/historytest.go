// Package historytest is the conformance suite every history.Store must pass:
// one set of tests, so that the embedded Badger store and any future store
// (PostgreSQL, …) mean the same thing by Commit, ErrConflict or Scan.
//
// A store's own test file runs it with a Harness that opens fresh stores:
//
//	func TestConformance(t *testing.T) {
//		historytest.Run(t, historytest.Harness{
//			New: func(t testing.TB) history.Store {
//				s, err := mystore.Open(mystore.Options{Dir: t.TempDir()})
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//			Reopen:  …, // optional: durability tests
//			Corrupt: …, // optional: corruption tests
//		})
//	}
//
// The heavy subtests (a 100,000-event history, 64 concurrent writers) run
// smaller under the race detector and with -short.
package historytest

import (
	"context"
	"errors"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// Harness tells Run how to obtain and manipulate the stores under test.
type Harness struct {
	// New returns a new, empty, open store. Required. Run closes every
	// store it gets (Close must be idempotent); New may register cleanups
	// for anything else it created, such as a directory.
	New func(t testing.TB) history.Store

	// Reopen closes s and opens the same storage again. Nil means the
	// store keeps nothing across Close (in-memory): the subtests that
	// check durability across a reopen are skipped.
	Reopen func(t testing.TB, s history.Store) history.Store

	// Corrupt damages the stored bytes of event id of run (which exists)
	// so that reading it must fail. Nil skips the corruption subtest.
	Corrupt func(t testing.TB, s history.Store, run history.RunRef, id int64)
}

// Run runs the whole suite against the store described by h, one subtest
// per property.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("historytest: Harness.New is required")
	}
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"AppendAndRead", testAppendAndRead},
		{"RunIsolation", testRunIsolation},
		{"ExpectedNextConflict", testExpectedNextConflict},
		{"Conditions", testConditions},
		{"BatchAtomicity", testBatchAtomicity},
		{"EmptyAndConditionOnlyBatches", testEmptyBatches},
		{"ReadEventsRange", testReadEventsRange},
		{"EventsIterator", testEventsIterator},
		{"LargeHistory", testLargeHistory},
		{"ConcurrentWriters", testConcurrentWriters},
		{"Records", testRecords},
		{"Chunks", testChunks},
		{"Scan", testScan},
		{"ScanIndexKeys", testScanIndexKeys},
		{"Runs", testRuns},
		{"DeleteRuns", testDeleteRuns},
		{"Invalid", testInvalid},
		{"ContextCanceled", testContextCanceled},
		{"Close", testClose},
		{"CloseWhileCommitting", testCloseWhileCommitting},
		{"DurableAcrossReopen", testDurableAcrossReopen},
		{"Corruption", testCorruption},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

// open returns a new store that is closed when the test ends.
func open(t *testing.T, h Harness) history.Store {
	t.Helper()
	s := h.New(t)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reopen closes s and opens its storage again (the test must have checked
// that h.Reopen is set).
func reopen(t *testing.T, h Harness, s history.Store) history.Store {
	t.Helper()
	s2 := h.Reopen(t, s)
	t.Cleanup(func() { _ = s2.Close() })
	return s2
}

// ctx is the context of calls that are not about cancellation.
var ctx = context.Background()

// mustCommit commits b and fails the test on any error.
func mustCommit(t testing.TB, s history.Store, b *history.Batch) {
	t.Helper()
	if err := s.Commit(ctx, b); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// wantErr fails the test unless errors.Is(err, target).
func wantErr(t testing.TB, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

// wantNoErr fails the test on err.
func wantNoErr(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
