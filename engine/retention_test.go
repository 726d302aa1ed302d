package engine

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
)

// paidAndClosed runs workflow id through one payment of INV-1 (completed
// with "paid") and completes it; it returns the run id.
func paidAndClosed(h *harness, id string) string {
	h.t.Helper()
	run := h.start(id, "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.completeActivity(h.pollActivity("q"), `"paid"`)
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	return run
}

func (h *harness) sweep() SweepReport {
	h.t.Helper()
	rep, err := h.eng.SweepRetention(h.ctx())
	if err != nil {
		h.t.Fatalf("sweep: %v", err)
	}
	return rep
}

// wantDeleted fails unless the run is gone from every read of the API.
func (h *harness) wantDeleted(id, runID string) {
	h.t.Helper()
	_, err := h.eng.DescribeWorkflow(h.ctx(), &api.DescribeWorkflowRequest{WorkflowID: id, RunID: runID})
	wantErr(h.t, err, api.ErrNotFound)
	_, err = h.eng.GetHistory(h.ctx(), &api.GetHistoryRequest{WorkflowID: id, RunID: runID})
	wantErr(h.t, err, api.ErrNotFound)
	if last, err := h.store.LastEventID(h.ctx(), history.RunRef{WorkflowID: id, RunID: runID}); err != nil || last != 0 {
		h.t.Fatalf("the store still holds events of %s/%s: last %d, %v", id, runID, last, err)
	}
	list, err := h.eng.ListWorkflows(h.ctx(), &api.ListWorkflowsRequest{})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, w := range list.Workflows {
		if w.WorkflowID == id && w.RunID == runID {
			h.t.Fatalf("the list still shows %s/%s", id, runID)
		}
	}
}

// TestRetentionSweepKeepsLedger: a closed run is deleted once its
// retention passed (by the engine's clock, not before), its ledger entry
// stays, and the workflow id started again is answered from the ledger:
// the payment is deduplicated, no second attempt is dispatched.
func TestRetentionSweepKeepsLedger(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = 24 * time.Hour })
	first := paidAndClosed(h, "pay")
	h.advance(23 * time.Hour)
	if rep := h.sweep(); rep.Deleted != 0 {
		t.Fatalf("deleted before the retention passed: %+v", rep)
	}
	h.describe("pay")
	h.advance(2 * time.Hour)
	if rep := h.sweep(); rep.Deleted != 1 || rep.Skipped != 0 {
		t.Fatalf("sweep: %+v", rep)
	}
	h.wantDeleted("pay", first)
	if s := h.eng.Stats(); s.RunsDeleted != 1 || s.RetentionSweeps != 2 {
		t.Fatalf("stats %+v", s)
	}
	effects, err := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{WorkflowID: "pay"})
	if err != nil || len(effects.Effects) != 1 {
		t.Fatalf("the ledger entry is gone: %+v, %v", effects, err)
	}
	h.wantConsistent()

	second := h.start("pay", "W")
	if second == first {
		t.Fatal("no new run")
	}
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	evs := h.history("pay")
	d, _ := find[*history.ActivityDeduplicated](t, evs)
	if string(d.Result.Data) != `"paid"` {
		t.Fatalf("deduplicated with %q:\n%s", d.Result.Data, types(evs))
	}
	h.noActivity("q")
	if rep := h.sweep(); rep.Deleted != 0 {
		t.Fatalf("swept an open run: %+v", rep)
	}
}

