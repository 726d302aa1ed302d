// Package clienttest is the conformance suite of sdk/client: one set of
// tests that every way of reaching an engine (client.NewLocal over an
// embedded engine, client.Dial over HTTP) must pass identically — results,
// typed errors, long polls and all.
//
//	func TestLocal(t *testing.T) {
//		clienttest.Run(t, func(t *testing.T) clienttest.Env {
//			eng := openEngine(t) // a fresh engine, closed by t.Cleanup
//			return clienttest.Env{Client: client.NewLocal(eng, client.Options{})}
//		})
//	}
//
// The suite runs real worker.Workers over the Env's client (so, for the
// HTTP transport, workers long-poll the server like remote worker
// processes). It imports no engine and no store: it sees only the Client.
package clienttest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

func testResolve(t *testing.T, s *suite) {
	s.startWorker()
	r := s.start(s.opts("pay"), Pay, Order{ID: "INV-9", Amount: 1250})
	unknown := s.waitEvent("pay", r.RunID(), 1, history.TypeActivityOutcomeUnknown)
	ou := unknown.Attrs.(*history.ActivityOutcomeUnknown)
	if !strings.Contains(ou.Reason, "gateway timed out") || ou.IdempotencyKey == "" {
		t.Fatalf("outcome unknown event: %+v", ou)
	}

	d := s.describe("pay", "")
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil {
		t.Fatalf("describe of a paused run: status %s pause %+v", d.Info.Status, d.Info.Pause)
	}
	p := d.Info.Pause
	if p.ActivityType != "Charge" || p.ScheduledEventID != ou.ScheduledEventID || p.IdempotencyKey != ou.IdempotencyKey ||
		p.Attempt != 1 || !strings.Contains(p.Reason, "gateway timed out") || p.Since.IsZero() {
		t.Fatalf("pause info: %+v", p)
	}
	if len(d.PendingActivities) != 1 || d.PendingActivities[0].State != api.ActivityStateUnknown ||
		d.PendingActivities[0].Effect != history.SideEffect {
		t.Fatalf("pending activities of a paused run: %+v", d.PendingActivities)
	}
	lp, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{Status: api.StatusPaused})
	if err != nil || len(lp.Workflows) != 1 || lp.Workflows[0].WorkflowID != "pay" || lp.Workflows[0].Pause == nil ||
		lp.Workflows[0].Pause.ScheduledEventID != p.ScheduledEventID {
		t.Fatalf("list of paused runs: %+v, %v", lp, err)
	}
	// Get does not return while the run is paused; a short wait shows it.
	short, cancel := context.WithTimeout(s.ctx, 50*time.Millisecond)
	err = r.Get(short, nil)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get of a paused run: %v, want the caller's deadline", err)
	}

	paid := Receipt{OrderID: "INV-9", Total: 1250, Note: "confirmed by phone"}
	err = s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "pay", ScheduledEventID: p.ScheduledEventID,
		Resolution: history.ResolvedHappened, Result: paid, By: "ops@example.com", Reason: "bank statement"})
	if err != nil {
		t.Fatal(err)
	}
	var got Receipt
	if err := r.Get(s.ctx, &got); err != nil || got != paid {
		t.Fatalf("result after resolve: %+v, %v; want %+v", got, err, paid)
	}
	ev := s.waitEvent("pay", r.RunID(), 1, history.TypeActivityResolved)
	res := ev.Attrs.(*history.ActivityResolved)
	if res.Resolution != history.ResolvedHappened || res.By != "ops@example.com" || res.Reason != "bank statement" ||
		res.ScheduledEventID != p.ScheduledEventID {
		t.Fatalf("resolved event: %+v", res)
	}
	if d := s.describe("pay", ""); d.Info.Status != api.StatusCompleted || d.Info.Pause != nil {
		t.Fatalf("describe after resolve: %+v", d.Info)
	}
	if lp, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{Status: api.StatusPaused}); err != nil || len(lp.Workflows) != 0 {
		t.Fatalf("paused runs after resolve: %+v, %v", lp, err)
	}
	// Resolving again: the run is closed.
	err = s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "pay", Resolution: history.ResolvedHappened, Result: paid})
	wantCode(t, "resolve a closed run", err, api.ErrWorkflowClosed)
}

