// Package browser tests the web UI end to end in a real browser: `cairn dev
// --demo` as a process, driven by Debian's headless Chromium through the
// DevTools protocol (chromedp). It lists runs, opens one and reads its
// history, resolves a paused effect and watches the run complete,
// terminates a run after the confirmation, and writes a screenshot of each
// page (CAIRN_UI_SCREENSHOTS=dir keeps them; docs/ui holds the committed
// ones).
//
// Without chromium on PATH (or CAIRN_CHROMIUM) the test skips, unless
// CAIRN_UI_BROWSER=required (as .ci/run sets it), when it fails.
package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/testkit"
)

func TestMain(m *testing.M) { testkit.Main(m, pgtest.Done) }

// chromium returns the browser's path, or skips (fails where it is
// required).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CAIRN_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CAIRN_UI_BROWSER") == "required" {
		t.Fatal("chromium is not installed and CAIRN_UI_BROWSER=required: apt-get install -y chromium")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); CI installs it and requires this test")
	return ""
}

// dev starts `cairn dev --demo` on free loopback ports and returns the
// UI's URL, the API's address, and a function that stops the server (the
// test's cleanup stops it too).
func dev(t *testing.T) (string, string, func()) {
	t.Helper()
	p := testkit.Start(t, testkit.Cmd{Path: testkit.Cairn(t), Name: "cairn dev", StdoutOnly: true,
		Args: []string{"dev", "--demo", "--json", "--listen", "127.0.0.1:0", "--ui-listen", "127.0.0.1:0"}})
	stop := func() { p.Terminate(15 * time.Second) } // SIGTERM: it removes its data directory
	t.Cleanup(stop)
	p.WaitLine(t.Context(), "}") // the end of the --json object it prints first
	var ready struct {
		UI      string `json:"ui"`
		Address string `json:"address"`
	}
	if err := json.Unmarshal([]byte(strings.Join(p.Lines(""), "\n")), &ready); err != nil || ready.UI == "" || ready.Address == "" {
		t.Fatalf("cairn dev did not say where its UI is: %+v %v", ready, err)
	}
	return strings.TrimSuffix(ready.UI, "/"), ready.Address, stop
}

func screenshotDir(t *testing.T) string {
	if d := os.Getenv("CAIRN_UI_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// shot saves the viewport as dir/name.png.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.scrollTo(0, 0), true`)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// step is one browser action.
type step = chromedp.Action[chromedp.Void]

// run runs browser actions, failing the test with what was being done.
func run(t *testing.T, ctx context.Context, what string, steps ...step) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: %v\n(at %s; the page says:)\n%s", what, err, loc, text)
	}
}

// textOf reads an element's text.
func textOf(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// until waits for a JavaScript condition on the page to hold (the page
// updates itself: polling and server-sent events).
func until(cond string) step {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			_, err := chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond))(ctx, tg)
			if err == nil || !contextReplaced(err) || ctx.Err() != nil {
				return chromedp.Void{}, err
			}
			// The page's JavaScript context was replaced under the poll (a
			// navigation landing while it ran, seen on a loaded machine):
			// poll again in the new one.
		}
	}
}

// contextReplaced reports whether err is the browser saying the execution
// context an evaluation ran in went away (the page navigated meanwhile).
func contextReplaced(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Cannot find context with specified id") ||
		strings.Contains(msg, "Execution context was destroyed")
}

func css(s string) chromedp.CSS { return chromedp.CSS(s) }

// check waits a few seconds for a JavaScript condition on the page and
// reports it, without stopping the test, when it does not hold.
func check(t *testing.T, ctx context.Context, what, cond string) {
	t.Helper()
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := chromedp.Do(cctx, until(cond)); err != nil {
		text, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		t.Errorf("%s: %v\n(the condition: %s; the page says:)\n%s", what, err, cond, text)
	}
}

