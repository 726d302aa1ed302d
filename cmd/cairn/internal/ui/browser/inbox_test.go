package browser

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/internal/testkit"
)

// The approval inbox, with real processes: `cairn server` with its web UI,
// the accounts-payable agent's worker (examples/agent: demo/payables and
// its scripted model) and the CLI that starts a run. The agent's payment
// waits for a person; a person finds it from the runs list (the "awaiting
// approval" filter), opens the run, sees what the payment would do and its
// effect class, approves it there after the confirmation, and the run goes
// on: the vendor is charged exactly once.
func TestApprovalInbox(t *testing.T) {
	exe := chromium(t)
	ctx := t.Context()
	srv := testkit.StartServer(ctx, t, testkit.ServerOptions{UI: true})
	vendor := t.TempDir() // the fake payment provider's ledger, and the tools' log
	w := testkit.Start(t, testkit.Cmd{Path: testkit.Build(t, "./examples/agent"), Name: "agent worker",
		Args: []string{"run", "--address", srv.Addr}, Env: []string{"PAYABLES_DIR=" + vendor}})
	w.WaitLog(ctx, "worker started")
	if out, err := testkit.CLI(ctx, t, srv.Addr, "workflow", "start", "--type", "PayInvoiceAgent", "--id", "pay-INV-9",
		"--task-queue", "payables", "--input", `{"InvoiceID":"INV-9"}`); err != nil {
		t.Fatalf("start: %v\n%s", err, out.Combined)
	}
	shots := screenshotDir(t)
	bctx, _ := browse(t, exe)
	base := strings.TrimSuffix(srv.UI, "/")

	run(t, bctx, "find the run awaiting approval from the runs list",
		chromedp.Navigate(base+"/runs"),
		until(`document.querySelector('#counts [data-count="awaiting_approval"]') !== null`),
		until(`!document.querySelector("#approval-count").hidden && document.querySelector("#approval-count").textContent.includes("1 to approve")`),
		chromedp.Click(css(`#counts [data-count="awaiting_approval"]`)),
		until(`location.search.includes("status=awaiting_approval")`),
		until(`document.querySelector('#runs-table tr[data-run="pay-INV-9"] [data-waits="approval"]') !== null`),
	)
	if row := textOf(t, bctx, `#runs-table tr[data-run="pay-INV-9"]`); !strings.Contains(row, "waits for a person: approval of SendPayment (SideEffect)") {
		t.Fatalf("the run's row does not say what it waits for:\n%s", row)
	}
	shot(t, bctx, shots, "runs-approval")
	run(t, bctx, "open the run",
		chromedp.Click(css(`#runs-table tr[data-run="pay-INV-9"] a`)),
		until(`document.querySelector('#approvals form[data-approve]') !== null`),
	)
	a := textOf(t, bctx, "#approvals")
	for _, want := range []string{"a tool call waits for your approval", "SendPayment", "SideEffect", `"invoice_id": "INV-9"`, `"amount_usd": 4200`, "signal approve"} {
		if !strings.Contains(a, want) {
			t.Fatalf("the run page's approval lacks %q:\n%s", want, a)
		}
	}
	if n := payments(t, vendor); n != 0 {
		t.Fatalf("the vendor was charged %d times before the approval", n)
	}
	shot(t, bctx, shots, "run-approval")

	form := `#approvals form[data-approve]`
	run(t, bctx, "approve the payment",
		chromedp.SendKeys(css(form+` input[name="reason"]`), "INV-9 matches the purchase order"),
		chromedp.SetValue(css(form+` input[name="by"]`), "Ada"),
		chromedp.Click(css(form+` button[name="approve"]`)),
		until(`document.querySelector("dialog[open] #confirm-ok") !== null`),
	)
	if d := textOf(t, bctx, "dialog[open]"); !strings.Contains(d, "Approve SendPayment?") || !strings.Contains(d, "runs once you approve it") {
		t.Fatalf("the confirmation: %s", d)
	}
	run(t, bctx, "confirm, and watch the run go on",
		chromedp.Click(css(`dialog[open] #confirm-ok`)),
		until(`(document.querySelector("#pause")?.textContent || "").includes("Approved SendPayment: the agent goes on")`),
		until(`document.querySelector("#run-status").textContent.includes("completed")`),
		until(`[...document.querySelectorAll("#timeline tr.ev")].some((tr) => tr.children[6].textContent.includes("approved by Ada (web UI): INV-9 matches the purchase order"))`),
	)
	if n := payments(t, vendor); n != 1 {
		t.Fatalf("the vendor was charged %d times, want once", n)
	}
	calls, err := os.ReadFile(filepath.Join(vendor, "calls.log"))
	if err != nil || strings.Count(string(calls), "SendPayment ") != 1 {
		t.Fatalf("SendPayment ran %d times, want once (%v):\n%s", strings.Count(string(calls), "SendPayment "), err, calls)
	}
	check(t, bctx, "the inbox is empty once approved", `document.querySelector("#approval-count").hidden`)
}

// payments counts the charges the fake payment provider recorded.
func payments(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "payments.jsonl"))
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