// listEffects reads every page of the effects ledger for req.
func (s *suite) listEffects(req api.ListEffectsRequest) []api.EffectInfo {
	s.t.Helper()
	var got []api.EffectInfo
	for pages := 0; ; pages++ {
		if pages > 20 {
			s.t.Fatal("ListEffects paging does not end")
		}
		resp, err := s.c.ListEffects(s.ctx, &req)
		if err != nil {
			s.t.Fatal(err)
		}
		got = append(got, resp.Effects...)
		if resp.NextPageToken == nil {
			return got
		}
		req.NextPageToken = resp.NextPageToken
	}
}

func testListEffects(t *testing.T, s *suite) {
	s.startWorker()
	keys := map[string]string{}
	for _, id := range []string{"effects-a", "effects-b"} {
		r := s.start(s.opts(id), Pay, Order{ID: id, Amount: 7})
		ou := s.waitEvent(id, r.RunID(), 1, history.TypeActivityOutcomeUnknown).Attrs.(*history.ActivityOutcomeUnknown)
		keys[id] = ou.IdempotencyKey
	}
	one := s.listEffects(api.ListEffectsRequest{WorkflowID: "effects-a"})
	if len(one) != 1 {
		t.Fatalf("effects of effects-a: %+v", one)
	}
	e := one[0]
	d := s.describe("effects-a", "")
	if e.WorkflowID != "effects-a" || e.IdempotencyKey != keys["effects-a"] || e.ActivityType != "Charge" ||
		e.Effect != history.SideEffect || e.State != api.EffectUnknown || e.Attempts != 1 || e.Duplicates != 0 ||
		e.RunID != d.Info.RunID || !slices.Equal(e.RunIDs, []string{d.Info.RunID}) || e.Created.IsZero() || e.Updated.Before(e.Created) {
		t.Fatalf("ledger entry of a paused payment: %+v", e)
	}
	ids := func(es []api.EffectInfo) []string {
		var out []string
		for _, e := range es {
			out = append(out, e.WorkflowID)
		}
		return out
	}
	if got := ids(s.listEffects(api.ListEffectsRequest{PageSize: 1})); !slices.Equal(got, []string{"effects-a", "effects-b"}) {
		t.Fatalf("all effects, pages of 1: %v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{WorkflowID: "effects-b", KeyPrefix: keys["effects-b"][:6]}); len(got) != 1 {
		t.Fatalf("effects-b by key prefix: %+v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{KeyPrefix: keys["effects-a"][:8]}); len(got) != 1 || got[0].WorkflowID != "effects-a" {
		t.Fatalf("all workflows by key prefix: %+v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{WorkflowID: "effects-a", KeyPrefix: "zz"}); len(got) != 0 {
		t.Fatalf("a prefix no key has: %+v", got)
	}
	if got := s.listEffects(api.ListEffectsRequest{DuplicatesOnly: true}); len(got) != 0 {
		t.Fatalf("duplicates where there are none: %+v", got)
	}
	paid := Receipt{OrderID: "effects-a", Total: 7, Note: "found at the bank"}
	if err := s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "effects-a", Resolution: history.ResolvedHappened,
		Result: paid, By: "ops", Reason: "bank statement"}); err != nil {
		t.Fatal(err)
	}
	if err := s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "effects-b", Resolution: history.ResolvedFailed,
		By: "ops", Reason: "declined"}); err != nil {
		t.Fatal(err)
	}
	all := s.listEffects(api.ListEffectsRequest{})
	if len(all) != 2 || all[0].State != api.EffectCompleted || all[1].State != api.EffectNotHappened {
		t.Fatalf("effects after resolving: %+v", all)
	}
	var got Receipt
	if err := s.c.Converter().FromPayload(all[0].Result, &got); err != nil || got != paid {
		t.Fatalf("ledger result %+v, %v; want %+v", got, err, paid)
	}
	_, err := s.c.ListEffects(s.ctx, &api.ListEffectsRequest{WorkflowID: strings.Repeat("x", 4<<10)})
	wantCode(t, "list effects of an oversized id", err, api.ErrLimitExceeded)
}

