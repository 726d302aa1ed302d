package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Occurrence counters: where the occurrence part of an idempotency key
// (machine.IdempotencyKey) is counted.
//
// Each (run, activity type, key material) that an Idempotent or SideEffect
// activity was scheduled with has a record of its own in history.SpaceIndex,
// key occurrenceRecordKey (family "n", then workflow id, run id and
// OccurrenceKey), value the count (4 bytes, big-endian). A schedule reads
// its counter (one point read), counts one more, and the new value is
// written in the same batch as the schedule's events and run state
// (txn.build): O(1) per schedule, and nothing at all for the transitions
// that schedule no keyed action — the run state no longer carries the
// counters, so it does not grow with the number of distinct actions.
//
// The count a transition advances lives in its working copy of the run
// state (RunState.UncommittedOccurrences, in memory only) until the batch
// is committed: a refused, failed or abandoned transition is discarded
// with its working copy, so no counter ever moves without its schedule being durable. After
// the commit the counts are read from the store again (installRun forgets
// them): there is no cache to keep coherent with the store, even after a
// commit whose outcome was unknown (resync.go reads the run back).
//
// Run states written before the counters had records carry them in
// RunState.Occurrences. They are read as the committed counts, and moved
// to records a chunk at a time, in the run's next writes (each counter
// leaves the map in the batch that writes its record; the map is dropped
// once empty): the keys are those the earlier engine would have assigned.
// Counters are per run: a new run of the workflow id (continue-as-new, a
// reused id) counts from zero, so it repeats the keys
// of the earlier run on purpose and the ledger deduplicates them.

// occurrenceRecordKey is the record key of one counter.
func occurrenceRecordKey(ref history.RunRef, okey string) []byte {
	return history.Key().Str("n").Str(ref.WorkflowID).Str(ref.RunID).Str(okey).Bytes()
}

func encodeOccurrence(n int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(n)) }

func decodeOccurrence(b []byte) (int32, error) {
	if len(b) != 4 || int32(binary.BigEndian.Uint32(b)) <= 0 {
		return 0, fmt.Errorf("%w: %w: occurrence count %x is not a positive 4-byte count", api.ErrInternal, history.ErrCorrupt, b)
	}
	return int32(binary.BigEndian.Uint32(b)), nil
}

// readOccurrence returns the committed count of a run's counter (0 when
// it has none). It is the Machine's Occurrence.
func (e *Engine) readOccurrence(ref history.RunRef, okey string) (int32, error) {
	// A transition is not abandoned halfway because its caller went away
	// (txn.commit): neither is its read.
	b, err := e.store.Get(context.Background(), history.SpaceIndex, occurrenceRecordKey(ref, okey))
	if errors.Is(err, history.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, damaged(ref, true, fmt.Errorf("read an occurrence count: %w", storeErr(err)))
	}
	n, err := decodeOccurrence(b)
	if err != nil {
		return 0, damaged(ref, true, err)
	}
	return n, nil
}

// migrateChunk bounds the counters of a run state of the earlier form that
// one transaction moves to records. Each record's key carries the run's ids
// (a workflow id may be 1,000 bytes), so a map of thousands of counters
// moved at once would not fit in one store batch, and the run could then
// never be written again; moved a chunk per write, the run is wholly
// migrated within a few writes, each a few hundred KB at most.
const migrateChunk = 256

// occurrences adds the counters tr's transitions advanced to the batch,
// and migrates up to migrateChunk more of a run state of the earlier form:
// each counter written as a record leaves the map of the state written in
// the same batch (tr.st is a working copy: the installed state keeps its
// map until the batch is committed), and the map is dropped once empty.
func (x *txn) occurrences(tr *txnRun) {
	st := tr.st
	ref := st.Ref()
	// Each key is put once: a run has one txnRun per transaction.
	put := func(ok string, n int32) {
		x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceIndex, Key: occurrenceRecordKey(ref, ok), Value: encodeOccurrence(n)})
	}
	occ := st.UncommittedOccurrences()
	for _, ok := range slices.Sorted(maps.Keys(occ)) {
		put(ok, occ[ok])
		delete(st.Occurrences, ok)
	}
	if len(st.Occurrences) > 0 {
		earlier := slices.Sorted(maps.Keys(st.Occurrences))
		for _, ok := range earlier[:min(migrateChunk, len(earlier))] {
			put(ok, st.Occurrences[ok])
			delete(st.Occurrences, ok)
		}
	}
	if len(st.Occurrences) == 0 {
		st.Occurrences = nil
	}
}
