package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/internal/testkit"
)

// TestAgentDemo runs `cairn demo agent`: a model-driven agent, its worker
// killed with SIGKILL mid-turn, resumed by a fresh process with no model
// call and no tool call repeated (the demo counts both and fails
// otherwise).
func TestAgentDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	res, err := testkit.Run(ctx, testkit.Cmd{Path: testkit.Cairn(t), Args: []string{"demo", "agent"}})
	out := res.Combined
	if err != nil {
		t.Fatalf("cairn demo agent: %v\n%s", err, out)
	}
	for _, want := range []string{
		"killed with SIGKILL, mid-turn (3 model calls and 2 tool calls so far)",
		"model calls: 5 for 5 turns (3 before the kill, 2 after: none repeated)",
		"tools run:   ReadInvoice 1, CheckBudget 1, SendPayment 1, EmailVendor 1",
		"provider:    1 payment, 1 e-mail",
		"no model call and no tool call was made twice",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the demo does not say %q:\n%s", want, out)
		}
	}
}

// TestAgentExampleExportAndReplay runs the example agent's worker
// (examples/agent, with its own fake model) against `cairn server`, drives
// the run through the CLI (start, watch, approve), then exports its
// history with and without its chunks and replays both files, with
// `cairn replay` and with the example's own replay command.
func TestAgentExampleExportAndReplay(t *testing.T) {
	dir := t.TempDir()
	addr := server(t, filepath.Join(dir, "data"), "").Addr
	exampleWorker(t, agent(t), addr, "PAYABLES_DIR="+dir)
	mustCLI(t, addr, "workflow", "start", "--type", "PayInvoiceAgent", "--id", "pay-INV-9", "--task-queue", "payables",
		"--input", `{"InvoiceID":"INV-9","Stream":true}`)
	// The payment waits for approval: the transcript says so.
	deadline := time.Now().Add(60 * time.Second)
	for { // each describe is a process and a round trip, not a sleep
		out := mustCLI(t, addr, "workflow", "describe", "pay-INV-9")
		if strings.Contains(out, "Usage") && strings.Contains(out, "3 model calls") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent did not reach the approval:\n%s", out)
		}
	}
	mustCLI(t, addr, "workflow", "signal", "pay-INV-9", "--name", "approve", "--input", `{"Approved":true,"By":"ap-clerk"}`)
	res := mustCLI(t, addr, "workflow", "result", "pay-INV-9", "--json")
	var v map[string]any
	if err := json.Unmarshal([]byte(res), &v); err != nil || !strings.Contains(res, "Paid $4,200 to ACME") {
		t.Fatalf("result %s (%v)", res, err)
	}
	// The stream of a closed run ends; what it still holds prints.
	mustCLI(t, addr, "workflow", "watch", "pay-INV-9")
	plain, inline := filepath.Join(dir, "plain.json"), filepath.Join(dir, "inline.json")
	mustCLI(t, addr, "history", "export", "pay-INV-9", "-o", plain)
	mustCLI(t, addr, "history", "export", "pay-INV-9", "--inline", "-o", inline)
	pb, _ := os.ReadFile(plain)
	ib, _ := os.ReadFile(inline)
	if strings.Contains(string(pb), `"chunks"`) || !strings.Contains(string(ib), `"chunks"`) {
		t.Fatal("the plain export carries chunks, or the inline one does not")
	}
	// The self-contained file replays alone; the other reads its chunks
	// from the server, and without one says what it lacks.
	for _, args := range [][]string{{"--history", inline}, {"--history", plain, "--address", addr}} {
		if out, err := exec.Command(testkit.Cairn(t), append([]string{"replay"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("cairn replay %v: %v\n%s", args, err, out)
		}
		if out, err := exec.Command(agent(t), append([]string{"replay"}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("agent replay %v: %v\n%s", args, err, out)
		}
	}
	if out, err := exec.Command(testkit.Cairn(t), "replay", "--history", plain).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "--inline") {
		t.Fatalf("a plain export replayed without its chunks: %v\n%s", err, out)
	}
	calls, _ := os.ReadFile(filepath.Join(dir, "calls.log"))
	if n := strings.Count(string(calls), "\n"); n != 4 {
		t.Fatalf("tools ran %d times, want 4:\n%s", n, calls)
	}
}