// TestRetentionPerStart: a start's own retention overrides the default,
// and a negative one keeps the run; without a default nothing expires.
func TestRetentionPerStart(t *testing.T) {
	h := newHarness(t)
	closeNow := func(id string, retention time.Duration) string {
		run := h.startWith(api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q", Retention: retention}).RunID
		h.complete(h.pollWFT("q"), completeWF(`"done"`))
		return run
	}
	short := closeNow("short", time.Hour)
	closeNow("forever", -1)
	closeNow("default", 0)
	h.advance(2 * time.Hour)
	if rep := h.sweep(); rep.Deleted != 1 {
		t.Fatalf("sweep: %+v", rep)
	}
	h.wantDeleted("short", short)
	h.advance(10000 * time.Hour)
	if rep := h.sweep(); rep.Deleted != 0 {
		t.Fatalf("sweep: %+v", rep)
	}
	h.describe("forever")
	h.describe("default")
	h.wantConsistent()
}

// TestDeleteWorkflow: an open run is refused unless forced (then
// terminated first); a closed one is deleted at once; a deleted run's
// workflow id can be started again.
func TestDeleteWorkflow(t *testing.T) {
	h := newHarness(t)
	run := h.start("wf", "W")
	_, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "wf"})
	wantErr(t, err, api.ErrFailedPrecondition)
	resp, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "wf", Force: true, Reason: "cleanup"})
	if err != nil || !resp.Terminated || resp.RunID != run {
		t.Fatalf("forced delete: %+v, %v", resp, err)
	}
	h.wantDeleted("wf", run)
	_, err = h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "wf"})
	wantErr(t, err, api.ErrNotFound)

	closed := paidAndClosed(h, "closed")
	resp, err = h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "closed", RunID: closed})
	if err != nil || resp.Terminated {
		t.Fatalf("delete: %+v, %v", resp, err)
	}
	h.wantDeleted("closed", closed)
	h.wantConsistent()
	again := h.start("wf", "W")
	if again == run {
		t.Fatal("the deleted run came back")
	}
	h.reopen()
	h.wantDeleted("closed", closed)
	h.describe("wf")
}

// TestRetentionKeepsBaseOfReset: a run a reset reads its first events
// from is not deleted while the reset run is kept — the sweep postpones
// it, DeleteWorkflow refuses it — and goes once the reset run is deleted.
func TestRetentionKeepsBaseOfReset(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour })
	base := paidRun(h)
	r := h.reset(api.ResetWorkflowRequest{WorkflowID: "pay-1", ToFirstTask: true})
	h.advance(2 * time.Hour)
	if rep := h.sweep(); rep.Deleted != 0 || rep.Postponed != 1 {
		t.Fatalf("sweep: %+v", rep)
	}
	_, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "pay-1", RunID: base})
	if !errors.Is(err, api.ErrFailedPrecondition) || !errors.Is(err, errBaseKept) {
		t.Fatalf("delete of the base: %v", err)
	}
	h.historyOf("pay-1", r.RunID) // still readable through its base
	h.terminate("pay-1")
	h.advance(2 * time.Hour)
	if rep := h.sweep(); rep.Deleted != 1 || rep.Postponed != 0 {
		t.Fatalf("sweep after the reset run closed: %+v", rep)
	}
	h.wantDeleted("pay-1", r.RunID)
	h.advance(RetentionRetry)
	if rep := h.sweep(); rep.Deleted != 1 {
		t.Fatalf("sweep of the base: %+v", rep)
	}
	h.wantDeleted("pay-1", base)
	h.wantConsistent()
}

// bigPayload is a payload above the inline limit: recorded as a chunk.
func bigPayload(fill byte) history.Payload {
	return history.Payload{Encoding: "json", Data: append(append([]byte{'"'}, bytes.Repeat([]byte{fill}, 20<<10)...), '"')}
}

func (h *harness) chunkStored(hash []byte) bool {
	h.t.Helper()
	_, err := h.store.Get(h.ctx(), history.SpaceChunk, hash)
	if err != nil && !errors.Is(err, history.ErrNotFound) {
		h.t.Fatal(err)
	}
	return err == nil
}