// tabTo presses Tab until the focused element matches the JavaScript
// condition (on `el`, the focused element), as a keyboard user would, and
// fails after max presses; the element it lands on must show its focus.
func tabTo(cond string, max int) step {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for i := 0; i <= max; i++ {
			ok, err := chromedp.Evaluate[bool](`(() => { const el = document.activeElement; return !!el && !!(`+cond+`) })()`)(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			if ok {
				visible, err := chromedp.Evaluate[bool](`(() => { const s = getComputedStyle(document.activeElement); return s.outlineStyle !== "none" && parseFloat(s.outlineWidth) > 0 })()`)(ctx, tg)
				if err != nil {
					return chromedp.Void{}, err
				}
				if !visible {
					return chromedp.Void{}, fmt.Errorf("the focused element (%s) does not show its focus", cond)
				}
				return chromedp.Void{}, nil
			}
			if _, err := chromedp.KeyEvent(kb.Tab)(ctx, tg); err != nil {
				return chromedp.Void{}, err
			}
		}
		where, _ := chromedp.Evaluate[string](`document.activeElement ? document.activeElement.outerHTML.slice(0, 200) : "nothing"`)(ctx, tg)
		return chromedp.Void{}, fmt.Errorf("%d presses of Tab did not reach %s (focus is on %s)", max, cond, where)
	}
}

// keys types text into the focused element.
func keys(text string) step { return chromedp.KeyEvent(text) }

// js runs a script on the page.
func js(script string) step {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Evaluate[bool](script)(ctx, tg)
		return chromedp.Void{}, err
	}
}

// browse starts a headless Chromium for the test and returns its context
// (bounded to two minutes). Every error the page logs fails the test — a
// script error, a refused Content-Security-Policy, a failed request — until
// the returned flag is set (when failed requests are expected).
func browse(t *testing.T, exe string) (context.Context, *atomic.Bool) {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.DisableGPU,
		chromedp.NoSandbox, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1366, 768),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancel)
	run(t, ctx, "start the browser", chromedp.Navigate("about:blank"))
	var mu sync.Mutex
	var pageErrors []string
	quiet := new(atomic.Bool)
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if (m.Type == chromedp.ConsoleError || m.IsException()) && !quiet.Load() {
				mu.Lock()
				pageErrors = append(pageErrors, m.String())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { // runs before the cancels above
		mu.Lock()
		defer mu.Unlock()
		for _, e := range pageErrors {
			t.Errorf("the page logged an error: %s", e)
		}
	})
	return ctx, quiet
}

