package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/internal/crashpoint"
)

// Occurrence counters (occurrences.go) on the real Badger store: the keys
// are those the occurrence counts give — 1, 2, 3… for identical actions,
// 1 for each distinct one — through restarts, failed and ambiguous
// commits, an upgrade from run states that held the counters, and a new
// run of the workflow id.

var occOpts = history.ActivityOptions{StartToCloseTimeout: time.Minute}

// pay schedules a SideEffect Pay for invoice (its key material is its
// input).
func pay(id, invoice string) api.Command {
	c := schedule(id, "Pay", history.SideEffect, occOpts)
	c.ScheduleActivity.Input = jsonPayload(fmt.Sprintf(`{"invoice":%q}`, invoice))
	return c
}

// payKey is the key the n-th identical Pay of invoice must get.
func payKey(workflowID, invoice string, n int32) string {
	return IdempotencyKey(workflowID, "Pay", []byte(fmt.Sprintf(`{"invoice":%q}`, invoice)), n)
}

// keysOf returns the idempotency keys of the scheduled activities by
// activity id (the last run's, in the order scheduled).
func keysOf(evs []history.Event) map[string]string {
	keys := map[string]string{}
	for _, ev := range evs {
		if a, ok := ev.Attrs.(*history.ActivityScheduled); ok {
			keys[a.ActivityID] = a.IdempotencyKey
		}
	}
	return keys
}

// turn signals the run (a new workflow task) and completes that task with
// cmds.
func (h *harness) turn(id string, cmds ...api.Command) {
	h.t.Helper()
	h.signal(id, "next", `1`)
	h.complete(h.pollWFT("q"), cmds...)
}

func wantKeys(t *testing.T, got map[string]string, want map[string]string) {
	t.Helper()
	for id, k := range want {
		if got[id] != k {
			t.Errorf("activity %s has key %q, want %q", id, got[id], k)
		}
	}
}

