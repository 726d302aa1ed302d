package testkit_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/internal/testkit"
)

// envChild makes the test binary a child process: it prints a few lines,
// then answers each line of stdin with "echo LINE" until stdin closes.
const envChild = "TESTKIT_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		child()
		return
	}
	testkit.Main(m, pgtest.Done)
}

func child() {
	fmt.Println("hello 1 2")
	fmt.Fprintln(os.Stderr, "noise on stderr")
	fmt.Println("hello 3 4")
	fmt.Print("ready\n")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "exit" {
			fmt.Print("bye") // a last line without a newline
			os.Exit(7)
		}
		fmt.Println("echo " + sc.Text())
	}
	os.Exit(0)
}

func startChild(t *testing.T, stdoutOnly bool) *testkit.Proc {
	return testkit.Start(t, testkit.Cmd{Path: os.Args[0], Args: []string{"-test.run=^$"}, Env: []string{envChild + "=1"},
		Name: "child", StdoutOnly: stdoutOnly})
}

func TestProcLines(t *testing.T) {
	ctx := t.Context()
	p := startChild(t, false)
	if f := p.WaitFields(ctx, "hello"); strings.Join(f, ",") != "hello,1,2" {
		t.Fatalf("fields %q", f)
	}
	p.WaitLine(ctx, "ready")
	// A wait looks after the line the last one returned: "hello 3 4" came
	// before "ready".
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := p.Next(short, func(l string) bool { return strings.HasPrefix(l, "hello") }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a line before the last one returned was returned again: %v", err)
	}
	if got := p.Lines("hello"); len(got) != 2 {
		t.Fatalf("Lines: %q", got)
	}
	p.Send("one")
	if l := p.WaitFunc(ctx, "the echo", func(l string) bool { return strings.HasSuffix(l, "one") }); l != "echo one" {
		t.Fatalf("echo %q", l)
	}
	p.Send("exit")
	if l := p.WaitLine(ctx, "bye"); l != "bye" {
		t.Fatalf("the unterminated last line: %q", l)
	}
	var ee *exec.ExitError
	if err := p.Wait(ctx); !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit: %v", err)
	}
	if _, err := p.Next(ctx, func(string) bool { return true }); !errors.Is(err, testkit.ErrExited) {
		t.Fatalf("a wait after the exit: %v", err)
	}
	if got := p.Lines("noise"); len(got) != 1 { // stderr's lines are among stdout's (in the order they arrived)
		t.Fatalf("stderr's line: %q", got)
	}
}

func TestProcStdoutOnly(t *testing.T) {
	ctx := t.Context()
	p := startChild(t, true)
	p.WaitLine(ctx, "ready")
	if got := p.Lines("noise"); len(got) != 0 {
		t.Fatalf("a stderr line among stdout's: %q", got)
	}
	p.Send("exit")
	_ = p.Wait(ctx)
	if out := p.Output(); !strings.Contains(out, "noise on stderr") || !strings.Contains(out, "hello 3 4") {
		t.Fatalf("output:\n%s", out)
	}
}

func TestProcFreezeThawKill(t *testing.T) {
	ctx := t.Context()
	p := startChild(t, true)
	p.WaitLine(ctx, "ready")
	p.Freeze()
	p.Send("ping")
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := p.Next(short, func(l string) bool { return l == "echo ping" }); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a frozen process answered: %v", err)
	}
	p.Thaw()
	p.WaitLine(ctx, "echo ping")
	p.Kill()
	ws, ok := p.State().Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("state after Kill: %v", p.State())
	}
	p.Kill() // again: nothing to do
}