// TestRetentionCollectsChunks: once runs are deleted, the payload chunks
// no kept run references are deleted — not the ones a kept run references
// (a chunk another extends included), and not one a transaction
// references while the collection runs (between its mark and its sweep).
func TestRetentionCollectsChunks(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour })
	if h.eng.opts.Shards != nil {
		t.Skip("payload chunks are not collected by an engine serving shards (a cluster's store): chunkgc.go")
	}
	closeWith := func(id string, in history.Payload, retention time.Duration) {
		h.startWith(api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q", Input: in, Retention: retention})
		h.complete(h.pollWFT("q"), completeWF(`"done"`))
	}
	p1, p3, p4 := bigPayload('a'), bigPayload('c'), bigPayload('d')
	h1 := history.Chunk{Data: p1.Data}.Hash()
	h2 := history.Chunk{Parent: h1, Data: []byte(`"more"`)}.Hash()
	h3, h4 := history.Chunk{Data: p3.Data}.Hash(), history.Chunk{Data: p4.Data}.Hash()
	closeWith("a", p1, 0)
	closeWith("b", history.Payload{Encoding: "json", Ref: h1, Data: []byte(`"more"`)}, -1) // kept: extends a's chunk
	closeWith("c", p3, 0)
	closeWith("d", p4, 0)
	for _, hash := range [][]byte{h1, h2, h3, h4} {
		if !h.chunkStored(hash) {
			t.Fatalf("chunk %x not stored", hash)
		}
	}
	// While the collection runs, after its mark, a new run references
	// d's chunk (which the mark did not reach: d is deleted by then).
	h.eng.chunkGC.afterMark = func() {
		h.startWith(api.StartWorkflowRequest{WorkflowID: "late", WorkflowType: "W", TaskQueue: "q", Input: history.Payload{Encoding: "json", Ref: h4}})
	}
	h.advance(2 * time.Hour)
	rep := h.sweep()
	if rep.Deleted != 3 || rep.ChunksDeleted != 1 {
		t.Fatalf("sweep: %+v", rep)
	}
	if h.chunkStored(h3) || !h.chunkStored(h1) || !h.chunkStored(h2) || !h.chunkStored(h4) {
		t.Fatalf("chunks stored after the sweep: a %v b %v c %v d %v", h.chunkStored(h1), h.chunkStored(h2), h.chunkStored(h3), h.chunkStored(h4))
	}
	h.eng.chunkGC.afterMark = nil
	h.wantConsistent()
	// The chunk is forgotten by the engine's cache of known hashes: a
	// reference to it now is refused instead of recorded.
	_, err := h.eng.StartWorkflow(h.ctx(), &api.StartWorkflowRequest{WorkflowID: "gone", WorkflowType: "W", TaskQueue: "q",
		Input: history.Payload{Encoding: "json", Ref: h3}})
	wantErr(t, err, api.ErrInvalidArgument)
}

// TestLateReportForDeletedRun: the ledger entry an intent wrote (in
// flight) outlives its run deleted (forced) while the action ran: with no
// report of its outcome (its worker died), the workflow id's next run
// pauses on the action for a person instead of paying again. (A report
// that does come is recorded: TestLateReportForDeletedRunIsRecorded.)
func TestLateReportForDeletedRun(t *testing.T) {
	h := newHarness(t)
	h.start("pay", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.pollActivity("q") // and its worker dies
	if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "pay", Force: true}); err != nil {
		t.Fatal(err)
	}
	h.wantConsistent()
	h.start("pay", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.noActivity("q")
	if d := h.describe("pay"); d.Info.Pause == nil {
		t.Fatalf("the next run did not pause on the action in flight: %+v", d.Info)
	}
}

// TestRetentionStaleExpiryRecord: a run deleted by hand after the default
// retention changed leaves its expiry record (written under the old one):
// the sweep finds no run behind it, drops it, and deletes nothing else.
func TestRetentionStaleExpiryRecord(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour })
	run := h.start("wf", "W")
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	h.opts.Retention = 2 * time.Hour
	h.reopen()
	if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "wf"}); err != nil {
		t.Fatal(err)
	}
	h.wantDeleted("wf", run)
	expiries := func() int {
		recs, err := h.store.Scan(h.ctx(), history.SpaceIndex, history.ScanOptions{Prefix: history.Key().Str("r").Bytes()})
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	if n := expiries(); n != 1 {
		t.Fatalf("%d expiry records, want the stale one", n)
	}
	h.advance(3 * time.Hour)
	if rep := h.sweep(); rep.Deleted != 0 || rep.Skipped != 0 {
		t.Fatalf("sweep: %+v", rep)
	}
	if n := expiries(); n != 0 {
		t.Fatalf("%d expiry records after the sweep", n)
	}
	h.wantConsistent()
}

