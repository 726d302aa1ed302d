package migrate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/history/storecopy"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
)

// TestMovingIn makes a Badger data directory with real workflows — runs
// closed, one open (waiting for an approval), one paused (a SideEffect
// whose outcome is unknown), an agent with a transcript in payload chunks
// and a budget — copies it into Postgres, interrupting the first copy,
// and opens an engine on the copy: every run's history is the same byte
// for byte through the API, and so are descriptions, usage, the
// transcript and the effects ledger; a new run of a paid workflow id is
// deduplicated from the migrated ledger (the vendor is not called); the
// open and the paused runs finish on the new store; `cairn check`'s
// engine.Check finds nothing wrong before and after.
func TestMovingIn(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	before := makeDataDir(t, ctx, dir)

	src, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	must(t, err)
	defer src.Close()
	url, schema := pgtest.URL(t)
	dst, err := pgstore.Open(ctx, pgstore.Options{URL: url, Schema: schema, Shards: 8})
	must(t, err)
	defer dst.Close()
	res := copyInterrupted(t, ctx, src, dst)
	if res.Verify.Runs != int64(len(before.runs)) || res.Verify.Records() == 0 {
		t.Fatalf("verified %+v; the source has %d runs", res.Verify, len(before.runs))
	}
	t.Logf("copied %d runs, %d events, %d records: %+v", res.Verify.Runs, res.Verify.Events, res.Verify.Records(), res.Verify.Spaces)
	wantChecked(t, ctx, dst, len(before.runs))

	v := newVendor()
	n := boot(t, dst, v, fakellm.New(nil))
	after := capture(t, ctx, n.c)
	wantSame(t, before, after)
	continueOnTarget(t, ctx, n.c, v)
	n.down(t)
	wantChecked(t, ctx, dst, len(before.runs)+1)
}

// makeDataDir runs the workflows on an engine over a Badger directory and
// returns what the API shows of them; the engine and the store are closed.
func makeDataDir(t *testing.T, ctx context.Context, dir string) *snapshot {
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	must(t, err)
	v := newVendor("INV-U")
	model := fakellm.New(clerkScript)
	n := boot(t, st, v, model)
	for _, inv := range []string{"INV-1", "INV-2", "INV-3"} {
		var got string
		_, err := n.c.ExecuteWorkflow(ctx, client.StartOptions{ID: "pay-" + inv, TaskQueue: queue}, Shop, Order{Invoice: inv, Amount: 4200}, &got)
		must(t, err)
	}
	_, err = n.c.StartWorkflow(ctx, client.StartOptions{ID: "pay-INV-U", TaskQueue: queue}, Shop, Order{Invoice: "INV-U"})
	must(t, err)
	testkit.WaitEvent(ctx, t, n.c.Service(), "pay-INV-U", "", "the pause", testkit.EventOfType(history.TypeActivityOutcomeUnknown))
	_, err = n.c.StartWorkflow(ctx, client.StartOptions{ID: "pay-INV-O", TaskQueue: queue}, Shop, Order{Invoice: "INV-O", Approve: true})
	must(t, err)
	testkit.WaitEvent(ctx, t, n.c.Service(), "pay-INV-O", "", "the wait for the approval", testkit.EventOfType(history.TypeWorkflowTaskCompleted))
	var res agent.Result
	_, err = n.c.ExecuteWorkflow(ctx, client.StartOptions{ID: "clerk", TaskQueue: queue}, Clerk, "Look INV-1 and INV-2 up.", &res)
	must(t, err)
	if res.Turns != 3 {
		t.Fatalf("the clerk took %d turns", res.Turns)
	}
	snap := capture(t, ctx, n.c)
	n.down(t)
	must(t, st.Close())
	if len(snap.runs) != 6 || len(snap.effects) < 4 {
		t.Fatalf("the source holds %d runs and %d ledger entries", len(snap.runs), len(snap.effects))
	}
	return snap
}

// copyInterrupted copies src into dst, canceled after its first batch of
// events the first time, then run again to the end.
func copyInterrupted(t *testing.T, ctx context.Context, src, dst history.Store) *storecopy.Result {
	t.Helper()
	stopped, cancel := context.WithCancel(ctx)
	o := storecopy.Options{Source: "badger:test", BatchBytes: 2 << 10, Progress: func(p storecopy.Progress) {
		if p.Phase == storecopy.PhaseEvents && p.Events > 0 {
			cancel()
		}
	}}
	_, err := storecopy.Run(stopped, src, dst, o)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("the interrupted copy: %v", err)
	}
	o.Progress = nil
	res, err := storecopy.Run(ctx, src, dst, o)
	if err != nil {
		t.Fatalf("the copy run again: %v", err)
	}
	if _, skipped := res.Copy.Records(); !res.Copy.Resumed || skipped != res.Verify.Records() || res.Copy.EventsSkipped == 0 || res.Copy.Events == 0 {
		t.Fatalf("the copy run again did not resume: %+v", res.Copy)
	}
	st, err := storecopy.ReadState(ctx, dst)
	if err != nil || !st.Verified() {
		t.Fatalf("the copy's state: %+v, %v", st, err)
	}
	return res
}

// wantChecked fails unless engine.Check finds st whole, with runs runs.
func wantChecked(t *testing.T, ctx context.Context, st history.Store, runs int) {
	t.Helper()
	rep, err := engine.Check(ctx, st)
	must(t, err)
	if !rep.OK() || rep.Runs != runs || rep.Chunks == 0 || rep.LedgerEntries == 0 {
		t.Fatalf("check of the copy: %d runs (want %d), %d chunks, %d ledger entries, problems %+v",
			rep.Runs, runs, rep.Chunks, rep.LedgerEntries, rep.Problems)
	}
}

