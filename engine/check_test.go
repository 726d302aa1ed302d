package engine

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// checkScenarios leaves a store holding runs in many states: completed,
// open on a timer, paused on an unknown outcome, resolved, deduplicated
// by a second run, with a child, continued as new, with a failed
// activity.
func checkScenarios(t *testing.T, h *harness) {
	t.Helper()
	side := history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: &history.RetryPolicy{MaximumAttempts: 1}}
	// Each workflow id has a task queue of its own: no task is taken for
	// another run.
	start := func(id string) { h.startWith(api.StartWorkflowRequest{WorkflowID: id, TaskQueue: id}) }
	// Completed payment, then a second run deduplicated.
	start("pay")
	h.complete(h.pollWFT("pay"), schedule("p", "Pay", history.SideEffect, side))
	h.completeActivity(h.pollActivity("pay"), `"paid"`)
	h.complete(h.pollWFT("pay"), completeWF(`"done"`))
	start("pay")
	h.complete(h.pollWFT("pay"), schedule("p", "Pay", history.SideEffect, side))
	h.complete(h.pollWFT("pay"), completeWF(`"again"`))
	// Paused on an unknown outcome, and one resolved as not happened then paid.
	for _, id := range []string{"paused", "resolved"} {
		start(id)
		h.complete(h.pollWFT(id), schedule("p", "Pay", history.SideEffect, side))
		act := h.pollActivity(id)
		if _, err := h.eng.FailActivity(h.ctx(), &api.FailActivityRequest{TaskToken: act.TaskToken, OutcomeUnknown: true,
			Failure: history.Failure{Type: "Timeout", Message: "no answer"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.eng.ResolveActivity(h.ctx(), &api.ResolveActivityRequest{WorkflowID: "resolved", Resolution: history.ResolvedNotHappened,
		Identity: "ops", Reason: "checked the bank"}); err != nil {
		t.Fatal(err)
	}
	h.advance(DefaultLeaseDriftMargin) // the next attempt waits until the lost one can no longer act
	h.completeActivity(h.pollActivity("resolved"), `"paid"`)
	// A failed Idempotent activity.
	start("failed")
	h.complete(h.pollWFT("failed"), schedule("i", "Idem", history.Idempotent, side))
	h.failActivity(h.pollActivity("failed"), history.Failure{Type: "Boom", Message: "no", NonRetryable: true})
	// Open on a timer, with a child; continued as new.
	start("timer")
	h.complete(h.pollWFT("timer"), startTimer("t", time.Hour), childCmd("kid", "K", history.ParentCloseAbandon))
	start("can")
	h.complete(h.pollWFT("can"), continueAsNewCmd(`"next"`))
	h.signal("can", "s", `1`)
	h.settleAll()
}

func check(t *testing.T, h *harness) *CheckReport {
	t.Helper()
	r, err := Check(context.Background(), h.store)
	if err != nil {
		t.Fatalf("check: %v", err)
	}
	return r
}

func wantProblem(t *testing.T, r *CheckReport, kind, workflowID, text string) {
	t.Helper()
	for _, p := range r.Problems {
		if p.Kind == kind && p.WorkflowID == workflowID && strings.Contains(p.Message, text) {
			return
		}
	}
	t.Fatalf("no %s problem for %q saying %q in %+v", kind, workflowID, text, r.Problems)
}

// TestCheckHealthyStore: a store in many states passes.
func TestCheckHealthyStore(t *testing.T) {
	h := newHarness(t)
	checkScenarios(t, h)
	h.close()
	h.openStoreOnly()
	r := check(t, h)
	if !r.OK() {
		t.Fatalf("problems in a healthy store: %+v", r.Problems)
	}
	if r.Runs != 9 || r.OpenRuns < 4 || r.Events < 40 || r.LedgerEntries != 4 || r.Records < r.Runs {
		t.Fatalf("counts %+v", r)
	}
}

// TestCheckFindsDamage: each kind of damage or disagreement is reported,
// and one does not hide the others.
func TestCheckFindsDamage(t *testing.T) {
	h := newHarness(t)
	checkScenarios(t, h)
	ref := func(id string) history.RunRef { return history.RunRef{WorkflowID: id, RunID: h.runID(id)} }
	timer, failed, kid := ref("timer"), ref("failed"), ref("kid")
	ledgerOf := func(id string) []byte {
		recs, err := h.store.Scan(h.ctx(), history.SpaceLedger, history.ScanOptions{Prefix: history.Key().Str(id).Bytes()})
		if err != nil || len(recs) != 1 {
			t.Fatalf("ledger of %s: %v %v", id, recs, err)
		}
		return recs[0].Key
	}
	pausedKey := ledgerOf("paused")
	resolvedKey := ledgerOf("resolved")
	h.close()
	h.openStoreOnly()
	// Events lost from "timer": its state claims more.
	st, _ := decodeState(h.getRaw(history.SpaceRunState, stateKey(timer)))
	st.NextEventID += 3
	b, _ := encodeState(st)
	h.putRaw(history.SpaceRunState, stateKey(timer), b)
	// "paused": the ledger says completed; its history says unknown.
	le, _ := decodeLedger("", h.getRaw(history.SpaceLedger, pausedKey))
	le.State = machine.LedgerCompleted
	b, _ = encodeLedger(le)
	h.putRaw(history.SpaceLedger, pausedKey, b)
	// "resolved": its ledger entry does not decode.
	h.putRaw(history.SpaceLedger, resolvedKey, []byte{0xc1})
	// The current-run pointer of "ghost" names a run that does not exist.
	h.putRaw(history.SpaceCurrentRun, curKey("ghost"), []byte("nope"))
	// "kid" is open but missing from the open-run index.
	if err := h.store.Commit(h.ctx(), &history.Batch{Deletes: []history.RecordKey{{Space: history.SpaceIndex, Key: indexOpenKey(kid)}}}); err != nil {
		t.Fatal(err)
	}
	// A quarantine record.
	h.putRaw(history.SpaceIndex, indexQuarantineKey(failed), mustMsgpack(t, &quarantineRecord{Reason: "bit flip", Current: true}))
	r := check(t, h)
	wantProblem(t, r, "history", "timer", "events were lost")
	wantProblem(t, r, "ledger", "paused", "completed but the run's history says unknown")
	wantProblem(t, r, "record", "resolved", "ledger entry")
	wantProblem(t, r, "current-run", "ghost", "no run state")
	wantProblem(t, r, "index", "kid", "missing from the open-run index")
	wantProblem(t, r, "quarantined", "failed", "bit flip")
	if r.Quarantined != 1 || len(r.Problems) != 6 {
		t.Fatalf("%d problems: %+v", len(r.Problems), r.Problems)
	}
}

func mustMsgpack(t *testing.T, v any) []byte {
	t.Helper()
	b, err := api.MarshalMsgpack(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCheckGoesPastDamagedRecords: a record the store reports damaged in a
// scan (a checksum failure) is reported by its key, and the scan goes on.
func TestCheckGoesPastDamagedRecords(t *testing.T) {
	h := newHarness(t)
	checkScenarios(t, h)
	bad := stateKey(history.RunRef{WorkflowID: "paused", RunID: h.runID("paused")})
	h.close()
	h.openStoreOnly()
	fs := &damagedScan{Store: h.store, space: history.SpaceRunState, bad: bad}
	r, err := Check(context.Background(), fs)
	if err != nil {
		t.Fatal(err)
	}
	wantProblem(t, r, "record", "paused", "checksum mismatch")
	if r.Runs != 8 {
		t.Fatalf("%d runs checked besides the damaged one, want 8", r.Runs)
	}
}

// damagedScan is a store with one damaged record in space: like the
// Badger store, a scan that reaches it fails (with nothing) naming its key.
type damagedScan struct {
	history.Store
	space history.Space
	bad   []byte
}

func (d *damagedScan) Scan(ctx context.Context, space history.Space, opts history.ScanOptions) ([]history.Record, error) {
	recs, err := d.Store.Scan(ctx, space, opts)
	if err != nil || space != d.space {
		return recs, err
	}
	for _, r := range recs {
		if string(r.Key) == string(d.bad) {
			return nil, &history.CorruptError{Space: space, Key: d.bad, Reason: "checksum mismatch"}
		}
	}
	return recs, nil
}

// TestCheckFindsDamagedChunks: chunks are checked against their hashes,
// and every chunk an event or another chunk references must be stored.
func TestCheckFindsDamagedChunks(t *testing.T) {
	h := newHarness(t)
	h.start("agent", "Agent")
	big := history.Payload{Encoding: "t", Data: bytes.Repeat([]byte("a"), 20<<10)} // above the inline threshold: a chunk
	h.complete(h.pollWFT("q"), scheduleInput("1", big))
	act := h.pollActivity("q")
	first := act.Input.Ref
	h.completeActivity(act, `"ok"`)
	h.complete(h.pollWFT("q"), scheduleInput("2", history.Payload{Encoding: "t", Ref: first, Data: []byte("turn 2")}))
	second := history.ChunkHash(first, []byte("turn 2"))
	other := history.Payload{Encoding: "t", Ref: history.RootRef, Data: []byte("another chain")}
	h.completeActivity(h.pollActivity("q"), `"ok"`)
	h.complete(h.pollWFT("q"), scheduleInput("3", other))
	h.close()
	h.openStoreOnly()
	if r := check(t, h); !r.OK() || r.Chunks != 3 {
		t.Fatalf("healthy chunks: %d read, problems %+v", r.Chunks, r.Problems)
	}
	// The first chunk lost; the third one's bytes changed on disk.
	if err := h.store.Commit(context.Background(), &history.Batch{Deletes: []history.RecordKey{{Space: history.SpaceChunk, Key: first}}}); err != nil {
		t.Fatal(err)
	}
	third := other.StoredRef()
	v := h.getRaw(history.SpaceChunk, third)
	v[len(v)-1] ^= 1
	h.putRaw(history.SpaceChunk, third, v)
	r := check(t, h)
	wantProblem(t, r, "chunk", "agent", fmt.Sprintf("references chunk %x, which is not stored", first))
	wantProblem(t, r, "chunk", "agent", fmt.Sprintf("chunk %x extends chunk %x, which is not stored", second, first))
	wantProblem(t, r, "chunk", "", "content does not match its hash")
	if len(r.Problems) != 3 {
		t.Fatalf("problems %+v, want exactly the three", r.Problems)
	}
}