func TestRun(t *testing.T) {
	out, err := testkit.Run(t.Context(), testkit.Cmd{Path: "sh", Args: []string{"-c", "echo out; echo err >&2; exit 3"}})
	if out.Code != 3 || out.Stdout != "out\n" || out.Stderr != "err\n" || len(out.Combined) != 8 || !strings.Contains(out.Combined, "out\n") || !strings.Contains(out.Combined, "err\n") || err == nil || !strings.Contains(err.Error(), "err") {
		t.Fatalf("%+v %v", out, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if out, err := testkit.Run(ctx, testkit.Cmd{Path: "sleep", Args: []string{"10"}}); out.Code != -1 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a command past its context: %+v %v", out, err)
	}
}

// A server on free ports, the CLI against it, a run followed until it has
// an event, and until it closes without another.
func TestServerCLIAndWaitEvent(t *testing.T) {
	ctx := t.Context()
	srv := testkit.StartServer(ctx, t, testkit.ServerOptions{UI: true})
	if srv.Addr == "" || strings.HasSuffix(srv.Addr, ":7233") || !strings.HasPrefix(srv.UI, "http://127.0.0.1:") || strings.Contains(srv.UI, ":8233") {
		t.Fatalf("addresses %q %q", srv.Addr, srv.UI)
	}
	if _, err := testkit.CLI(ctx, t, srv.Addr, "workflow", "start", "--type", "Nobody", "--id", "w1", "--task-queue", "none"); err != nil {
		t.Fatal(err)
	}
	c := testkit.Dial(t, srv.Addr, "testkit")
	ev := testkit.WaitEvent(ctx, t, c.Service(), "w1", "", "the start", testkit.EventOfType(history.TypeWorkflowStarted))
	if ev.ID != 1 {
		t.Fatalf("event %+v", ev)
	}
	out, err := testkit.CLI(ctx, t, srv.Addr, "workflow", "terminate", "w1", "--reason", "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := testkit.NextEvent(ctx, c.Service(), "w1", "", func(history.Event) bool { return false }); !errors.Is(err, testkit.ErrRunClosed) {
		t.Fatalf("following a closed run: %v (terminate said %q)", err, out.Stdout)
	}
	if out, err := testkit.CLI(ctx, t, srv.Addr, "workflow", "describe", "nobody"); out.Code != 1 || err == nil {
		t.Fatalf("describe of nobody: %+v %v", out, err)
	}
	srv.Kill()
	if _, err := testkit.NextEvent(ctx, c.Service(), "w1", "", testkit.EventOfType(history.TypeWorkflowStarted)); api.ErrorCode(err) != api.CodeUnavailable {
		t.Fatalf("a killed server: %v", err)
	}
}

// A server restarted with the first one's Store serves the same data: the
// same directory, or on Postgres the same schema; Data asks for Badger
// whatever CAIRN_TEST_STORE says.
func TestServerRestartsOnItsData(t *testing.T) {
	ctx := t.Context()
	// On Postgres the second server waits for the first one's leases to
	// run out: a short lease keeps the test short.
	ttl := []string{"--lease-ttl", "2s"}
	srv := testkit.StartServer(ctx, t, testkit.ServerOptions{Args: ttl})
	if srv.Store.Postgres() != storetest.Postgres() || srv.Store.Postgres() == (srv.Data != "") {
		t.Fatalf("CAIRN_TEST_STORE=%q, the server's store: Postgres %v, directory %q", os.Getenv(storetest.EnvStore), srv.Store.Postgres(), srv.Data)
	}
	if _, err := testkit.CLI(ctx, t, srv.Addr, "workflow", "start", "--type", "Nobody", "--id", "kept", "--task-queue", "none"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	again := testkit.StartServer(ctx, t, testkit.ServerOptions{Store: srv.Store, Args: ttl})
	c := testkit.Dial(t, again.Addr, "testkit")
	testkit.WaitEvent(ctx, t, c.Service(), "kept", "", "the start, after the restart", testkit.EventOfType(history.TypeWorkflowStarted))

	dir := t.TempDir()
	badger := testkit.StartServer(ctx, t, testkit.ServerOptions{Data: dir})
	if badger.Data != dir || badger.Store.Postgres() {
		t.Fatalf("a server asked for Badger in %s: directory %q, Postgres %v", dir, badger.Data, badger.Store.Postgres())
	}
}

// A server that cannot come up: Ready says it exited.
func TestServerThatExits(t *testing.T) {
	busy := testkit.StartServer(t.Context(), t, testkit.ServerOptions{})
	srv := testkit.LaunchServer(t, testkit.ServerOptions{Listen: busy.Addr})
	if err := srv.Ready(t.Context()); !errors.Is(err, testkit.ErrExited) {
		t.Fatalf("a server on a busy port: %v", err)
	}
	if !strings.Contains(srv.Output(), "already in use") {
		t.Fatalf("output:\n%s", srv.Output())
	}
}

// The kit is for tests: no package's non-test files import it, and it
// imports neither an application under cmd/ nor the engine's
// implementation.
func TestImportedOnlyByTests(t *testing.T) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	const kit = "github.com/cairnflow/cairn/internal/testkit"
	out, err := testkit.Run(t.Context(), testkit.Cmd{Path: "go", Args: []string{"-C", root, "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "./..."}})
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(out.Stdout), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		if pkg != kit && strings.Contains(" "+imports+" ", " "+kit+" ") {
			t.Errorf("%s imports the test kit outside its tests", pkg)
		}
	}
	out, err = testkit.Run(t.Context(), testkit.Cmd{Path: "go", Args: []string{"-C", root, "list", "-deps", kit}})
	if err != nil {
		t.Fatal(err)
	}
	for dep := range strings.SplitSeq(strings.TrimSpace(out.Stdout), "\n") {
		if strings.HasPrefix(dep, "github.com/cairnflow/cairn/cmd/") || dep == "github.com/cairnflow/cairn/engine" ||
			strings.HasPrefix(dep, "github.com/cairnflow/cairn/engine/") && dep != "github.com/cairnflow/cairn/engine/api" {
			t.Errorf("the kit depends on %s", dep)
		}
	}
}