// testDuplicateVisible makes an effect happen twice by hand — attempt 1
// loses its lease, a person says it did not happen, attempt 2 pays, then
// attempt 1 reports that it paid too — and checks that the duplicate shows
// everywhere a person looks.
func testDuplicateVisible(t *testing.T, s *suite) {
	const queue = "raw-duplicate"
	if _, err := s.c.StartWorkflow(s.ctx, client.StartOptions{ID: "dup", TaskQueue: queue}, "Raw", nil); err != nil {
		t.Fatal(err)
	}
	wft := s.pollWFT(queue)
	schedule := api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "1", ActivityType: "RawCharge", Effect: history.SideEffect, Input: api.Payload{Encoding: "json", Data: []byte(`1`)},
		Options: api.ActivityOptions{StartToCloseTimeout: 200 * time.Millisecond}}}
	if _, err := s.svc.CompleteWorkflowTask(s.ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.TaskToken,
		Commands: []api.Command{schedule}}); err != nil {
		t.Fatal(err)
	}
	first := s.pollActivity(queue)
	ou := s.waitEvent("dup", wft.RunID, 1, history.TypeActivityOutcomeUnknown).Attrs.(*history.ActivityOutcomeUnknown)
	if err := s.c.ResolveActivity(s.ctx, client.ResolveRequest{WorkflowID: "dup", Resolution: history.ResolvedNotHappened,
		By: "ops", Reason: "nothing at the provider yet"}); err != nil {
		t.Fatal(err)
	}
	second := s.pollActivity(queue)
	if second.Attempt != 2 || second.IdempotencyKey != ou.IdempotencyKey {
		t.Fatalf("retry: attempt %d key %s, want 2 and %s", second.Attempt, second.IdempotencyKey, ou.IdempotencyKey)
	}
	if _, err := s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: second.TaskToken,
		Result: api.Payload{Encoding: "json", Data: []byte(`"pay_2"`)}, Identity: "second"}); err != nil {
		t.Fatal(err)
	}
	_, err := s.svc.CompleteActivity(s.ctx, &api.CompleteActivityRequest{TaskToken: first.TaskToken,
		Result: api.Payload{Encoding: "json", Data: []byte(`"pay_1"`)}, Identity: "woke-up"})
	wantCode(t, "the stale attempt's success", err, api.ErrStaleAttempt)

	dups := s.listEffects(api.ListEffectsRequest{DuplicatesOnly: true})
	if len(dups) != 1 || dups[0].WorkflowID != "dup" || dups[0].Duplicates != 1 || len(dups[0].Reports) != 1 {
		t.Fatalf("duplicates: %+v", dups)
	}
	r := dups[0].Reports[0]
	if r.Verdict != api.VerdictDuplicate || r.Attempt != 1 || r.Identity != "woke-up" || r.RunID != wft.RunID ||
		r.IdempotencyKey != ou.IdempotencyKey || string(r.Result.Data) != `"pay_1"` || r.AfterClose {
		t.Fatalf("duplicate report: %+v", r)
	}
	d := s.describe("dup", "")
	if d.Info.Duplicates != 1 || len(d.EffectReports) != 1 || d.EffectReports[0].Verdict != api.VerdictDuplicate {
		t.Fatalf("describe of a run with a duplicate: info %+v, reports %+v", d.Info, d.EffectReports)
	}
	s.waitEvent("dup", wft.RunID, 1, history.TypeActivityDuplicateDetected)
	lw, err := s.c.ListWorkflows(s.ctx, &api.ListWorkflowsRequest{})
	if err != nil || len(lw.Workflows) != 1 || lw.Workflows[0].Duplicates != 1 {
		t.Fatalf("list of a run with a duplicate: %+v, %v", lw, err)
	}
}
