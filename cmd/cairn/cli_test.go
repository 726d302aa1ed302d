package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// The CLI's tests run the real command tree (cli) against a real server:
// an engine on an in-memory Badger store, served over HTTP on a loopback
// port, with an in-process worker on the "cli" task queue.

const testQueue = "cli"

// Hold waits for a "go" signal, answering the "status" query and the
// "relabel" update meanwhile, then returns its input with the signal's
// argument.
func Hold(ctx sdk.Context, in string) (string, error) {
	status := "holding " + in
	if err := sdk.SetQueryHandler(ctx, "status", func() (string, error) { return status, nil }); err != nil {
		return "", err
	}
	err := sdk.SetUpdateHandler(ctx, "relabel", func(ctx sdk.Context, label string) (string, error) {
		was := status
		status = "holding " + label
		return was, nil
	}, sdk.UpdateHandlerOptions{Validator: func(ctx sdk.Context, label string) error {
		if label == "" {
			return errors.New("an empty label")
		}
		return nil
	}})
	if err != nil {
		return "", err
	}
	by := sdk.GetSignalChannel[string](ctx, "go").Receive(ctx)
	return in + " released by " + by, nil
}

// Refuse fails at once.
func Refuse(ctx sdk.Context, why string) (string, error) {
	return "", sdk.NewNonRetryableError("refused: "+why, "Refused")
}

// Size returns the length of its input.
func Size(ctx sdk.Context, in string) (int, error) { return len(in), nil }

type testServer struct {
	addr string
	eng  *engine.Engine
	c    client.Client
}

