package browser

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/internal/clock"
)

// damaged is an engine (on an injected clock, over a fault-injecting
// Badger store) holding the two states a person must be shown clearly:
// a run with an effect that happened twice, and a quarantined run.
type damaged struct {
	eng *engine.Engine
	clk *clock.Fake
}

func jsonPayload(s string) history.Payload { return history.Payload{Encoding: "json", Data: []byte(s)} }

func newDamaged(t *testing.T) *damaged {
	t.Helper()
	bs, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	st := faultstore.New(bs)
	clk := clock.NewFake(time.Now().Add(-5 * time.Minute)) // it moves 65 s on; the page's "ago" uses the browser's clock
	eng, err := engine.Open(engine.Options{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	d := &damaged{eng: eng, clk: clk}
	d.duplicate(t)
	d.quarantine(t, st)
	return d
}

// duplicate makes pay-twice's payment happen twice, as the engine sees it:
// attempt 1 loses its lease, a person says it did not happen, attempt 2
// pays, and then attempt 1 reports that it paid too.
func (d *damaged) duplicate(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	eng := d.eng
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "pay-twice", WorkflowType: "PayInvoice", TaskQueue: "q",
		Input: jsonPayload(`{"Invoice":"INV-11"}`)}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "worker-a"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Identity: "worker-a",
		Commands: []api.Command{{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1",
			ActivityType: "SendPayment", Input: jsonPayload(`{"Invoice":"INV-11","Amount":700}`), Effect: history.SideEffect,
			Options: history.ActivityOptions{StartToCloseTimeout: time.Minute}}}}}); err != nil {
		t.Fatal(err)
	}
	poll := func() *api.ActivityTask {
		t.Helper()
		r, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q", Identity: "worker-a"})
		if err != nil || r.Task == nil {
			t.Fatalf("poll activity: %+v %v", r, err)
		}
		return r.Task
	}
	first := poll()
	d.clk.Advance(time.Minute + time.Second) // attempt 1's lease runs out: outcome unknown
	eng.Settle()
	if _, err := eng.ResolveActivity(ctx, &api.ResolveActivityRequest{WorkflowID: "pay-twice", ScheduledEventID: first.ScheduledEventID,
		Resolution: history.ResolvedNotHappened, Identity: "clerk", Reason: "not at the provider"}); err != nil {
		t.Fatal(err)
	}
	eng.Settle()
	d.clk.Advance(engine.DefaultLeaseDriftMargin) // attempt 2 waits until attempt 1 can no longer act
	eng.Settle()
	second := poll()
	if _, err := eng.CompleteActivity(ctx, &api.CompleteActivityRequest{TaskToken: second.TaskToken, Result: jsonPayload(`"pay_2"`), Identity: "worker-a"}); err != nil {
		t.Fatal(err)
	}
	_, err = eng.CompleteActivity(ctx, &api.CompleteActivityRequest{TaskToken: first.TaskToken, Result: jsonPayload(`"pay_1"`), Identity: "frozen-worker"})
	if !errors.Is(err, api.ErrStaleAttempt) {
		t.Fatalf("attempt 1's late report: %v, want a stale attempt", err)
	}
	desc, err := eng.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "pay-twice"})
	if err != nil || desc.Info.Duplicates != 1 {
		t.Fatalf("pay-twice: %+v %v, want one duplicate", desc, err)
	}
}

// quarantine damages the history of broken-1 (its events fail their
// checksum when read), and reads it: the engine quarantines the run.
func (d *damaged) quarantine(t *testing.T, st *faultstore.Store) {
	t.Helper()
	ctx := context.Background()
	resp, err := d.eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "broken-1", WorkflowType: "PayInvoice", TaskQueue: "q2"})
	if err != nil {
		t.Fatal(err)
	}
	ref := history.RunRef{WorkflowID: "broken-1", RunID: resp.RunID}
	for _, op := range []faultstore.Op{faultstore.OpReadEvents, faultstore.OpEvents} {
		st.Inject(faultstore.Rule{Op: op, Match: faultstore.RunIs(ref), Err: faultstore.Corrupt("event 1 fails its checksum")})
	}
	if _, err := d.eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "broken-1"}); !errors.Is(err, api.ErrDataCorrupt) {
		t.Fatalf("history of the damaged run: %v, want data corrupt", err)
	}
	desc, err := d.eng.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "broken-1"})
	if err != nil || desc.Info.Corrupt == "" {
		t.Fatalf("broken-1: %+v %v, want it quarantined", desc, err)
	}
}