// continueOnTarget: a new run of a paid workflow id is deduplicated from
// the ledger; the open run is approved and the paused one resolved, and
// both complete.
func continueOnTarget(t *testing.T, ctx context.Context, c client.Client, v *vendor) {
	var got string
	run, err := c.ExecuteWorkflow(ctx, client.StartOptions{ID: "pay-INV-1", TaskQueue: queue}, Shop, Order{Invoice: "INV-1", Amount: 4200}, &got)
	must(t, err)
	evs, err := c.GetHistory(ctx, "pay-INV-1", run.RunID())
	must(t, err)
	if got != "charge-INV-1" || !slices.ContainsFunc(evs, func(ev history.Event) bool { return ev.Type() == history.TypeActivityDeduplicated }) ||
		v.chargeCalls() != 0 {
		t.Fatalf("the second run of pay-INV-1 returned %q after %d charges; history %v", got, v.chargeCalls(), evs)
	}

	must(t, c.SignalWorkflow(ctx, "pay-INV-O", "", "approve", "ok"))
	must(t, c.GetWorkflow(ctx, "pay-INV-O", "").Get(ctx, &got))
	if got != "charge-INV-O" || v.chargeCalls() != 1 {
		t.Fatalf("the open run returned %q after %d charges", got, v.chargeCalls())
	}

	must(t, c.ResolveActivity(ctx, client.ResolveRequest{WorkflowID: "pay-INV-U", Resolution: history.ResolvedHappened,
		Result: "charge-INV-U", By: "ada", Reason: "seen in the vendor's dashboard"}))
	must(t, c.GetWorkflow(ctx, "pay-INV-U", "").Get(ctx, &got))
	if got != "charge-INV-U" || v.chargeCalls() != 1 {
		t.Fatalf("the paused run returned %q after %d charges", got, v.chargeCalls())
	}
}

// snapshot is what the API shows of every run.
type snapshot struct {
	runs    map[history.RunRef]runView
	effects []api.EffectInfo
}

type runView struct {
	events   [][]byte // each event as history.EncodeEvent writes it
	describe []byte   // DescribeWorkflow, as JSON
	trans    []byte   // GetTranscript, as JSON
}

// capture reads every run, its history, description and transcript, and
// the effects ledger.
func capture(t *testing.T, ctx context.Context, c client.Client) *snapshot {
	t.Helper()
	s := &snapshot{runs: map[history.RunRef]runView{}}
	svc := c.Service()
	for _, info := range listRuns(t, ctx, c) {
		var rv runView
		evs, err := c.GetHistory(ctx, info.WorkflowID, info.RunID)
		must(t, err)
		for _, ev := range evs {
			b, err := history.EncodeEvent(ev)
			must(t, err)
			rv.events = append(rv.events, b)
		}
		d, err := c.DescribeWorkflow(ctx, info.WorkflowID, info.RunID)
		must(t, err)
		rv.describe = jsonOf(t, d)
		tr, err := svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: info.WorkflowID, RunID: info.RunID})
		if err == nil {
			rv.trans = jsonOf(t, tr)
		}
		s.runs[history.RunRef{WorkflowID: info.WorkflowID, RunID: info.RunID}] = rv
	}
	var token []byte
	for {
		page, err := c.ListEffects(ctx, &api.ListEffectsRequest{NextPageToken: token})
		must(t, err)
		s.effects = append(s.effects, page.Effects...)
		if token = page.NextPageToken; token == nil {
			return s
		}
	}
}

func listRuns(t *testing.T, ctx context.Context, c client.Client) []api.WorkflowInfo {
	var out []api.WorkflowInfo
	var token []byte
	for {
		page, err := c.ListWorkflows(ctx, &api.ListWorkflowsRequest{NextPageToken: token})
		must(t, err)
		out = append(out, page.Workflows...)
		if token = page.NextPageToken; token == nil {
			return out
		}
	}
}

func jsonOf(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	must(t, err)
	return b
}

// wantSame fails unless the target shows what the source showed.
func wantSame(t *testing.T, before, after *snapshot) {
	t.Helper()
	if len(after.runs) != len(before.runs) {
		t.Fatalf("the target lists %d runs, the source %d", len(after.runs), len(before.runs))
	}
	for ref, b := range before.runs {
		a, ok := after.runs[ref]
		switch {
		case !ok:
			t.Fatalf("run %v is not on the target", ref)
		case !slices.EqualFunc(a.events, b.events, bytes.Equal):
			t.Fatalf("run %v: the target's %d events differ from the source's %d", ref, len(a.events), len(b.events))
		case !bytes.Equal(a.describe, b.describe):
			t.Fatalf("run %v described differently:\nsource %s\ntarget %s", ref, b.describe, a.describe)
		case !bytes.Equal(a.trans, b.trans):
			t.Fatalf("run %v: transcripts differ:\nsource %s\ntarget %s", ref, b.trans, a.trans)
		}
	}
	if !bytes.Equal(jsonOf(t, after.effects), jsonOf(t, before.effects)) {
		t.Fatalf("the effects ledger differs:\nsource %s\ntarget %s", jsonOf(t, before.effects), jsonOf(t, after.effects))
	}
}