// TestRetentionSweepLoop: with RetentionSweepInterval the engine sweeps on
// its own clock; the test waits for the loop to arm its next timer (the
// sweep done), never sleeps.
func TestRetentionSweepLoop(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour; o.RetentionSweepInterval = time.Minute })
	run := h.start("wf", "W")
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	h.clk.BlockUntil(1) // the loop armed its timer
	h.clk.Advance(2 * time.Hour)
	// The sweep ran once the loop armed the next one, a minute ahead
	// (every other callback due by now has run).
	h.clk.BlockUntilDueWithin(time.Minute)
	if s := h.eng.Stats(); s.RetentionSweeps != 1 || s.RunsDeleted != 1 {
		t.Fatalf("stats %+v", s)
	}
	h.wantDeleted("wf", run)
}

// TestDeleteRefusesBaseOfFork: a fork (another workflow id) reads its
// first events from its base: the base cannot be deleted while the fork
// is kept, and can once the fork is deleted.
func TestDeleteRefusesBaseOfFork(t *testing.T) {
	h := newHarness(t)
	base := paidRun(h)
	f := h.fork(api.ForkWorkflowRequest{WorkflowID: "pay-1", NewWorkflowID: "fork-1", Reason: "what if"})
	_, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "pay-1"})
	if !errors.Is(err, errBaseKept) {
		t.Fatalf("delete of the fork's base: %v", err)
	}
	if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "fork-1", Force: true}); err != nil {
		t.Fatal(err)
	}
	h.wantDeleted("fork-1", f.RunID)
	if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "pay-1"}); err != nil {
		t.Fatalf("delete of the base once the fork is gone: %v", err)
	}
	h.wantDeleted("pay-1", base)
	h.wantConsistent()
}

// TestRetentionKeepsCarriedChunk: an agent that continues as new carries
// its conversation by reference (sdk/agent/carry.go: Carry.Tip, the hash
// of the transcript's last chunk, inside the next run's input — bytes the
// engine cannot read as a reference). Until the next run makes its first
// model call (it waits on a timer, an approval, a signal), the tip is
// referenced as a chunk only by the run that continued as new. That run
// expiring must not take the chunk with it: the open run's conversation
// would be lost, and its next model call (which extends the tip) refused.
func TestRetentionKeepsCarriedChunk(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour })
	if h.eng.opts.Shards != nil {
		t.Skip("payload chunks are not collected by an engine serving shards (a cluster's store): chunkgc.go")
	}
	conv := bigPayload('t') // the conversation so far, recorded as a chunk
	tip := history.Chunk{Data: conv.Data}.Hash()
	first := h.startWith(api.StartWorkflowRequest{WorkflowID: "agent", WorkflowType: "W", TaskQueue: "q", Input: conv}).RunID
	// The run continues as new, carrying the tip inside its input.
	h.complete(h.pollWFT("q"), continueAsNewCmd(fmt.Sprintf(`{"carry":{"tip":"%x"}}`, tip)))
	// The next run waits a day before its first model call.
	h.complete(h.pollWFT("q"), startTimer("think", 24*time.Hour))
	h.advance(2 * time.Hour)
	h.sweep()
	if !h.chunkStored(tip) {
		t.Fatal("the carried conversation's chunk was collected while the run carrying it is open")
	}
	h.advance(24 * time.Hour)
	// The model call extends the carried tip.
	err := h.completeErr(h.pollWFT("q"), api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "chat", ActivityType: "llm.Chat", Input: history.Payload{Encoding: "json", Ref: tip, Data: []byte(`"next turn"`)}}})
	if err != nil {
		t.Fatalf("the next model call (extending the carried tip): %v", err)
	}
	// Once the open run has extended the tip and continued as new again,
	// the first run is no longer kept (the chain keeps one run more, not
	// all of them), and the tip stays: the second run's model call
	// references a chunk that extends it.
	h.completeActivity(h.pollActivity("q"), `"ok"`)
	h.complete(h.pollWFT("q"), continueAsNewCmd(`{"carry":{"tip":"later"}}`))
	h.advance(RetentionRetry + time.Hour)
	if rep := h.sweep(); rep.Deleted != 1 {
		t.Fatalf("sweep once the chain moved on: %+v", rep)
	}
	h.wantDeleted("agent", first)
	if !h.chunkStored(tip) {
		t.Fatal("the tip an open run's history extends was collected")
	}
	h.wantConsistent()
}

