package browser

import (
	"context"
	"strings"
	"testing"

	"net/http/httptest"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// TestWebUIResetsAndPerformsHeldEffects: a person resets a completed run
// from its page (the new run opens, linked to its base, its payment
// answered from the ledger), and performs an effect a fork held.
func TestWebUIResetsAndPerformsHeldEffects(t *testing.T) {
	exe := chromium(t)
	eng := memEngine(t)
	ctx := context.Background()
	w := &scripted{t: t, eng: eng}
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "pay-1", WorkflowType: "Pay", TaskQueue: "q"}); err != nil {
		t.Fatal(err)
	}
	w.decide(pay("1", "INV-9"))
	w.activity(`{"charge":"ch_1"}`)
	w.decide(api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: jsonPayload(`"done"`)}})
	srv := httptest.NewServer(ui.New(eng, ui.Options{}))
	t.Cleanup(srv.Close)
	bctx, _ := browse(t, exe)
	run(t, bctx, "reset the run from its page",
		chromedp.Navigate(srv.URL+"/runs/pay-1"),
		until(`document.querySelector("button[data-act=reset]") !== null`),
		chromedp.Click(css(`button[data-act=reset]`)),
		until(`document.querySelector("dialog #f-reason") !== null`),
		chromedp.SetValue(css(`#f-eventId`), "2"),
		chromedp.SetValue(css(`#f-reason`), "try the new prompt"),
		chromedp.SetValue(css(`#f-by`), "ann"),
		chromedp.Click(css(`#confirm-ok`)),
		until(`document.querySelector("#base-run") !== null`),
	)
	shot(t, bctx, screenshotDir(t), "reset")
	if b := textOf(t, bctx, "#base-run"); !strings.Contains(b, "up to event 2") {
		t.Fatalf("the new run's page says %q", b)
	}
	d, err := eng.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "pay-1"})
	if err != nil || d.Info.Base == nil || d.Info.Base.AtEventID != 2 || d.Info.Status != api.StatusRunning {
		t.Fatalf("after the reset: %+v %v", d, err)
	}
	w.decide(pay("1", "INV-9")) // answered from the ledger
	w.decide(api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: jsonPayload(`"again"`)}})

	if _, err := eng.ForkWorkflow(ctx, &api.ForkWorkflowRequest{WorkflowID: "pay-1", RunID: d.Info.Base.RunID, AtEventID: 2,
		NewWorkflowID: "pay-f"}); err != nil {
		t.Fatal(err)
	}
	w.decide(pay("1", "INV-10")) // never performed by the base: held
	run(t, bctx, "perform the held payment",
		chromedp.Navigate(srv.URL+"/runs/pay-f"),
		until(`document.querySelector("form[data-resolve] input[value=perform]") !== null`),
		chromedp.Click(css(`form[data-resolve] input[value=perform]`)),
		chromedp.SetValue(css(`form[data-resolve] input[name=reason]`), "approved"),
		chromedp.Click(css(`form[data-resolve] button[type=submit]`)),
		until(`(document.querySelector("#timeline")?.textContent || "").includes("perform by ann")`),
	)
	a := w.activity(`{"charge":"ch_2"}`)
	if a.ActivityType != "Pay" || a.WorkflowID != "pay-f" {
		t.Fatalf("performed %s of %s", a.ActivityType, a.WorkflowID)
	}
}

func pay(id, inv string) api.Command {
	return api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: id, ActivityType: "Pay",
		Input: jsonPayload(`{"invoice":"` + inv + `"}`), Effect: history.SideEffect}}
}

// scripted acts as a worker on queue q.
type scripted struct {
	t   *testing.T
	eng interface {
		api.Service
	}
}

func (s *scripted) decide(cmds ...api.Command) {
	s.t.Helper()
	ctx := context.Background()
	r, err := s.eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || r.Task == nil {
		s.t.Fatalf("poll: %+v %v", r, err)
	}
	if _, err := s.eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: r.Task.TaskToken, Identity: "w", Commands: cmds}); err != nil {
		s.t.Fatal(err)
	}
}

func (s *scripted) activity(result string) *api.ActivityTask {
	s.t.Helper()
	ctx := context.Background()
	r, err := s.eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "q", Identity: "w"})
	if err != nil || r.Task == nil {
		s.t.Fatalf("poll activity: %+v %v", r, err)
	}
	if _, err := s.eng.CompleteActivity(ctx, &api.CompleteActivityRequest{TaskToken: r.Task.TaskToken, Result: jsonPayload(result)}); err != nil {
		s.t.Fatal(err)
	}
	return r.Task
}