// TestOccurrenceKeysAcrossTransitionsAndRestarts: identical actions count
// 1, 2, 3… within a transaction, across transactions and across a real
// reopen of the store; distinct ones count apart.
func TestOccurrenceKeysAcrossTransitionsAndRestarts(t *testing.T) {
	h := newHarness(t)
	h.start("wf", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"), pay("a2", "INV-1"), pay("b1", "INV-2"))
	h.turn("wf", pay("a3", "INV-1"))
	h.reopen()
	h.turn("wf", pay("a4", "INV-1"), pay("b2", "INV-2"), pay("c1", "INV-3"))
	h.reopen()
	h.turn("wf", pay("b3", "INV-2"))
	wantKeys(t, keysOf(h.history("wf")), map[string]string{
		"a1": payKey("wf", "INV-1", 1), "a2": payKey("wf", "INV-1", 2), "a3": payKey("wf", "INV-1", 3), "a4": payKey("wf", "INV-1", 4),
		"b1": payKey("wf", "INV-2", 1), "b2": payKey("wf", "INV-2", 2), "b3": payKey("wf", "INV-2", 3),
		"c1": payKey("wf", "INV-3", 1),
	})
	h.close()
	h.openStoreOnly()
	if r := check(t, h); !r.OK() {
		t.Fatalf("check: %+v", r.Problems)
	}
}

// TestRunStateDoesNotGrowWithDistinctActions: the run state no longer
// carries a count per distinct action: after 60 distinct side-effecting
// calls (each completed, so none is pending) it is the size it was after
// 5, give or take a few bytes of growing counters.
func TestRunStateDoesNotGrowWithDistinctActions(t *testing.T) {
	h := newHarness(t)
	ref := history.RunRef{WorkflowID: "wf", RunID: h.start("wf", "W")}
	size := func() int {
		b, err := h.store.Get(h.ctx(), history.SpaceRunState, stateKey(ref))
		if err != nil {
			t.Fatal(err)
		}
		return len(b)
	}
	task := h.pollWFT("q")
	var at5 int
	for i := 1; i <= 60; i++ {
		h.complete(task, pay(fmt.Sprint("p", i), fmt.Sprint("INV-", i)))
		h.completeActivity(h.pollActivity("q"), `"paid"`)
		task = h.pollWFT("q")
		if i == 5 {
			at5 = size()
		}
	}
	if at60 := size(); at60 > at5+16 {
		t.Fatalf("the run state grew from %d bytes after 5 distinct side-effecting calls to %d after 60", at5, at60)
	}
	h.complete(task, pay("again", "INV-7"))
	wantKeys(t, keysOf(h.history("wf")), map[string]string{"p7": payKey("wf", "INV-7", 1), "again": payKey("wf", "INV-7", 2)})
}

// TestFailedCommitDoesNotAdvanceOccurrence: a completion whose commit
// fails before it is written leaves no count behind (its retry gets the
// same keys); one whose commit was written but reported failed is read
// back, so the next identical action counts it.
func TestFailedCommitDoesNotAdvanceOccurrence(t *testing.T) {
	for _, err := range []error{faultstore.ErrIO, faultstore.ErrDiskFull} {
		t.Run(fmt.Sprint(err), func(t *testing.T) {
			h := newHarness(t)
			h.start("wf", "W")
			task := h.pollWFT("q")
			n := h.historyLen("wf")
			h.failNextCommit(faultstore.Before, err)
			if e := h.completeErr(task, pay("a1", "INV-1"), pay("a2", "INV-1")); e == nil {
				t.Fatal("the failed commit was not reported")
			}
			h.unchanged("wf", n, "a failed commit")
			// The task was handed back (its dispatch is stale): the worker
			// gets it again and makes the same commands.
			h.complete(h.pollWFT("q"), pay("a1", "INV-1"), pay("a2", "INV-1"))
			h.turn("wf", pay("a3", "INV-1"))
			wantKeys(t, keysOf(h.history("wf")), map[string]string{
				"a1": payKey("wf", "INV-1", 1), "a2": payKey("wf", "INV-1", 2), "a3": payKey("wf", "INV-1", 3)})
		})
	}
	t.Run("written but reported failed", func(t *testing.T) {
		h := newHarness(t)
		h.start("wf", "W")
		h.failNextCommit(faultstore.After, faultstore.ErrIO)
		if e := h.completeErr(h.pollWFT("q"), pay("a1", "INV-1")); e == nil {
			t.Fatal("the failed commit was not reported")
		}
		h.turn("wf", pay("a2", "INV-1"))
		wantKeys(t, keysOf(h.history("wf")), map[string]string{"a1": payKey("wf", "INV-1", 1), "a2": payKey("wf", "INV-1", 2)})
	})
}

// TestOccurrenceReadFailureFailsTheTransition: when the count cannot be
// read the completion fails, writing nothing, and its retry assigns the
// keys a completion without the failure would have.
func TestOccurrenceReadFailureFailsTheTransition(t *testing.T) {
	h := newHarness(t)
	ref := history.RunRef{WorkflowID: "wf", RunID: h.start("wf", "W")}
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.signal("wf", "next", `1`)
	task := h.pollWFT("q")
	n := h.historyLen("wf")
	remove := h.fault.Inject(faultstore.Rule{Op: faultstore.OpGet,
		Match: faultstore.KeyIs(history.SpaceIndex, occurrenceRecordKey(ref, machine.OccurrenceKey("Pay", []byte(`{"invoice":"INV-1"}`)))),
		Err:   faultstore.ErrIO})
	err := h.completeErr(task, pay("a2", "INV-1"))
	wantErr(t, err, api.ErrInternal)
	h.unchanged("wf", n, "a completion whose count could not be read")
	remove()
	h.complete(task, pay("a2", "INV-1"))
	wantKeys(t, keysOf(h.history("wf")), map[string]string{"a1": payKey("wf", "INV-1", 1), "a2": payKey("wf", "INV-1", 2)})
}

// TestOccurrencesOfEarlierRunStates: a run state written by an engine that
// kept the counters in it (RunState.Occurrences, no records) goes on with
// the keys that engine would have assigned; its next write moves the
// counters to records, and cairn check agrees with both forms.
func TestOccurrencesOfEarlierRunStates(t *testing.T) {
	h := newHarness(t)
	ref := history.RunRef{WorkflowID: "wf", RunID: h.start("wf", "W")}
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"), pay("a2", "INV-1"), pay("b1", "INV-2"))
	h.close()
	h.openStoreOnly()
	toEarlierForm(t, h, ref)
	if r := check(t, h); !r.OK() {
		t.Fatalf("check of the earlier form: %+v", r.Problems)
	}
	h.close()
	h.open()
	h.turn("wf", pay("a3", "INV-1"), pay("c1", "INV-3"))
	h.turn("wf", pay("b2", "INV-2"))
	wantKeys(t, keysOf(h.history("wf")), map[string]string{
		"a1": payKey("wf", "INV-1", 1), "a2": payKey("wf", "INV-1", 2), "a3": payKey("wf", "INV-1", 3),
		"b1": payKey("wf", "INV-2", 1), "b2": payKey("wf", "INV-2", 2), "c1": payKey("wf", "INV-3", 1)})
	h.close()
	h.openStoreOnly()
	st := readState(t, h, ref)
	if st.Occurrences != nil {
		t.Fatalf("the run state still holds %v after its next write", st.Occurrences)
	}
	if got := occurrenceRecords(t, h, ref); len(got) != 3 || got[machine.OccurrenceKey("Pay", []byte(`{"invoice":"INV-1"}`))] != 3 {
		t.Fatalf("occurrence records %v", got)
	}
	if r := check(t, h); !r.OK() {
		t.Fatalf("check after the migration: %+v", r.Problems)
	}
}

// TestCheckFindsLostOccurrenceCounter: a counter record lost (or rolled
// back) would let a key be assigned again: cairn check says so.
func TestCheckFindsLostOccurrenceCounter(t *testing.T) {
	h := newHarness(t)
	ref := history.RunRef{WorkflowID: "wf", RunID: h.start("wf", "W")}
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"), pay("a2", "INV-1"))
	h.close()
	h.openStoreOnly()
	if err := h.store.Commit(h.ctx(), &history.Batch{Puts: []history.Record{{Space: history.SpaceIndex,
		Key: occurrenceRecordKey(ref, machine.OccurrenceKey("Pay", []byte(`{"invoice":"INV-1"}`))), Value: encodeOccurrence(1)}}}); err != nil {
		t.Fatal(err)
	}
	wantProblem(t, check(t, h), "occurrence", "wf", "assigned 2 idempotency keys but the run's occurrence counters add up to 1")
}

// TestOccurrencesPerRun: a new run of the workflow id (continue-as-new)
// counts from 1 again: it repeats the keys of the earlier run, which the
// ledger then deduplicates — as before the counters had records.
func TestOccurrencesPerRun(t *testing.T) {
	h := newHarness(t)
	first := h.start("wf", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"), pay("a2", "INV-1"))
	h.completeActivity(h.pollActivity("q"), `"paid"`)
	h.completeActivity(h.pollActivity("q"), `"paid"`)
	h.complete(h.pollWFT("q"), continueAsNewCmd(`"next"`))
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	second := h.describe("wf").Info.RunID
	if second == first {
		t.Fatal("no new run")
	}
	k1, k2 := keysOf(h.historyOf("wf", first)), keysOf(h.historyOf("wf", second))
	if k1["a1"] != payKey("wf", "INV-1", 1) || k2["a1"] != k1["a1"] {
		t.Fatalf("first run %v, second run %v", k1, k2)
	}
	if c := count(h.historyOf("wf", second), history.TypeActivityDeduplicated); c != 1 {
		t.Fatalf("the repeated key was not deduplicated:\n%s", types(h.historyOf("wf", second)))
	}
}

// toEarlierForm rewrites a run as an engine before occurrence records
// wrote it: the counts in the run state, no records.
func toEarlierForm(t *testing.T, h *harness, ref history.RunRef) {
	t.Helper()
	counts := occurrenceRecords(t, h, ref)
	if len(counts) == 0 {
		t.Fatal("no occurrence records to move")
	}
	st := readState(t, h, ref)
	st.Occurrences = counts
	b, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	batch := &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: stateKey(ref), Value: b}}}
	for ok := range counts {
		batch.Deletes = append(batch.Deletes, history.RecordKey{Space: history.SpaceIndex, Key: occurrenceRecordKey(ref, ok)})
	}
	if err := h.store.Commit(h.ctx(), batch); err != nil {
		t.Fatal(err)
	}
	if got := readState(t, h, ref).Occurrences; len(got) != len(counts) {
		t.Fatalf("the rewritten state holds %v", got)
	}
}