// TestRetentionKeepsToolResultOfCarriedTranscript: a transcript chunk
// names a tool's result by reference (history.TranscriptEntry.Content, a
// ShareResult chunk). The chunk collection marks what events reference and
// the parents of those chunks, not what a transcript chunk's entries name:
// it relies on the tool's result being referenced by an event of the same
// run. An agent that continued as new extends the earlier run's
// transcript, so the next run's model calls read tool results only the
// earlier run's events reference. That run closes first and expires
// first: its tool results must not go while the later run is kept, or the
// later run's transcript cannot be read any more.
func TestRetentionKeepsToolResultOfCarriedTranscript(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour })
	if h.eng.opts.Shards != nil {
		t.Skip("payload chunks are not collected by an engine serving shards (a cluster's store): chunkgc.go")
	}
	h.startWith(api.StartWorkflowRequest{WorkflowID: "agent", WorkflowType: "W", TaskQueue: "q"})
	h.complete(h.pollWFT("q"), api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "tool-1", ActivityType: "search", Input: jsonPayload(`"q"`), Effect: history.Read, ShareResult: true}})
	h.completeActivity(h.pollActivity("q"), `"`+strings.Repeat("r", 2*api.ShareResultMinBytes)+`"`)
	done, _ := find[*history.ActivityCompleted](t, h.history("agent"))
	tool := done.Result.Ref
	if len(tool) == 0 {
		t.Fatal("the tool's result is not shared as a chunk")
	}
	entries, err := history.AppendTranscript(nil,
		history.TranscriptEntry{Message: &history.ChatMessage{Role: "user", Content: "find it"}},
		history.TranscriptEntry{Message: &history.ChatMessage{Role: "tool", Name: "search"}, Content: &history.ContentRef{Ref: tool, Encoding: "json"}})
	if err != nil {
		t.Fatal(err)
	}
	chat := func(id string, in history.Payload) api.Command {
		return api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
			ActivityID: id, ActivityType: "llm.Chat", Input: in, Effect: history.Read, Metered: true}}
	}
	h.complete(h.pollWFT("q"), chat("chat-1", history.Payload{Encoding: history.EncodingTranscript, Ref: history.RootRef, Data: entries}))
	h.completeActivity(h.pollActivity("q"), `"ok"`)
	sched, _ := find[*history.ActivityScheduled](t, h.historyOf("agent", h.describe("agent").Info.RunID)[4:])
	tip := sched.Input.Ref
	// It continues as new, carrying the tip; the next run extends it.
	h.complete(h.pollWFT("q"), continueAsNewCmd(fmt.Sprintf(`{"carry":{"tip":"%x"}}`, tip)))
	more, err := history.AppendTranscript(nil, history.TranscriptEntry{Message: &history.ChatMessage{Role: "user", Content: "and then?"}})
	if err != nil {
		t.Fatal(err)
	}
	h.complete(h.pollWFT("q"), chat("chat-2", history.Payload{Encoding: history.EncodingTranscript, Ref: tip, Data: more}))
	h.completeActivity(h.pollActivity("q"), `"done"`)
	h.advance(30 * time.Minute)
	second := h.describe("agent").Info.RunID
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	h.advance(45 * time.Minute) // the first run expired, the second has not
	if rep := h.sweep(); rep.Deleted != 1 {
		t.Fatalf("sweep: %+v", rep)
	}
	if !h.chunkStored(tool) {
		t.Error("the tool's result the kept run's transcript names was collected")
	}
	if _, err := h.eng.GetTranscript(h.ctx(), &api.GetTranscriptRequest{WorkflowID: "agent", RunID: second}); err != nil {
		t.Errorf("the kept run's transcript: %v", err)
	}
	h.wantConsistent()
}