// A duplicate effect and a quarantined run are flagged on the runs list
// and called out on the run page, and a quarantined run's page says what
// the engine knows of it instead of failing.
func TestWebUIShowsDamage(t *testing.T) {
	exe := chromium(t)
	d := newDamaged(t)
	srv := httptest.NewServer(ui.New(d.eng, ui.Options{}))
	t.Cleanup(srv.Close) // after the browser's cleanups: it polls until then
	shots := screenshotDir(t)
	ctx, quiet := browse(t, exe)

	run(t, ctx, "list the runs",
		chromedp.Navigate(srv.URL+"/runs"),
		until(`document.querySelector('#runs-table tr[data-run="pay-twice"]') !== null && document.querySelector('#runs-table tr[data-run="broken-1"]') !== null`),
	)
	if row := textOf(t, ctx, `#runs-table tr[data-run="pay-twice"]`); !strings.Contains(row, "1 duplicate effect") {
		t.Fatalf("the run with a duplicate is not flagged in the list:\n%s", row)
	}
	if row := textOf(t, ctx, `#runs-table tr[data-run="broken-1"]`); !strings.Contains(row, "quarantined") || !strings.Contains(row, "event 1 fails its checksum") {
		t.Fatalf("the quarantined run is not flagged in the list:\n%s", row)
	}
	// Its status badge says so too, not "running" (the status the engine
	// recorded before the damage was found), as cairn workflow describe does.
	if st := textOf(t, ctx, `#runs-table tr[data-run="broken-1"] td:nth-child(2)`); strings.TrimSpace(st) != "quarantined" {
		t.Fatalf("the quarantined run's status in the list: %q", st)
	}
	if st := textOf(t, ctx, `#runs-table tr[data-run="pay-twice"] td:nth-child(2)`); strings.TrimSpace(st) != "running" {
		t.Fatalf("a healthy run's status in the list: %q", st)
	}
	// The counts above the list count the quarantined run as quarantined,
	// not under the status it had when the damage was found; so does the
	// list filtered by status.
	check(t, ctx, "the counts put the quarantined run apart",
		`document.querySelector('[data-count="running"]')?.textContent.trim() === "running 1" && document.querySelector('[data-count="quarantined"]')?.textContent.trim() === "quarantined 1"`)
	shot(t, ctx, shots, "runs-damage")
	run(t, ctx, "list the running runs",
		chromedp.Click(css(`[data-count="running"]`)),
		until(`location.search.includes("status=running") && document.querySelector('#runs-table tr[data-run="pay-twice"]') !== null`),
	)
	check(t, ctx, "the running runs are the healthy one", `document.querySelectorAll("#runs-table tbody tr[data-run]").length === 1`)
	run(t, ctx, "list the quarantined runs",
		chromedp.Click(css(`[data-count="quarantined"]`)),
		until(`location.search.includes("status=quarantined") && document.querySelector('#runs-table tr[data-run="broken-1"]') !== null`),
	)
	check(t, ctx, "the quarantined runs are the damaged one", `document.querySelectorAll("#runs-table tbody tr[data-run]").length === 1`)

	run(t, ctx, "open the run with a duplicate",
		chromedp.Navigate(srv.URL+"/runs/pay-twice"),
		until(`document.querySelector("#duplicates") !== null`),
		until(`document.querySelector("#timeline").textContent.includes("ActivityDuplicateDetected")`),
	)
	if c := textOf(t, ctx, "#duplicates"); !strings.Contains(c, "1 effect(s) of this run may have happened twice") {
		t.Fatalf("the duplicate callout: %q", c)
	}
	if e := textOf(t, ctx, "#effects"); !strings.Contains(e, "1 duplicate") {
		t.Fatalf("the run's effects do not flag the duplicate:\n%s", e)
	}

	run(t, ctx, "open the quarantined run",
		chromedp.Navigate(srv.URL+"/runs/broken-1"),
		until(`document.querySelector("#corrupt") !== null && document.querySelector("#stream-failure") !== null`),
	)
	if c := textOf(t, ctx, "#corrupt"); !strings.Contains(c, "Quarantined") || !strings.Contains(c, "event 1 fails its checksum") {
		t.Fatalf("the quarantine callout: %q", c)
	}
	if st := textOf(t, ctx, "#run-status"); strings.TrimSpace(st) != "quarantined" {
		t.Fatalf("the quarantined run's status badge: %q", st)
	}
	if s := textOf(t, ctx, "#summary"); !strings.Contains(s, "PayInvoice") || !strings.Contains(s, "Quarantined") {
		t.Fatalf("the quarantined run's summary is not shown:\n%s", s)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#actions button").length`)); err != nil || n != 0 {
		t.Fatalf("a quarantined run offers %d actions (every write to it is refused): %v", n, err)
	}
	shot(t, ctx, shots, "run-corrupt")

	// A run that does not exist: its stream is refused (404), which the
	// browser does not retry; the page says why instead of loading forever.
	quiet.Store(true) // the 404s are logged by the browser as errors
	run(t, ctx, "open a run that does not exist",
		chromedp.Navigate(srv.URL+"/runs/nobody"),
		until(`document.querySelector("#stream-failure") !== null`),
	)
	if c := textOf(t, ctx, "#stream-failure"); !strings.Contains(c, "not_found") || !strings.Contains(c, "nobody") {
		t.Fatalf("the page of a run that does not exist: %q", c)
	}
	if s := textOf(t, ctx, "#summary"); strings.Contains(s, "Loading") {
		t.Fatalf("the page of a run that does not exist still loads: %q", s)
	}

	// The quarantined run's conversation: its transcript cannot be read.
	run(t, ctx, "open the quarantined run's conversation",
		chromedp.Navigate(srv.URL+"/agent/broken-1"),
		until(`document.querySelector(".convo-head .callout") !== null`),
	)
	if c := textOf(t, ctx, ".convo-head .callout"); !strings.Contains(c, "data_corrupt") {
		t.Fatalf("the quarantined run's conversation: %q", c)
	}
}
