// Package e2e runs Cairn the way people do: `cairn server` as a process,
// worker processes connected over HTTP, and the CLI — with SIGKILL where
// a process dies.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"

	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
	"github.com/cairnflow/cairn/worker/workercli"
)

// bin holds the binaries TestMain builds once.
var bin struct {
	cairn, hello, agent string
}

// TestMain builds cairn and the hello example, or, when re-executed as a
// worker process, runs the test worker.
func TestMain(m *testing.M) {
	if os.Getenv("CAIRN_E2E_WORKER") == "1" {
		os.Exit(workercli.Main(registerTestWorker, workercli.Options{Name: "e2e-worker", TaskQueue: "e2e"}))
	}
	dir, err := os.MkdirTemp("", "cairn-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.cairn = filepath.Join(dir, "cairn")
	bin.hello = filepath.Join(dir, "hello")
	bin.agent = filepath.Join(dir, "agent")
	for _, b := range [][2]string{{bin.cairn, "../../cmd/cairn"}, {bin.hello, "../../examples/hello"}, {bin.agent, "../../examples/agent"}} {
		cmd := exec.Command("go", "build", "-o", b[0], b[1])
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "build", b[1], err)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

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

// proc is a child process with its output lines.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	all   []string
}

func start(t *testing.T, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.all = append(p.all, sc.Text())
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return p
}

// waitLine waits (60 s at most) for a line containing s.
func (p *proc) waitLine(t *testing.T, s string) string {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("process exited before printing %q; output:\n%s", s, p.output())
			}
			if strings.Contains(l, s) {
				return l
			}
		case <-deadline.C:
			t.Fatalf("no line with %q within 60 s; output:\n%s", s, p.output())
		}
	}
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.all, "\n")
}

func (p *proc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// freePort returns a loopback address nobody listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testWorker starts this test binary as a worker process (TestMain's
// worker mode) connected to addr, with extra environment, and waits until
// it polls.
func testWorker(t *testing.T, addr string, env ...string) *proc {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := start(t, append([]string{"CAIRN_E2E_WORKER=1"}, env...), self, "run", "--address", addr)
	p.waitLine(t, "worker started")
	return p
}

// server starts `cairn server` and waits until it is ready.
func server(t *testing.T, data, listen string, extra ...string) *proc {
	t.Helper()
	p := start(t, nil, bin.cairn, append([]string{"server", "--data", data, "--listen", listen, "--ui-listen", "127.0.0.1:0"}, extra...)...)
	p.waitLine(t, "cairn server ready")
	return p
}

// cli runs the CLI and returns its output and exit code.
func cli(t *testing.T, addr string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin.cairn, append(args, "--address", addr)...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("cairn %v: %v", args, err)
	}
	return string(out), code
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
	addr := freePort(t)
	server(t, filepath.Join(dir, "data"), addr)
	for i := 0; i < 2; i++ {
		w := start(t, nil, bin.hello, "run", "--address", addr)
		w.waitLine(t, "worker started")
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
	out, err := exec.Command(bin.hello, "replay", "--history", file, "--trace").CombinedOutput()
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
	addr := freePort(t)
	server(t, filepath.Join(dir, "data"), addr)
	hanging := testWorker(t, addr, "CAIRN_E2E_HANG=1")
	mustCLI(t, addr, "workflow", "start", "--type", "Slow", "--id", "slow-1", "--task-queue", "e2e", "--input", "7")
	hanging.waitLine(t, "working 1")
	hanging.kill9(t)
	healthy := testWorker(t, addr)
	healthy.waitLine(t, "working 2") // the lease expired; the retry went to the other worker
	out := mustCLI(t, addr, "workflow", "result", "slow-1")
	if !strings.Contains(out, fmt.Sprintf("done 7 by pid %d", healthy.cmd.Process.Pid)) {
		t.Fatalf("result: %s", out)
	}
}

func TestServerRestartWhileWorkersPoll(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	addr := freePort(t)
	srv := server(t, data, addr)
	testWorker(t, addr)
	mustCLI(t, addr, "workflow", "start", "--type", "Slow", "--id", "before", "--task-queue", "e2e", "--input", "1")
	mustCLI(t, addr, "workflow", "result", "before")
	srv.kill9(t) // acknowledged transitions survive; the workers' polls fail and back off
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
	addr := freePort(t)
	server(t, filepath.Join(dir, "data"), addr)
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

// waitForEvent long-polls a run's history over HTTP until an event of type
// typ is recorded.
func waitForEvent(t *testing.T, addr, workflowID string, typ history.EventType) {
	t.Helper()
	c, err := client.Dial(addr, client.Options{}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	from := int64(1)
	for {
		resp, err := c.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: workflowID, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			t.Fatalf("waiting for %s: %v", typ, err)
		}
		for _, ev := range resp.Events {
			if ev.Type() == typ {
				return
			}
		}
		from = resp.NextEventID
	}
}

func TestServerAuth(t *testing.T) {
	dir := t.TempDir()
	// Open to the network without a token: refused.
	cmd := exec.Command(bin.cairn, "server", "--data", filepath.Join(dir, "open"), "--listen", "0.0.0.0:0")
	cmd.Env = append(os.Environ(), "CAIRN_TOKEN=")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "refusing") {
		t.Fatalf("non-loopback without a token: %v\n%s", err, out)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	server(t, filepath.Join(dir, "data"), addr, "--token-file", tokenFile)
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
	out, err := exec.CommandContext(ctx, bin.cairn, "demo").CombinedOutput()
	if err != nil {
		t.Fatalf("cairn demo: %v\n%s", err, out)
	}
	s := string(out)
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