func newTestServer(t *testing.T, withWorker bool, opts ...func(*engine.Options)) *testServer {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	eo := engine.Options{Store: st}
	for _, o := range opts {
		o(&eo)
	}
	eng, err := engine.Open(eo)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.NewHandler(eng, httpapi.Options{Backup: func(ctx context.Context, w io.Writer) error {
		_, err := st.Backup(ctx, w)
		return err
	}})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s := &testServer{addr: ln.Addr().String(), eng: eng, c: client.NewLocal(eng, client.Options{})}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	done <- nil
	if withWorker {
		<-done
		w, err := worker.New(s.c, worker.Options{TaskQueue: testQueue, Identity: "cli-test-worker", GracefulStop: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, fn := range []any{Hold, Refuse, Size} {
			if err := w.RegisterWorkflow(fn); err != nil {
				t.Fatal(err)
			}
		}
		if err := registerAwait(w); err != nil {
			t.Fatal(err)
		}
		go func() { done <- w.Run(ctx) }()
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("worker: %v", err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = eng.Close()
		_ = srv.Shutdown(sctx)
		_ = h.Shutdown(sctx)
		_ = st.Close()
	})
	return s
}

// run runs the CLI against the server and returns stdout, stderr and the
// exit code.
func (s *testServer) run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	if len(args) > 0 && (args[0] == "workflow" || args[0] == "history" || args[0] == "task-queue" || args[0] == "effects" || args[0] == "activity") {
		args = append(args, "--address", s.addr)
	}
	code := cli(args, strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

func (s *testServer) must(t *testing.T, args ...string) string {
	t.Helper()
	out, errs, code := s.run(t, "", args...)
	if code != 0 {
		t.Fatalf("cairn %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// result waits for a run's result through the client.
func (s *testServer) result(t *testing.T, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.c.GetWorkflow(ctx, id, "").Get(ctx, nil)
}

func TestDescribeOfAClosedRunShowsItsOutcome(t *testing.T) {
	s := newTestServer(t, true)
	s.must(t, "workflow", "start", "--type", "Size", "--id", "size-1", "--task-queue", testQueue, "--input", `"four"`)
	s.must(t, "workflow", "start", "--type", "Refuse", "--id", "refuse-1", "--task-queue", testQueue, "--input", `"no budget"`)
	s.result(t, "size-1")
	s.result(t, "refuse-1")
	if out := s.must(t, "workflow", "describe", "size-1"); !strings.Contains(out, "Result    4") {
		t.Fatalf("describe of a completed run lacks its result:\n%s", out)
	}
	if out := s.must(t, "workflow", "describe", "refuse-1"); !strings.Contains(out, "Failure   Refused: refused: no budget") {
		t.Fatalf("describe of a failed run lacks its failure:\n%s", out)
	}
	var d struct {
		Info struct {
			Status string `json:"status"`
		} `json:"info"`
		Result struct {
			JSON json.RawMessage `json:"json"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(s.must(t, "workflow", "describe", "size-1", "--json")), &d); err != nil || d.Info.Status != "completed" || string(d.Result.JSON) != "4" {
		t.Fatalf("describe --json: %+v %v", d, err)
	}
}

// checkKeys fails on a JSON object key that is not lower camel case, and
// on a payload shown as base64 where it could be decoded.
func checkKeys(t *testing.T, what string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "" || unicode.IsUpper([]rune(k)[0]) || strings.Contains(k, "_") || strings.Contains(k, "ID") {
				t.Errorf("%s: key %q is not lower camel case", what, k)
			}
			if k == "base64" || k == "data" {
				t.Errorf("%s: a payload is not decoded: %v", what, x)
			}
			checkKeys(t, what, e)
		}
	case []any:
		for _, e := range x {
			checkKeys(t, what, e)
		}
	}
}

func TestQueryAndStack(t *testing.T) {
	s := newTestServer(t, true)
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "hold-q", "--task-queue", testQueue, "--input", `"box"`)
	if out := s.must(t, "workflow", "query", "hold-q", "--type", "status"); strings.TrimSpace(out) != `"holding box"` {
		t.Fatalf("query: %q", out)
	}
	out := s.must(t, "workflow", "stack", "hold-q")
	if !strings.Contains(out, "coroutine root, waiting in sdk.") || !strings.Contains(out, "cairn.Hold") || !strings.Contains(out, "cmd/cairn/cli_test.go:") {
		t.Fatalf("stack is not readable:\n%s", out)
	}
	if strings.Contains(out, "runtime.") || strings.Contains(out, "goroutine ") || strings.Contains(out, "reflect.") {
		t.Fatalf("stack shows the runtime's frames:\n%s", out)
	}
}

func TestQueryWithoutWorkerTimesOutClearly(t *testing.T) {
	s := newTestServer(t, false)
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "lonely", "--task-queue", "nobody-polls", "--input", `"x"`)
	_, stderr, code := s.run(t, "", "workflow", "query", "lonely", "--type", "status", "--timeout", "300ms")
	if code != 1 || !strings.Contains(stderr, "no worker answered the status query on task queue nobody-polls within 300ms: no worker polled it in the last 5m0s") {
		t.Fatalf("query without a worker: exit %d: %s", code, stderr)
	}
	if strings.Count(stderr, "no worker answered") != 1 || strings.Count(stderr, "deadline exceeded") > 0 {
		t.Fatalf("query without a worker: the message repeats itself: %s", stderr)
	}
	_, stderr, _ = s.run(t, "", "workflow", "query", "lonely", "--type", "status", "--timeout", "300ms", "--json")
	if !strings.Contains(stderr, `"code":"deadline_exceeded"`) {
		t.Fatalf("query --json without a worker: %s", stderr)
	}
}

func TestInputFile(t *testing.T) {
	s := newTestServer(t, true)
	big := strings.Repeat("x", 200<<10) // over what argv takes inline
	file := filepath.Join(t.TempDir(), "in.json")
	b, _ := json.Marshal(big)
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s.must(t, "workflow", "start", "--type", "Size", "--id", "big", "--task-queue", testQueue, "--input-file", file)
	if out := s.must(t, "workflow", "result", "big"); strings.TrimSpace(out) != "204800" {
		t.Fatalf("result of the file's input: %q", out)
	}
	out, stderr, code := s.run(t, `"from stdin"`, "workflow", "start", "--type", "Size", "--id", "stdin", "--task-queue", testQueue, "--input-file", "-")
	if code != 0 {
		t.Fatalf("--input-file -: exit %d: %s %s", code, out, stderr)
	}
	if out := s.must(t, "workflow", "result", "stdin"); strings.TrimSpace(out) != "10" {
		t.Fatalf("result of stdin's input: %q", out)
	}
	if _, stderr, code := s.run(t, "", "workflow", "start", "--type", "Size", "--id", "both", "--task-queue", testQueue, "--input", `"a"`, "--input-file", file); code != 2 {
		t.Fatalf("--input with --input-file: exit %d: %s", code, stderr)
	}
	if _, stderr, code := s.run(t, "", "workflow", "start", "--type", "Size", "--id", "missing", "--task-queue", testQueue, "--input-file", file+".none"); code != 2 || !strings.Contains(stderr, "no such file") {
		t.Fatalf("--input-file of a missing file: exit %d: %s", code, stderr)
	}
}

func TestShortRunIDIsAccepted(t *testing.T) {
	s := newTestServer(t, true)
	s.must(t, "workflow", "start", "--type", "Size", "--id", "twice", "--task-queue", testQueue, "--input", `"a"`)
	s.result(t, "twice")
	s.must(t, "workflow", "start", "--type", "Size", "--id", "twice", "--task-queue", testQueue, "--input", `"bb"`)
	s.result(t, "twice")
	s.must(t, "workflow", "start", "--type", "Size", "--id", "twice-other", "--task-queue", testQueue, "--input", `"ccc"`)
	s.result(t, "twice-other")
	var list struct {
		Workflows []struct {
			WorkflowID string `json:"workflowId"`
			RunID      string `json:"runId"`
		} `json:"workflows"`
	}
	if err := json.Unmarshal([]byte(s.must(t, "workflow", "list", "--id-prefix", "twice", "--json")), &list); err != nil || len(list.Workflows) != 3 {
		t.Fatalf("list --id-prefix: %+v %v", list, err)
	}
	first := list.Workflows[2] // newest first: the oldest run of "twice"
	if first.WorkflowID != "twice" {
		t.Fatalf("list order: %+v", list)
	}
	table := s.must(t, "workflow", "list")
	short := shortRun(first.RunID)
	if !strings.Contains(table, short) {
		t.Fatalf("list does not show %s:\n%s", short, table)
	}
	for _, run := range []string{first.RunID, short, short + "…"} {
		if out := s.must(t, "workflow", "describe", "twice", "--run", run); !strings.Contains(out, "Run       "+first.RunID) || !strings.Contains(out, "Result    1") {
			t.Fatalf("describe --run %s:\n%s", run, out)
		}
	}
	// The commands added later take it too: budget and watch.
	if out := s.must(t, "workflow", "watch", "twice", "--run", short); !strings.Contains(out, "[run closed]") {
		t.Fatalf("watch --run %s:\n%s", short, out)
	}
	if _, stderr, code := s.run(t, "", "workflow", "budget", "twice", "--run", short, "--max-turns", "2", "--reason", "r"); code == 0 || strings.Contains(stderr, "not found") {
		t.Fatalf("budget --run %s of a closed run: exit %d, want a refusal of the closed run, not a run not found: %s", short, code, stderr)
	}
	if _, stderr, code := s.run(t, "", "workflow", "show", "twice", "--run", "nope"); code != 1 || !strings.Contains(stderr, "no run of twice starts with") {
		t.Fatalf("show --run of no run: exit %d %s", code, stderr)
	}
}

func TestUnknownCommandsAndGlobalFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		exit int
	}{
		{[]string{"nonsense"}, 2},
		{[]string{"workflow", "nonsense"}, 2},
		{[]string{"history", "nonsense"}, 2},
		{[]string{"workflow"}, 0}, // its help
		{[]string{"version"}, 0},
		{[]string{"version", "--address", "x:1"}, 2},               // --address is not a flag of version
		{[]string{"replay", "--inline", "--history", "h.json"}, 2}, // replay takes --address and --token (a plain export reads its chunks from a server), not --inline
		{[]string{"dev", "--listen", "0.0.0.0:0"}, 2},              // dev is for this machine only
		{[]string{"dev", "--ui-listen", "10.1.2.3:8233"}, 2},
	} {
		var out, errb bytes.Buffer
		if code := cli(tc.args, strings.NewReader(""), &out, &errb); code != tc.exit {
			t.Errorf("cairn %s: exit %d, want %d\n%s%s", strings.Join(tc.args, " "), code, tc.exit, out.String(), errb.String())
		}
	}
}

func TestAddressWithoutPort(t *testing.T) {
	for in, want := range map[string]string{
		"localhost":                 "localhost:7233",
		"127.0.0.1":                 "127.0.0.1:7233",
		"127.0.0.1:9000":            "127.0.0.1:9000",
		"::1":                       "[::1]:7233",
		"[::1]":                     "[::1]:7233",
		"[::1]:80":                  "[::1]:80",
		"http://localhost":          "http://localhost:7233",
		"https://cairn.example/":    "https://cairn.example:7233",
		"https://cairn.example:443": "https://cairn.example:443",
	} {
		if got := withDefaultPort(in); got != want {
			t.Errorf("withDefaultPort(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCLIErrorsWrapTheirCause(t *testing.T) {
	err := noAnswerError{"x"}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("noAnswerError does not wrap context.DeadlineExceeded")
	}
}

func TestTaskQueueDescribeAndCount(t *testing.T) {
	s := newTestServer(t, true)
	s.must(t, "workflow", "start", "--type", "Size", "--id", "done-1", "--task-queue", testQueue, "--input", `"ab"`)
	s.result(t, "done-1")
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "stuck-1", "--task-queue", "nobody-polls", "--input", `"x"`)
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "stuck-2", "--task-queue", "nobody-polls", "--input", `"y"`)
	s.must(t, "workflow", "terminate", "stuck-2")

	out := s.must(t, "task-queue", "describe", "nobody-polls")
	if !strings.Contains(out, "Backlog   1 workflow tasks") || !strings.Contains(out, "STUCK") || !strings.Contains(out, "No worker polled this queue") {
		t.Fatalf("describe of a queue nobody polls:\n%s", out)
	}
	out = s.must(t, "task-queue", "describe", testQueue)
	if !strings.Contains(out, "cli-test-worker") || !strings.Contains(out, "workflow") || strings.Contains(out, "STUCK") {
		t.Fatalf("describe of a polled queue:\n%s", out)
	}
	var q struct {
		Name            string `json:"name"`
		WorkflowPollers []struct {
			Identity string `json:"identity"`
			LastSeen string `json:"lastSeen"`
		} `json:"workflowPollers"`
	}
	if err := json.Unmarshal([]byte(s.must(t, "task-queue", "describe", testQueue, "--json")), &q); err != nil || q.Name != testQueue ||
		len(q.WorkflowPollers) != 1 || q.WorkflowPollers[0].Identity != "cli-test-worker" || q.WorkflowPollers[0].LastSeen == "" {
		t.Fatalf("describe --json: %+v %v", q, err)
	}
	if out := s.must(t, "task-queue", "list"); !strings.Contains(out, "nobody-polls") || !strings.Contains(out, testQueue) {
		t.Fatalf("task-queue list:\n%s", out)
	}

	out = s.must(t, "workflow", "count")
	if !strings.Contains(out, "3 runs") || !regexp.MustCompile(`running\s+1`).MatchString(out) || !regexp.MustCompile(`completed\s+1`).MatchString(out) ||
		!regexp.MustCompile(`terminated\s+1`).MatchString(out) {
		t.Fatalf("count:\n%s", out)
	}
	var c struct {
		Total    int `json:"total"`
		ByStatus []struct {
			Status string `json:"status"`
			Count  int    `json:"count"`
		} `json:"byStatus"`
	}
	if err := json.Unmarshal([]byte(s.must(t, "workflow", "count", "--id-prefix", "stuck-", "--json")), &c); err != nil || c.Total != 2 || len(c.ByStatus) != 2 {
		t.Fatalf("count --json: %+v %v", c, err)
	}
}

func TestServerRefusesAnOpenUIWithoutAToken(t *testing.T) {
	t.Setenv("CAIRN_TOKEN", "")
	var out, errb bytes.Buffer
	code := cli([]string{"server", "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--ui-listen", "0.0.0.0:0"}, strings.NewReader(""), &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "refusing to listen on 0.0.0.0:0 without a token") {
		t.Fatalf("server with an open UI and no token: exit %d: %s", code, errb.String())
	}
}