func TestWebUI(t *testing.T) {
	exe := chromium(t)
	base, apiAddr, stopServer := dev(t)
	shots := screenshotDir(t)

	ctx, serverStopped := browse(t, exe)

	// Runs: the demo's four runs, the paused one standing out, counts by status.
	run(t, ctx, "list the runs",
		chromedp.Navigate(base+"/runs"),
		until(`["invoice-INV-1", "invoice-INV-2", "invoice-INV-3", "invoice-INV-4"].every((id) => document.querySelector('#runs-table tr[data-run="' + id + '"]'))`),
		until(`document.querySelector('[data-count="paused"]') !== null`),
		until(`document.querySelector('#runs-table tr.paused[data-run="invoice-INV-2"]') !== null`),
		until(`document.querySelector('[data-count="failed"]') !== null && document.querySelector('[data-count="completed"]') !== null`),
	)
	shot(t, ctx, shots, "runs")
	// Filter by id prefix and status, through the form.
	run(t, ctx, "filter the runs",
		chromedp.SetValue(css("#f-prefix"), "invoice-INV-"),
		chromedp.SetValue(css("#f-status"), "failed"),
		chromedp.Click(css(`#filters button[type="submit"]`)),
		until(`location.search.includes("status=failed") && document.querySelectorAll("#runs-table tbody tr[data-run]").length === 1`),
		until(`document.querySelector('#runs-table tr[data-run="invoice-INV-3"]') !== null`),
	)

	// A run: open the completed one from the list, read its history.
	run(t, ctx, "open a run from the list",
		chromedp.Navigate(base+"/runs"),
		until(`document.querySelector('#runs-table tr[data-run="invoice-INV-1"] a') !== null`),
		chromedp.Click(css(`#runs-table tr[data-run="invoice-INV-1"] a`)),
		until(`location.pathname.startsWith("/runs/invoice-INV-1/")`),
		until(`document.querySelector("#timeline").dataset.complete === "1"`),
		until(`document.querySelector("#run-status").textContent.includes("completed")`),
	)
	// The run is closed and its page no longer hears from the server, but
	// its relative times stay current.
	before := textOf(t, ctx, "#summary time")
	tctx, tcancel := context.WithTimeout(ctx, 10*time.Second)
	if err := chromedp.Do(tctx, until(`document.querySelector("#summary time").textContent !== `+jsString(before))); err != nil {
		t.Fatalf("a closed run's page shows %q for its start and never updates it: %v", before, err)
	}
	tcancel()
	hist := textOf(t, ctx, "#timeline")
	for _, want := range []string{"WorkflowStarted", "ActivityScheduled", "SendPayment", "ActivityCompleted", "WorkflowCompleted", "attempt 1"} {
		if !strings.Contains(hist, want) {
			t.Fatalf("the history lacks %q:\n%s", want, hist)
		}
	}
	if io := textOf(t, ctx, "#io"); !strings.Contains(io, `"PaymentID": "pay_00`) || !strings.Contains(io, `"Invoice": "INV-1"`) {
		t.Fatalf("the result is not shown pretty-printed:\n%s", io)
	}
	if eff := textOf(t, ctx, "#effects"); !strings.Contains(eff, "SendPayment") || !strings.Contains(eff, "completed") {
		t.Fatalf("the run's effects are not shown:\n%s", eff)
	}
	run(t, ctx, "expand an event",
		chromedp.Click(css(`#timeline tr.ev[data-event="1"] button.toggle`)),
		until(`!document.querySelector('#timeline tr[data-detail="1"]').hidden`),
	)
	if ev := textOf(t, ctx, `#timeline tr[data-detail="1"] pre`); !strings.Contains(ev, `"workflowType": "PayInvoice"`) || !strings.Contains(ev, `"Vendor": "ACME"`) {
		t.Fatalf("the expanded event is not its pretty-printed JSON:\n%s", ev)
	}
	shot(t, ctx, shots, "run")
	run(t, ctx, "switch to dark", chromedp.KeyEvent("t"), until(`document.documentElement.dataset.theme === "dark"`))
	shot(t, ctx, shots, "run-dark")
	run(t, ctx, "switch back to light", chromedp.KeyEvent("t"), until(`document.documentElement.dataset.theme === "light"`))

	// Paused effects: resolve INV-2 as happened, and watch the run go on to completion.
	run(t, ctx, "open the paused effects",
		chromedp.Navigate(base+"/paused"),
		until(`document.querySelector('[data-card][data-wf="invoice-INV-2"] form[data-resolve]') !== null`),
	)
	check(t, ctx, "the payment awaiting approval has its card, with Approve and Reject",
		`(() => { const c = document.querySelector('[data-card][data-wf="pay-INV-9"][data-kind="approval"]'); return !!c && c.textContent.includes("SendPayment") &&
		  c.textContent.includes("SideEffect") && c.textContent.includes('"amount_usd": 4200') && !!c.querySelector('form[data-approve] button[name="reject"]') })()`)
	card := textOf(t, ctx, `[data-card][data-wf="invoice-INV-2"]`)
	for _, want := range []string{"SendPayment", `"Invoice": "INV-2"`, "did not answer within 30s", "Key"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the paused card lacks %q:\n%s", want, card)
		}
	}
	shot(t, ctx, shots, "paused")
	form := `[data-card][data-wf="invoice-INV-2"] form[data-resolve]`
	inForm := `el.closest('` + form + `')`
	// By keyboard alone: Tab to the form, Space picks "It happened", Tab on
	// through its fields, Enter submits.
	run(t, ctx, "resolve the paused effect with the keyboard",
		js(`(document.activeElement?.blur(), document.body.focus(), true)`),
		tabTo(inForm+` && el.value === "happened"`, 80),
		keys(" "),
		until(`document.querySelector('`+form+` input[value="happened"]').checked && !document.querySelector('`+form+` .result-field').hidden`),
		tabTo(inForm+` && el.name === "result"`, 5),
		keys(`{"PaymentID":"pay_002","Invoice":"INV-2","Vendor":"Globex","Amount":4200}`),
		tabTo(inForm+` && el.name === "reason"`, 3),
		keys("pay_002 is in the provider's dashboard"),
		tabTo(inForm+` && el.name === "by"`, 3),
		keys("Ada"),
		keys(kb.Enter),
		until(`document.querySelector('`+form+` .outcome').textContent.includes("Resolved")`),
		until(`document.querySelector('[data-card][data-wf="invoice-INV-2"] .after').textContent.includes("completed")`),
	)
	check(t, ctx, "the resolved card's header says what the run is now, not paused",
		`(() => { const h = document.querySelector('[data-card][data-wf="invoice-INV-2"] .head')?.textContent || ""; return h.includes("completed") && !h.includes("paused") })()`)
	shot(t, ctx, shots, "paused-resolved")
	run(t, ctx, "open the resolved run",
		chromedp.Click(css(`[data-card][data-wf="invoice-INV-2"] .after a`)),
		until(`document.querySelector("#timeline").dataset.complete === "1"`),
	)
	hist = textOf(t, ctx, "#timeline")
	if !strings.Contains(hist, "ActivityResolved") || !strings.Contains(hist, "happened by Ada (web UI)") || !strings.Contains(hist, "WorkflowCompleted") {
		t.Fatalf("the resolved run's history:\n%s", hist)
	}

	// The accounts-payable agent's payment awaits approval: its
	// conversation page says so, with the tool's effect class, and rejects
	// it — the tool does not run, and the model is told why.
	run(t, ctx, "open the conversation of the payment awaiting approval",
		chromedp.Navigate(base+"/agent/pay-INV-9"),
		js(`(window.payCard = () => [...document.querySelectorAll("[data-convo] [data-tool-call]")].find((c) => c.textContent.includes("SendPayment")), true)`),
		until(`document.querySelector('#awaiting-approval form[data-approve]') !== null`),
		until(`(payCard()?.querySelector("[data-effect]")?.textContent || "") === "SideEffect"`),
	)
	shot(t, ctx, shots, "agent-approval")
	aform := `#awaiting-approval form[data-approve]`
	run(t, ctx, "reject the payment from the conversation",
		chromedp.SendKeys(css(aform+` input[name="reason"]`), "INV-9 was paid by wire"),
		chromedp.SetValue(css(aform+` input[name="by"]`), "Ada"),
		chromedp.Click(css(aform+` button[name="reject"]`)),
		until(`(document.querySelector("dialog[open]")?.textContent || "").includes("Reject SendPayment?")`),
		chromedp.Click(css(`dialog[open] #confirm-ok`)),
		until(`(document.querySelector("[data-convo] .approvals")?.textContent || "").includes("Rejected SendPayment")`),
		until(`document.querySelector('[data-convo]').dataset.complete === "1"`),
	)
	check(t, ctx, "the rejected call's card says so, and what the model was told",
		`(() => { const c = payCard()?.textContent || ""; return c.includes("rejected by Ada (web UI)") &&
		  c.includes("rejected by Ada (web UI): INV-9 was paid by wire. The tool did not run.") })()`)

	// A run paused on its budget: its page says so and offers the budget
	// form; raising the model calls lets the held call go on, live.
	run(t, ctx, "open the run paused on its budget",
		chromedp.Navigate(base+"/runs/assistant-INV-8"),
		until(`document.querySelector('#pause form[data-budget]') !== null`),
		until(`document.querySelector("#run-status").textContent.includes("paused")`),
	)
	if p := textOf(t, ctx, "#pause"); !strings.Contains(p, "budget is used up") || !strings.Contains(p, "turn budget exhausted") {
		t.Fatalf("the budget pause is not explained:\n%s", p)
	}
	check(t, ctx, "the budget form shows the current limits",
		`(() => { const f = document.querySelector("#pause form[data-budget]"); if (!f) return false; const c = (k) => f.querySelector('[data-current="' + k + '"]')?.textContent || "";
		  return c("maxTurns").includes("1") && c("maxTokens").includes("no limit") && c("maxCostUSD").includes("no limit") && f.querySelector('input[name="maxTurns"]')?.placeholder === "1" })()`)
	check(t, ctx, "the held call's BudgetExceeded has its reason in the timeline",
		`[...document.querySelectorAll("#timeline tr.ev")].some((tr) => tr.querySelector(".type").textContent === "BudgetExceeded" && tr.children[6].textContent.includes("turn budget exhausted"))`)
	check(t, ctx, "the BudgetUpdated of the agent loop shows its budget in the timeline",
		`[...document.querySelectorAll("#timeline tr.ev")].some((tr) => tr.querySelector(".type").textContent === "BudgetUpdated" && tr.children[6].textContent.includes('{"maxTurns":1} by workflow'))`)
	shot(t, ctx, shots, "run-budget")
	input := textOf(t, ctx, "#io pre") // the run's input as the page shows it: a budget of one model call
	bform := `#pause form[data-budget]`
	run(t, ctx, "raise the budget",
		chromedp.SendKeys(css(bform+` input[name="maxTurns"]`), "4"),
		chromedp.SendKeys(css(bform+` input[name="reason"]`), "worth finishing"),
		chromedp.SetValue(css(bform+` input[name="by"]`), "Ada"),
		chromedp.Click(css(bform+` button[name="raise"]`)),
		until(`document.querySelector("#run-status").textContent.includes("completed")`),
		until(`document.querySelector("#timeline").textContent.includes("BudgetUpdated")`),
		until(`document.querySelector("#pause").textContent === ""`),
	)
	check(t, ctx, "the raise's BudgetUpdated says what was raised, by whom and why",
		`[...document.querySelectorAll("#timeline tr.ev")].some((tr) => tr.querySelector(".type").textContent === "BudgetUpdated" && tr.children[6].textContent.includes('{"maxTurns":4} by Ada (web UI): worth finishing'))`)
	if io := textOf(t, ctx, "#io"); !strings.Contains(io, "INV-8 is $980 to Hooli") {
		t.Fatalf("the run did not go on to its answer after the raise:\n%s", io)
	}
	pasteBack(t, ctx, base, apiAddr, input)

	// Task queues: the queue nobody polls is visibly stuck.
	run(t, ctx, "open the task queues",
		chromedp.Navigate(base+"/queues"),
		until(`document.querySelector('[data-queue="accounts-payable-eu"] [data-stuck]') !== null`),
		until(`document.querySelector('[data-queue="accounts-payable"]')?.textContent.includes("cairn-dev-demo-worker")`),
	)
	shot(t, ctx, shots, "queues")

	// The cluster: a server alone on the embedded store says so, in one line.
	run(t, ctx, "open the cluster page from the navigation",
		chromedp.Click(css(`nav a[data-nav="cluster"]`)),
		until(`location.pathname === "/cluster" && document.querySelector("#cluster-alone") !== null`),
		until(`document.querySelector('nav a[data-nav="cluster"]').getAttribute("aria-current") === "page"`),
	)
	if s := strings.TrimSpace(textOf(t, ctx, "#cluster")); s != "One server on the embedded store; cairn server --store postgres://… to share a database." {
		t.Fatalf("the cluster page of a server on the embedded store says:\n%s", s)
	}

	// Effects ledger: search by workflow id.
	run(t, ctx, "search the ledger",
		chromedp.Navigate(base+"/effects"),
		until(`document.querySelectorAll("#ledger-table tbody tr[data-href]").length >= 2`),
	)
	check(t, ctx, "every ledger entry links the runs that scheduled it",
		`[...document.querySelectorAll("#ledger-table tbody tr[data-href]")].every((tr) => tr.children[6]?.querySelector("a[href^='/runs/']"))`)
	shot(t, ctx, shots, "effects")
	run(t, ctx, "search the ledger by workflow id",
		chromedp.SetValue(css("#e-id"), "invoice-INV-2"),
		chromedp.Click(css(`#effects-filter button[type="submit"]`)),
		until(`document.querySelectorAll("#ledger-table tbody tr[data-href]").length === 1`),
	)

	// The agent's conversation: watch the assistant's second run answer a
	// question sent from another tab, live.
	run(t, ctx, "open the conversation",
		chromedp.Navigate(base+"/agent/assistant-INV-5"),
		until(`document.querySelector('[data-convo]')?.dataset.status === "running"`),
	)
	second := textOf(t, ctx, "[data-convo] .convo-head")
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	run(t, tab, "ask the assistant from the run page",
		chromedp.Navigate(base+"/runs/assistant-INV-5"),
		until(`document.querySelector('#actions button[data-act="signal"]') !== null`),
		chromedp.Click(css(`#actions button[data-act="signal"]`)),
		until(`document.querySelector("dialog[open] #confirm-ok") !== null`),
		chromedp.SendKeys(css(`dialog[open] input[name="name"]`), "ask"),
		chromedp.SendKeys(css(`dialog[open] textarea[name="input"]`), `"Can we pay INV-7?"`),
		chromedp.Click(css(`dialog[open] #confirm-ok`)),
	)
	// A screenshot while the answer streams, if the page is caught at it.
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	if chromedp.Do(sctx, until(`(document.querySelector(".msg.streaming .text")?.textContent || "").length > 12`)) == nil {
		shot(t, ctx, shots, "agent-streaming")
	}
	scancel()
	run(t, ctx, "watch the answer arrive",
		until(`document.querySelector('[data-convo]').dataset.complete === "1"`),
		until(`document.querySelector('[data-convo] .chat').textContent.includes("INV-7 is $25,000 to Hooli")`),
	)
	deltas, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-convo]').dataset.deltas || "0"`))
	if err != nil || deltas == "" || deltas == "0" || deltas == "1" {
		t.Fatalf("the answer did not stream (%s stream events reached the page): %v", deltas, err)
	}
	convo := textOf(t, ctx, "[data-convo]")
	for _, want := range []string{"system", "Can we pay INV-7?", "lookup_invoice", `"invoice": "INV-7"`, "completed", "fake-gpt-mini", "tokens", "$0.0000"} {
		if !strings.Contains(strings.ToLower(convo), strings.ToLower(want)) { // roles are shown in capitals
			t.Fatalf("the conversation lacks %q (before: %s):\n%s", want, second, convo)
		}
	}
	// One card per tool call, with its arguments, state, effect class and
	// result: neither the arguments nor the result shown twice.
	check(t, ctx, "the conversation shows each tool call once, as one card",
		`(() => { const chat = document.querySelector("[data-convo] .chat"); if (!chat) return false; const txt = chat.textContent, n = (s) => txt.split(s).length - 1;
		  const cards = chat.querySelectorAll("[data-tool-call]"); if (cards.length !== 1) return false;
		  const c = cards[0].textContent;
		  return n('"invoice": "INV-7"') === 1 && n('"id": "INV-7"') === 1 && c.includes('"invoice": "INV-7"') && c.includes('"id": "INV-7"') && c.includes("completed") && c.includes("Read") })()`)
	if strings.Contains(strings.ToLower(textOf(t, ctx, "[data-convo] .chat")), "lookup_invoice\nscheduled") {
		t.Fatalf("the finished tool call is still shown as scheduled:\n%s", convo)
	}
	shot(t, ctx, shots, "agent")
	// Two runs of the workflow id side by side.
	run(t, ctx, "compare the two runs",
		until(`document.querySelector("#compare") !== null && document.querySelector("#compare").options.length === 2`),
		js(`(() => { const s = document.querySelector("#compare"); s.selectedIndex = 1; s.dispatchEvent(new Event("change")); return true })()`),
		until(`document.querySelectorAll("[data-convo]").length === 2`),
		until(`[...document.querySelectorAll("[data-convo]")].every((c) => c.dataset.complete === "1")`),
		until(`document.querySelectorAll("[data-convo]")[1].textContent.includes("INV-5 is $980 to Hooli")`),
	)
	shot(t, ctx, shots, "agent-side-by-side")

	// Terminate the stuck run, through the confirmation.
	run(t, ctx, "terminate a run",
		chromedp.Navigate(base+"/runs/invoice-INV-4"),
		until(`document.querySelector('#actions button[data-act="terminate"]') !== null`),
		until(`document.querySelector("#summary").textContent.includes("stuck")`),
		chromedp.Click(css(`#actions button[data-act="terminate"]`)),
		until(`document.querySelector("dialog[open] #confirm-ok") !== null`),
	)
	shot(t, ctx, shots, "terminate-confirm")
	run(t, ctx, "confirm the termination",
		chromedp.SendKeys(css(`dialog[open] input[name="reason"]`), "nobody serves the EU queue"),
		chromedp.Click(css(`dialog[open] #confirm-ok`)),
		until(`document.querySelector("#run-status").textContent.includes("terminated")`),
		until(`document.querySelector("#timeline").textContent.includes("nobody serves the EU queue")`),
	)

	// The server goes away: every page says it is not updating.
	run(t, ctx, "open the task queues again", chromedp.Navigate(base+"/queues"), until(`document.querySelector("[data-queue]") !== null`))
	serverStopped.Store(true)
	stopServer()
	run(t, ctx, "see that the server is down",
		until(`!document.querySelector("#offline").hidden && document.querySelector("#live").classList.contains("off")`))
	if b := textOf(t, ctx, "#offline"); !strings.Contains(b, "The server does not answer") {
		t.Fatalf("the banner: %q", b)
	}
}

