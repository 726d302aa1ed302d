package browser

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/internal/testkit"
)

// The Schedules page against a real `cairn server`: a schedule created
// with the CLI is listed with its spec and next action; its page shows the
// next five nominal times; Trigger now starts a run that appears among the
// recent actions, linked to its run; Pause asks for a note and the page
// shows the schedule paused with it, with no next action; Unpause brings
// them back.
func TestSchedulesPage(t *testing.T) {
	exe := chromium(t)
	ctx := t.Context()
	srv := testkit.StartServer(ctx, t, testkit.ServerOptions{UI: true})
	if out, err := testkit.CLI(ctx, t, srv.Addr, "schedule", "create", "--id", "nightly-report", "--cron", "30 2 * * *",
		"--time-zone", "America/New_York", "--type", "Report", "--task-queue", "reports", "--overlap", "buffer-one"); err != nil {
		t.Fatalf("create: %v\n%s", err, out.Combined)
	}
	shots := screenshotDir(t)
	bctx, _ := browse(t, exe)
	base := strings.TrimSuffix(srv.UI, "/")

	run(t, bctx, "see the schedule listed",
		chromedp.Navigate(base+"/schedules"),
		until(`document.querySelector('#schedules-table tr[data-schedule="nightly-report"]') !== null`),
	)
	row := textOf(t, bctx, `#schedules-table tr[data-schedule="nightly-report"]`)
	for _, want := range []string{"30 2 * * *", "America/New_York", "Report", "active", "none yet"} {
		if !strings.Contains(row, want) {
			t.Errorf("the row lacks %q: %s", want, row)
		}
	}
	shot(t, bctx, shots, "schedules")

	run(t, bctx, "open it: five next times, no action yet",
		chromedp.Click(css(`#schedules-table tr[data-schedule="nightly-report"] a`)),
		until(`document.querySelectorAll("#next-actions li").length === 5`),
		until(`document.querySelector("#recent-actions").textContent.includes("No action yet")`),
	)
	if s := textOf(t, bctx, "#schedule"); !strings.Contains(s, "buffer-one") || !strings.Contains(s, "reports") {
		t.Errorf("the schedule's page: %s", s)
	}

	run(t, bctx, "trigger an action now",
		chromedp.Click(css(`#sched-trigger`)),
		until(`[...document.querySelectorAll("#recent-actions tbody tr")].some((tr) => tr.textContent.includes("trigger") && tr.querySelector('a[href^="/runs/nightly-report-"]'))`),
	)

	run(t, bctx, "pause it with a note",
		chromedp.Click(css(`#sched-pause`)),
		until(`document.querySelector("dialog[open] #confirm-ok") !== null`),
		chromedp.SendKeys(css(`dialog[open] input[name="note"]`), "month-end freeze"),
		chromedp.Click(css(`dialog[open] #confirm-ok`)),
		until(`document.querySelector('#sched-state [data-state="paused"]')?.textContent.includes("month-end freeze")`),
		until(`document.querySelectorAll("#next-actions li").length === 0`),
	)
	shot(t, bctx, shots, "schedule")

	run(t, bctx, "unpause it",
		chromedp.Click(css(`#sched-pause`)),
		until(`document.querySelector("dialog[open] #confirm-ok") !== null`),
		chromedp.Click(css(`dialog[open] #confirm-ok`)),
		until(`document.querySelector('#sched-state [data-state="active"]') !== null`),
		until(`document.querySelectorAll("#next-actions li").length === 5`),
	)
}