// TestCollectChunksCommitReportedFailed: the commit that deletes unmarked
// chunks is applied but reported failed (history/faultstore: a connection
// lost after COMMIT, an fsync error after the write). The engine's cache
// of known hashes must not go on saying the chunks are stored: a new run
// with the same payload would then trust the cache, not write the chunk
// again, and record a reference to bytes that no longer exist.
func TestCollectChunksCommitReportedFailed(t *testing.T) {
	h := newHarness(t)
	if h.eng.opts.Shards != nil {
		t.Skip("payload chunks are not collected by an engine serving shards (a cluster's store): chunkgc.go")
	}
	big := bigPayload('z')
	hash := history.Chunk{Data: big.Data}.Hash()
	h.startWith(api.StartWorkflowRequest{WorkflowID: "a", WorkflowType: "W", TaskQueue: "q", Input: big})
	h.complete(h.pollWFT("q"), completeWF(`"done"`))
	if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "a"}); err != nil {
		t.Fatal(err)
	}
	h.failNextCommit(faultstore.After, faultstore.ErrIO)
	if _, err := h.eng.CollectChunks(h.ctx()); err == nil {
		t.Fatal("the collection's failed commit was not reported")
	}
	if h.chunkStored(hash) {
		t.Fatal("the fault did not apply the delete")
	}
	h.startWith(api.StartWorkflowRequest{WorkflowID: "b", WorkflowType: "W", TaskQueue: "q", Input: big})
	if !h.chunkStored(hash) {
		t.Fatal("a new run's payload references a chunk that is not stored: its bytes are lost")
	}
	h.wantConsistent()
}

// TestLateReportForDeletedRunIsRecorded: a payment in flight when its run
// was deleted (forced) completes, and its worker reports it late. The
// run's events are gone, but its ledger entry is not: the report is the
// proof that the payment happened, and must be recorded there as it is
// for a run that is only closed — else the workflow id's next run pauses
// on an action "in flight" with no trace of the proof, and a person may
// decide it did not happen and pay a second time. With it, the next run is
// answered from the ledger.
func TestLateReportForDeletedRunIsRecorded(t *testing.T) {
	h := newHarness(t)
	h.start("pay", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	a := h.pollActivity("q")
	if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "pay", Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: a.TaskToken, Result: jsonPayload(`"paid"`)}); err != nil {
		t.Fatalf("the late report: %v", err)
	}
	// Sent again (its reply lost): acknowledged, recorded once.
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: a.TaskToken, Result: jsonPayload(`"paid"`)}); err != nil {
		t.Fatalf("the late report again: %v", err)
	}
	effects, err := h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{WorkflowID: "pay"})
	if err != nil || len(effects.Effects) != 1 {
		t.Fatalf("effects %+v, %v", effects, err)
	}
	if e := effects.Effects[0]; e.State != api.EffectState(machine.LedgerCompleted) {
		t.Fatalf("the ledger entry after the late report of its completion: %+v", e)
	}
	h.wantConsistent()
	h.start("pay", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-1"))
	h.noActivity("q")
	d, _ := find[*history.ActivityDeduplicated](t, h.history("pay"))
	if string(d.Result.Data) != `"paid"` {
		t.Fatalf("deduplicated with %q", d.Result.Data)
	}

	h.complete(h.pollWFT("q"), completeWF(`"ok"`))

	// The report comes only once the next run has paused on the action:
	// it is recorded all the same (the entry holds its attempt's record).
	h.start("pay-2", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-2"))
	a = h.pollActivity("q")
	if _, err := h.eng.DeleteWorkflow(h.ctx(), &api.DeleteWorkflowRequest{WorkflowID: "pay-2", Force: true}); err != nil {
		t.Fatal(err)
	}
	h.start("pay-2", "W")
	h.complete(h.pollWFT("q"), pay("a1", "INV-2"))
	if d := h.describe("pay-2"); d.Info.Pause == nil {
		t.Fatalf("the next run did not pause on the action in flight: %+v", d.Info)
	}
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: a.TaskToken, Result: jsonPayload(`"paid"`)}); err != nil {
		t.Fatalf("the late report after the next run paused: %v", err)
	}
	effects, err = h.eng.ListEffects(h.ctx(), &api.ListEffectsRequest{WorkflowID: "pay-2"})
	if err != nil || len(effects.Effects) != 1 || effects.Effects[0].State != api.EffectState(machine.LedgerCompleted) {
		t.Fatalf("effects %+v, %v", effects, err)
	}
	h.wantConsistent()
}

