// Package e2e runs Cairn the way people do: `cairn server` as a process,
// worker processes connected over HTTP, and the CLI — with SIGKILL where
// a process dies.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/worker"
	"github.com/cairnflow/cairn/worker/workercli"
)

// TestMain runs the tests or, when re-executed as a worker process, the
// test worker.
func TestMain(m *testing.M) {
	if os.Getenv("CAIRN_E2E_WORKER") == "1" {
		os.Exit(workercli.Main(registerTestWorker, workercli.Options{Name: "e2e-worker", TaskQueue: "e2e"}))
	}
	testkit.Main(m)
}

// hello and agent are the example workers' binaries.
func hello(t *testing.T) string { return testkit.Build(t, "./examples/hello") }
func agent(t *testing.T) string { return testkit.Build(t, "./examples/agent") }

// Slow is the test worker's workflow: one activity that announces itself on
// stdout and, in the process told to, hangs until killed.
func Slow(ctx sdk.Context, n int) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: 2 * time.Second,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: 100 * time.Millisecond}})
	return sdk.ExecuteActivity(ctx, Work, n).Get(ctx)
}

// Work prints "working <attempt>" and hangs when CAIRN_E2E_HANG is set.
func Work(ctx context.Context, n int) (string, error) {
	info := activities.GetInfo(ctx)
	fmt.Printf("working %d\n", info.Attempt)
	if os.Getenv("CAIRN_E2E_HANG") == "1" {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return fmt.Sprintf("done %d by pid %d", n, os.Getpid()), nil
}

// Pay calls a side-effecting tool whose outcome is unknown: the run pauses.
func Pay(ctx sdk.Context, invoice string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Transfer, invoice).Get(ctx)
}

// Transfer cannot tell whether the transfer went through.
func Transfer(_ context.Context, invoice string) (string, error) {
	return "", activities.ErrOutcomeUnknown
}

func registerTestWorker(r worker.Registrar) error {
	if err := r.RegisterWorkflow(Slow); err != nil {
		return err
	}
	if err := r.RegisterWorkflow(Pay); err != nil {
		return err
	}
	if err := r.RegisterActivity(Transfer, activities.Options{Effect: activities.SideEffect}); err != nil {
		return err
	}
	return r.RegisterActivity(Work)
}

// testWorker starts this test binary as a worker process (TestMain's
// worker mode) connected to addr, with extra environment, and waits until
// it polls.
func testWorker(t *testing.T, addr string, env ...string) *testkit.Proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exampleWorker(t, self, addr, append([]string{"CAIRN_E2E_WORKER=1"}, env...)...)
}

// exampleWorker starts a worker binary connected to addr and waits until
// it polls.
func exampleWorker(t *testing.T, bin, addr string, env ...string) *testkit.Proc {
	t.Helper()
	p := testkit.Start(t, testkit.Cmd{Path: bin, Args: []string{"run", "--address", addr}, Env: env})
	p.WaitLog(t.Context(), "worker started")
	return p
}

// server starts `cairn server` on data, at listen ("": a port it picks),
// with its web UI on a free port, and waits until it is ready.
func server(t *testing.T, data, listen string, extra ...string) *testkit.Server {
	t.Helper()
	return testkit.StartServer(t.Context(), t, testkit.ServerOptions{Data: data, Listen: listen, UI: true, Args: extra})
}

// cli runs the CLI against addr ("": none, the offline commands) and
// returns its output and exit code.
func cli(t *testing.T, addr string, args ...string) (string, int) {
	t.Helper()
	out, err := testkit.CLI(t.Context(), t, addr, args...)
	if out.Code < 0 {
		t.Fatalf("cairn %v: %v", args, err)
	}
	return out.Combined, out.Code
}