// pasteBack starts a run with the input a run page showed (the assistant
// paused on its budget of one model call), as a person copying it into
// `cairn workflow start --input` would: the new run has the same budget,
// so it pauses on it too, instead of running without one.
func pasteBack(t *testing.T, ctx context.Context, base, apiAddr, input string) {
	t.Helper()
	if !strings.Contains(input, "Budget") {
		t.Fatalf("the run page does not show the input's budget:\n%s", input)
	}
	out, err := exec.Command(testkit.Cairn(t), "workflow", "start", "--address", apiAddr, "--type", "Assistant", "--id", "assistant-INV-8-pasted",
		"--task-queue", "accounts-payable", "--input", input).CombinedOutput()
	if err != nil {
		t.Fatalf("start a run with the input shown (%s): %v\n%s", input, err, out)
	}
	run(t, ctx, "open the run started with the input shown",
		chromedp.Navigate(base+"/runs/assistant-INV-8-pasted"),
		until(`["paused", "completed", "failed"].some((s) => (document.querySelector("#run-status")?.textContent || "").includes(s))`),
	)
	if st := textOf(t, ctx, "#run-status"); !strings.Contains(st, "paused") {
		t.Fatalf("the run started with the input shown is %q, not paused on its budget of one model call: the budget was dropped\n%s", st, input)
	}
	check(t, ctx, "the run started with the input shown has its budget",
		`document.querySelector('#pause form[data-budget] [data-current="maxTurns"]')?.textContent.includes("now: 1")`)
}

// jsString quotes s for a script.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