// TestRetentionBeyondYear2262: a retention so long that the expiry is past
// what the expiry record's key can hold (unix nanoseconds end in 2262) —
// math.MaxInt64, the obvious "forever", or a few hundred years — keeps
// the run; it is not deleted at the next sweep (the expiry's nanoseconds
// overflowed and sorted as long past).
func TestRetentionBeyondYear2262(t *testing.T) {
	h := newHarness(t)
	for _, r := range []time.Duration{math.MaxInt64, 250 * 365 * 24 * time.Hour} {
		id := "keep-" + r.String()
		h.startWith(api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q", Retention: r})
		h.complete(h.pollWFT("q"), completeWF(`"done"`))
	}
	h.advance(time.Hour)
	if rep := h.sweep(); rep.Deleted != 0 {
		t.Fatalf("runs kept for centuries deleted at once: %+v", rep)
	}
	h.describe("keep-" + time.Duration(math.MaxInt64).String())
	h.wantConsistent()
}

// TestRetentionFailedDeleteIsCountedAndPostponed: an expired run whose
// delete the store refuses (a run too long to delete in one transaction:
// history.ErrTooLarge) is counted and logged, and looked at again a
// RetentionRetry later — not retried at every sweep, and never silently.
func TestRetentionFailedDeleteIsCountedAndPostponed(t *testing.T) {
	h := newHarness(t, func(o *Options) { o.Retention = time.Hour })
	first := paidAndClosed(h, "pay")
	deletes := func(c *faultstore.Call) bool { return c.Batch != nil && len(c.Batch.DeleteRuns) > 0 }
	remove := h.fault.Inject(faultstore.Rule{Op: faultstore.OpCommit, Match: deletes, Err: history.ErrTooLarge})
	h.advance(2 * time.Hour)
	if rep := h.sweep(); rep.Failed != 1 || rep.Deleted != 0 {
		t.Fatalf("sweep with a refused delete: %+v", rep)
	}
	if s := h.eng.Stats(); s.RetentionFailures != 1 {
		t.Fatalf("stats %+v", s)
	}
	h.advance(time.Hour)
	if rep := h.sweep(); rep.Failed != 0 || rep.Deleted != 0 {
		t.Fatalf("the failed delete was tried again before RetentionRetry: %+v", rep)
	}
	h.describe("pay")
	remove()
	h.advance(RetentionRetry)
	if rep := h.sweep(); rep.Deleted != 1 {
		t.Fatalf("the postponed run was not deleted: %+v", rep)
	}
	h.wantDeleted("pay", first)
	h.wantConsistent()
}