func readState(t *testing.T, h *harness, ref history.RunRef) *machine.RunState {
	t.Helper()
	b, err := h.store.Get(context.Background(), history.SpaceRunState, stateKey(ref))
	if err != nil {
		t.Fatal(err)
	}
	st, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func occurrenceRecords(t *testing.T, h *harness, ref history.RunRef) map[string]int32 {
	t.Helper()
	prefix := history.Key().Str("n").Str(ref.WorkflowID).Str(ref.RunID).Bytes()
	recs, err := h.store.Scan(context.Background(), history.SpaceIndex, history.ScanOptions{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int32{}
	for _, r := range recs {
		kr := history.ReadKey(r.Key)
		_, _, _ = kr.Str(), kr.Str(), kr.Str()
		ok := kr.Str()
		n, err := decodeOccurrence(r.Value)
		if err != nil || kr.Err() != nil {
			t.Fatalf("record %x: %v %v", r.Key, err, kr.Err())
		}
		out[ok] = n
	}
	return out
}

// TestOccurrencesThroughCrashPoints: the store dies just before the
// commit of a completion that schedules an identical action (nothing of
// it is durable: after the restart the task runs again and gets the same
// key) or just after it (durable, unanswered: the next identical action
// counts it).
func TestOccurrencesThroughCrashPoints(t *testing.T) {
	for _, at := range []string{crashpoint.Before, crashpoint.After} {
		t.Run(at, func(t *testing.T) {
			h := newHarness(t)
			h.start("wf", "W")
			h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
			h.signal("wf", "next", `1`)
			task := h.pollWFT("q")
			var died atomic.Bool
			crashpoint.Arm("CompleteWorkflowTask"+at, 1, func() { h.fault.Kill(nil); died.Store(true) })
			defer crashpoint.Disarm()
			_ = h.completeErr(task, pay("a2", "INV-1"))
			crashpoint.Disarm()
			if !died.Load() {
				t.Fatal("the crash point was not reached")
			}
			h.reopen()
			if at == crashpoint.Before {
				h.complete(h.pollWFT("q"), pay("a2", "INV-1"))
			}
			h.turn("wf", pay("a3", "INV-1"))
			wantKeys(t, keysOf(h.history("wf")), map[string]string{
				"a1": payKey("wf", "INV-1", 1), "a2": payKey("wf", "INV-1", 2), "a3": payKey("wf", "INV-1", 3)})
			if n := count(h.history("wf"), history.TypeActivityScheduled); n != 3 {
				t.Fatalf("%d activities scheduled, want 3:\n%s", n, types(h.history("wf")))
			}
		})
	}
}

// TestDamagedOccurrenceCounterQuarantinesTheRun: a counter that does not
// decode (or fails its checksum) could give a key twice: the completion
// that needs it fails with ErrDataCorrupt, nothing is written, and the run
// is quarantined; other runs go on.
func TestDamagedOccurrenceCounterQuarantinesTheRun(t *testing.T) {
	for _, how := range []string{"short value", "checksum"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			ref := history.RunRef{WorkflowID: "wf", RunID: h.start("wf", "W")}
			h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
			key := occurrenceRecordKey(ref, machine.OccurrenceKey("Pay", []byte(`{"invoice":"INV-1"}`)))
			if how == "short value" {
				if err := h.store.Commit(h.ctx(), &history.Batch{Puts: []history.Record{{Space: history.SpaceIndex, Key: key,
					Value: []byte{0, 1}}}}); err != nil {
					t.Fatal(err)
				}
			} else {
				h.fault.Inject(faultstore.Rule{Op: faultstore.OpGet, Match: faultstore.KeyIs(history.SpaceIndex, key),
					Err: faultstore.Corrupt("checksum mismatch")})
			}
			h.signal("wf", "next", `1`)
			task := h.pollWFT("q")
			n := h.historyLen("wf")
			wantErr(t, h.completeErr(task, pay("a2", "INV-1")), api.ErrDataCorrupt)
			h.wantCorrupt("wf", "occurrence")
			h.start("other", "W")
			h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
			if keys := keysOf(h.history("other")); keys["a1"] != payKey("other", "INV-1", 1) {
				t.Fatalf("the other run's key %q", keys["a1"])
			}
			h.fault.Clear()
			h.close()
			h.openStoreOnly()
			evs, err := h.store.ReadEvents(h.ctx(), ref, 1, 0)
			if err != nil || len(evs) != n {
				t.Fatalf("the quarantined run has %d events (%v), had %d", len(evs), err, n)
			}
		})
	}
}

// TestLargeEarlierFormMigratesInChunks: a run state of the earlier form
// with thousands of counters and a long workflow id (each record's key
// carries it) is moved to records migrateChunk counters per write. Moved
// in one batch, it did not fit in one store transaction, and every write
// to the run — a signal, even a terminate — failed for good. While it is
// partly moved, every counter is read from wherever it is: an invoice still
// in the map and one already moved both get occurrence 2.
func TestLargeEarlierFormMigratesInChunks(t *testing.T) {
	const extra = 3000
	h := newHarness(t)
	wf := strings.Repeat("w", 900)
	ref := history.RunRef{WorkflowID: wf, RunID: h.start(wf, "W")}
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.close()
	h.openStoreOnly()
	invoice := map[string]string{}
	for i := range extra {
		inv := fmt.Sprintf("X-%d", i)
		invoice[machine.OccurrenceKey("Pay", []byte(fmt.Sprintf(`{"invoice":%q}`, inv)))] = inv
	}
	toEarlierForm(t, h, ref)
	st := readState(t, h, ref)
	for ok := range invoice {
		st.Occurrences[ok] = 1 // as if each had been paid once
	}
	b, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.store.Commit(h.ctx(), &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: stateKey(ref), Value: b}}}); err != nil {
		t.Fatal(err)
	}
	h.close()
	h.open()
	if _, err := h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: wf, SignalName: "next", Input: jsonPayload(`1`)}); err != nil {
		t.Fatalf("the first write after the upgrade: %v", err)
	}
	h.close()
	h.openStoreOnly()
	left, moved := readState(t, h, ref).Occurrences, occurrenceRecords(t, h, ref)
	if len(left) != extra+1-migrateChunk || len(moved) != migrateChunk {
		t.Fatalf("after one write: %d counters left in the map, %d records (want %d, %d)", len(left), len(moved), extra+1-migrateChunk, migrateChunk)
	}
	for _, p := range check(t, h).Problems {
		if strings.Contains(p.Message, "both in the run state's earlier form and in a record") {
			t.Fatalf("check of a run partly moved: %+v", p)
		}
	}
	var stay, gone string // an invoice still in the map, one moved
	for ok, inv := range invoice {
		if _, in := left[ok]; in {
			stay = inv
		} else {
			gone = inv
		}
	}
	h.close()
	h.open()
	h.turn(wf, pay("s2", stay), pay("g2", gone), pay("a2", "INV-1"))
	wantKeys(t, keysOf(h.history(wf)), map[string]string{"a1": payKey(wf, "INV-1", 1), "a2": payKey(wf, "INV-1", 2),
		"s2": payKey(wf, stay, 2), "g2": payKey(wf, gone, 2)})
	for range extra / migrateChunk {
		if _, err := h.eng.SignalWorkflow(h.ctx(), &api.SignalWorkflowRequest{WorkflowID: wf, SignalName: "next", Input: jsonPayload(`1`)}); err != nil {
			t.Fatal(err)
		}
	}
	h.close()
	h.openStoreOnly()
	if st, recs := readState(t, h, ref), occurrenceRecords(t, h, ref); st.Occurrences != nil || len(recs) != extra+1 || recs[machine.OccurrenceKey("Pay", []byte(`{"invoice":"INV-1"}`))] != 2 {
		t.Fatalf("after %d writes: %d counters left in the map, %d records", extra/migrateChunk+2, len(st.Occurrences), len(recs))
	}
}