func mustCLI(t *testing.T, addr string, args ...string) string {
	t.Helper()
	out, code := cli(t, addr, args...)
	if code != 0 {
		t.Fatalf("cairn %s: exit %d:\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func TestServerTwoWorkersAndTheCLI(t *testing.T) {
	dir := t.TempDir()
	addr := server(t, filepath.Join(dir, "data"), "").Addr
	for i := 0; i < 2; i++ {
		exampleWorker(t, hello(t), addr)
	}
	mustCLI(t, addr, "workflow", "start", "--type", "Greeting", "--id", "greet-ada", "--task-queue", "hello", "--input", `"Ada"`)
	if out := mustCLI(t, addr, "workflow", "query", "greet-ada", "--type", "status"); !strings.Contains(out, "waiting for approval") {
		t.Fatalf("query: %s", out)
	}
	mustCLI(t, addr, "workflow", "signal", "greet-ada", "--name", "approve", "--input", `"Grace"`)
	if out := mustCLI(t, addr, "workflow", "result", "greet-ada"); !strings.Contains(out, "Hello, Ada! (approved by Grace)") {
		t.Fatalf("result: %s", out)
	}
	if out := mustCLI(t, addr, "workflow", "describe", "greet-ada"); !strings.Contains(out, "completed") {
		t.Fatalf("describe: %s", out)
	}
	show := mustCLI(t, addr, "workflow", "show", "greet-ada")
	for _, want := range []string{"WorkflowStarted", "SignalReceived", "approve", "ActivityCompleted", "Compose", "WorkflowCompleted"} {
		if !strings.Contains(show, want) {
			t.Fatalf("show lacks %q:\n%s", want, show)
		}
	}
	if out := mustCLI(t, addr, "workflow", "list", "--status", "completed"); !strings.Contains(out, "greet-ada") {
		t.Fatalf("list: %s", out)
	}
	var listed struct {
		Workflows []struct {
			WorkflowID string `json:"workflowId"`
			Status     string `json:"status"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, addr, "workflow", "list", "--json")), &listed); err != nil || len(listed.Workflows) != 1 ||
		listed.Workflows[0].WorkflowID != "greet-ada" || listed.Workflows[0].Status != "completed" {
		t.Fatalf("list --json: %+v %v", listed, err)
	}
	file := filepath.Join(dir, "greet-ada.json")
	mustCLI(t, addr, "history", "export", "greet-ada", "-o", file)
	out, err := exec.Command(hello(t), "replay", "--history", file, "--trace").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "replay ok") || !strings.Contains(string(out), "waiting at") {
		t.Fatalf("replay of the export: %v\n%s", err, out)
	}
	// Not found and usage errors have their exit codes.
	if _, code := cli(t, addr, "workflow", "describe", "nobody"); code != 1 {
		t.Fatalf("describe of an unknown workflow: exit %d, want 1", code)
	}
	if _, code := cli(t, addr, "workflow", "start", "--type", "Greeting"); code != 2 {
		t.Fatalf("start without --id: exit %d, want 2", code)
	}
}

func TestWorkerKilledMidActivityAnotherFinishes(t *testing.T) {
	dir := t.TempDir()
	addr := server(t, filepath.Join(dir, "data"), "").Addr
	hanging := testWorker(t, addr, "CAIRN_E2E_HANG=1")
	mustCLI(t, addr, "workflow", "start", "--type", "Slow", "--id", "slow-1", "--task-queue", "e2e", "--input", "7")
	hanging.WaitLine(t.Context(), "working 1")
	hanging.Kill()
	healthy := testWorker(t, addr)
	healthy.WaitLine(t.Context(), "working 2") // the lease expired; the retry went to the other worker
	out := mustCLI(t, addr, "workflow", "result", "slow-1")
	if !strings.Contains(out, fmt.Sprintf("done 7 by pid %d", healthy.Pid())) {
		t.Fatalf("result: %s", out)
	}
}

func TestServerRestartWhileWorkersPoll(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	addr := testkit.FreeAddr(t) // the server comes back at the same address
	srv := server(t, data, addr)
	testWorker(t, addr)
	mustCLI(t, addr, "workflow", "start", "--type", "Slow", "--id", "before", "--task-queue", "e2e", "--input", "1")
	mustCLI(t, addr, "workflow", "result", "before")
	srv.Kill() // acknowledged transitions survive; the workers' polls fail and back off
	server(t, data, addr)
	if out := mustCLI(t, addr, "workflow", "result", "before"); !strings.Contains(out, "done 1") {
		t.Fatalf("a result acknowledged before the crash: %s", out)
	}
	mustCLI(t, addr, "workflow", "start", "--type", "Slow", "--id", "after", "--task-queue", "e2e", "--input", "2")
	if out := mustCLI(t, addr, "workflow", "result", "after"); !strings.Contains(out, "done 2") {
		t.Fatalf("result after restart: %s", out)
	}
}

// A run paused on an unknown outcome is found, explained and resolved from
// the CLI, as a person would.
func TestResolveFromTheCLI(t *testing.T) {
	dir := t.TempDir()
	addr := server(t, filepath.Join(dir, "data"), "").Addr
	testWorker(t, addr)
	mustCLI(t, addr, "workflow", "start", "--type", "Pay", "--id", "pay-INV-9", "--task-queue", "e2e", "--input", `"INV-9"`)
	if _, code := cli(t, addr, "workflow", "result", "pay-INV-9", "--no-wait"); code != 1 {
		t.Fatalf("result --no-wait of an open run: exit %d, want 1", code)
	}
	waitForEvent(t, addr, "pay-INV-9", history.TypeActivityOutcomeUnknown)
	listed := mustCLI(t, addr, "workflow", "list", "--status", "paused")
	if !strings.Contains(listed, "cairn workflow resolve pay-INV-9") {
		t.Fatalf("paused list:\n%s", listed)
	}
	desc := mustCLI(t, addr, "workflow", "describe", "pay-INV-9")
	for _, want := range []string{"PAUSED on Transfer", "cannot tell whether the action took effect", `"INV-9"`} {
		if !strings.Contains(desc, want) {
			t.Fatalf("describe lacks %q:\n%s", want, desc)
		}
	}
	if _, code := cli(t, addr, "workflow", "resolve", "pay-INV-9", "--happened"); code != 2 {
		t.Fatalf("resolve without --reason: exit %d, want 2", code)
	}
	mustCLI(t, addr, "workflow", "resolve", "pay-INV-9", "--happened", "--result", `"tx-42"`, "--reason", "the bank shows tx-42", "--by", "clerk")
	if out := mustCLI(t, addr, "workflow", "result", "pay-INV-9"); !strings.Contains(out, "tx-42") {
		t.Fatalf("result after resolve: %s", out)
	}
	if show := mustCLI(t, addr, "workflow", "show", "pay-INV-9"); !strings.Contains(show, "happened by clerk: the bank shows tx-42") {
		t.Fatalf("show lacks the resolution:\n%s", show)
	}
	// The effects ledger shows the payment as completed, with its result.
	ledger := mustCLI(t, addr, "effects", "list", "--workflow", "pay-INV-9")
	for _, want := range []string{"Transfer", "SideEffect", "completed", `"tx-42"`} {
		if !strings.Contains(ledger, want) {
			t.Fatalf("effects list lacks %q:\n%s", want, ledger)
		}
	}
	var list struct {
		Effects []map[string]any `json:"effects"`
	}
	err := json.Unmarshal([]byte(mustCLI(t, addr, "effects", "list", "--json")), &list)
	effects := list.Effects
	if err != nil || len(effects) != 1 ||
		effects[0]["state"] != "completed" || effects[0]["attempts"] != 1.0 || effects[0]["workflowId"] != "pay-INV-9" {
		t.Fatalf("effects list --json: %+v, %v", effects, err)
	}
	if out := mustCLI(t, addr, "effects", "list", "--duplicates"); strings.Count(out, "\n") != 1 {
		t.Fatalf("effects list --duplicates with none:\n%s", out)
	}
}

// waitForEvent follows a run's history over HTTP until an event of type
// typ is recorded.
func waitForEvent(t *testing.T, addr, workflowID string, typ history.EventType) {
	t.Helper()
	testkit.WaitEvent(t.Context(), t, testkit.Dial(t, addr, "").Service(), workflowID, "", typ.String(), testkit.EventOfType(typ))
}

func TestServerAuth(t *testing.T) {
	dir := t.TempDir()
	// Open to the network without a token: refused.
	out, err := testkit.Run(t.Context(), testkit.Cmd{Path: testkit.Cairn(t),
		Args: []string{"server", "--data", filepath.Join(dir, "open"), "--listen", "0.0.0.0:0", "--ui-listen", "off"}, Env: []string{"CAIRN_TOKEN="}})
	if out.Code != 1 || !strings.Contains(out.Combined, "refusing") {
		t.Fatalf("non-loopback without a token: %v\n%s", err, out.Combined)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := server(t, filepath.Join(dir, "data"), "", "--token-file", tokenFile).Addr
	if out, code := cli(t, addr, "workflow", "list"); code != 1 || !strings.Contains(out, "unauthenticated") {
		t.Fatalf("no token: exit %d\n%s", code, out)
	}
	if out, code := cli(t, addr, "workflow", "list", "--token", "wrong"); code != 1 || !strings.Contains(out, "unauthenticated") {
		t.Fatalf("wrong token: exit %d\n%s", code, out)
	}
	mustCLI(t, addr, "workflow", "list", "--token", "s3cret")
}

// TestDemo runs `cairn demo` as a new user would and checks its story: two
// payments without the guard, a deduplicated retry with it, and a pause
// resolved by a person.
func TestDemo(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := testkit.Run(ctx, testkit.Cmd{Path: testkit.Cairn(t), Args: []string{"demo"}})
	if err != nil {
		t.Fatalf("cairn demo: %v\n%s", err, out.Combined)
	}
	s := out.Combined
	for _, want := range []string{
		"ACME was paid twice, and nothing in the system knows",
		"DENIED: SendPayment was already performed (idempotency key",
		"previous result: paid $4,200 to ACME for INV-9",
		"one payment: the retry was recognised as the same action",
		"decision: PAUSE (status paused)",
		"resolved by ap-clerk@acme; the run completed",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Contains(s, "\x1b[") {
		t.Error("colour codes in output that is not a terminal")
	}
	if t.Failed() {
		t.Logf("output:\n%s", s)
	}
}
