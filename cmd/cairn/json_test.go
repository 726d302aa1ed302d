package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/cmd/cairn/internal/demo"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/clock"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// jsonCase is one run of a command with --json: it succeeds (exit 0, one
// JSON object on stdout, nothing on stderr) or fails (the exit code given,
// nothing on stdout, {"code", "message"} on stderr with the code given).
type jsonCase struct {
	args  []string // without --json; "@DIR" is replaced by the test's temp dir
	exit  int
	code  api.Code // the error's code, when exit != 0
	lines bool     // stdout is one object a line (a stream), maybe none
	srv   string   // "paused": against the server holding a paused run
}

// notRunWithSuccess are the commands whose success is not run here, and
// why; their failures are.
var notRunWithSuccess = map[string]string{
	"cairn server":          "serves until stopped; its log lines on stderr are JSON (zerolog) with or without --json",
	"cairn dev":             "serves until stopped; test/ui starts `cairn dev --demo --json` and decodes its first line",
	"cairn fakellm":         "serves until stopped",
	"cairn demo":            "minutes of worker processes killed with SIGKILL (test/e2e runs the demo)",
	"cairn demo agent":      "minutes of worker processes (test/e2e runs the agent demo)",
	"cairn bench":           "a benchmark",
	"cairn bench agent":     "a benchmark",
	"cairn bench retention": "a benchmark",
	"cairn migrate":         "needs PostgreSQL: TestMigrateCommand runs it with --json",
}

// Every command of the tree prints JSON under --json — its outcome on
// stdout by the view convention (lower camel case keys, payloads decoded),
// its failure as {"code", "message"} on stderr with a documented exit code
// (1 failed or not found, 2 usage, 3 damage found). A command added to the
// tree without a case here fails the test.
func TestEveryCommandSpeaksJSON(t *testing.T) {
	t.Setenv("CAIRN_TOKEN", "")
	s := newTestServer(t, true)
	paused := pausedServer(t)
	dir := t.TempDir()
	demoHistory(t, filepath.Join(dir, "pay.json"))
	closedPort := closedAddress(t)
	ok := func(args ...string) jsonCase { return jsonCase{args: args} }
	fails := func(exit int, code api.Code, args ...string) jsonCase {
		return jsonCase{args: args, exit: exit, code: code}
	}
	start := func(id string) jsonCase {
		return ok("workflow", "start", "--type", "Hold", "--id", id, "--task-queue", testQueue, "--input", `"`+id+`"`)
	}
	s.startAwait(t, "await-1")
	s.startAwait(t, "await-2")
	cases := []jsonCase{
		ok(), // the list of commands
		fails(2, "usage", "nonsense"),
		ok("version"),
		fails(2, "usage", "version", "extra"),

		ok("workflow"),
		fails(2, "usage", "workflow", "nonsense"),
		start("hold-1"),
		fails(2, "usage", "workflow", "start", "--type", "Hold"),
		fails(2, "usage", "workflow", "start", "--type", "Hold", "--id", "x", "--task-queue", "q", "--input", "{"),
		ok("workflow", "query", "hold-1", "--type", "status"),
		fails(1, "not_found", "workflow", "query", "nobody", "--type", "status"),
		ok("workflow", "stack", "hold-1"),
		fails(1, "not_found", "workflow", "stack", "nobody"),
		ok("workflow", "update", "hold-1", "--name", "relabel", "--input", `"box"`),
		fails(1, "update_rejected", "workflow", "update", "hold-1", "--name", "relabel", "--input", `""`),
		ok("workflow", "signal", "hold-1", "--name", "go", "--input", `"ann"`),
		fails(1, "not_found", "workflow", "signal", "nobody", "--name", "go"),
		ok("workflow", "signal", "sws-1", "--name", "go", "--input", `"ann"`, "--start", "--type", "Hold", "--task-queue", testQueue),
		fails(2, "usage", "workflow", "signal", "sws-2", "--name", "go", "--start"),
		ok("workflow", "execute", "--type", "Size", "--id", "size-1", "--task-queue", testQueue, "--input", `"abc"`),
		fails(2, "usage", "workflow", "execute", "--type", "Size"),
		ok("workflow", "reset", "size-1", "--to-first-task", "--reason", "again"),
		fails(1, "not_found", "workflow", "reset", "nobody", "--to-first-task", "--reason", "x"),
		ok("workflow", "fork", "size-1", "--id", "size-1-fork"),
		fails(1, "not_found", "workflow", "fork", "nobody", "--id", "nobody-fork"),
		ok("workflow", "result", "hold-1"),
		fails(1, "not_found", "workflow", "result", "nobody"),
		{args: []string{"workflow", "watch", "hold-1"}, lines: true},
		fails(1, "not_found", "workflow", "watch", "nobody"),
		ok("workflow", "list"),
		fails(2, "usage", "workflow", "list", "--no-such-flag"),
		ok("workflow", "count"),
		fails(2, "usage", "workflow", "count", "--started-after", "yesterday-ish"),
		ok("workflow", "describe", "hold-1"),
		fails(1, "not_found", "workflow", "describe", "nobody"),
		ok("workflow", "show", "hold-1"),
		fails(1, "not_found", "workflow", "show", "nobody"),
		ok("workflow", "compare", "hold-1", "size-1"),
		fails(1, "not_found", "workflow", "compare", "hold-1", "nobody"),
		fails(2, "usage", "workflow", "compare", "hold-1"),
		start("hold-2"),
		ok("workflow", "cancel", "hold-2", "--reason", "test"),
		fails(1, "not_found", "workflow", "cancel", "nobody"),
		ok("workflow", "terminate", "hold-2", "--reason", "test"),
		fails(1, "not_found", "workflow", "terminate", "nobody"),
		ok("workflow", "delete", "hold-2"),
		fails(1, "not_found", "workflow", "delete", "hold-2"),
		start("hold-3"),
		fails(1, "failed_precondition", "workflow", "delete", "hold-3"),
		ok("workflow", "budget", "hold-3", "--max-turns", "3", "--reason", "test"),
		fails(1, "not_found", "workflow", "budget", "nobody", "--max-turns", "3", "--reason", "test"),
		{args: []string{"workflow", "resolve", "pay-1", "--not-happened", "--reason", "not at the provider"}, srv: "paused"},
		fails(1, "not_found", "workflow", "resolve", "nobody", "--not-happened", "--reason", "test"),
		fails(2, "usage", "workflow", "resolve", "hold-3", "--reason", "no verdict"),
		{args: []string{"workflow", "approve", "agent-1", "--call", "call_1", "--by", "ada"}, srv: "paused"},
		fails(1, "invalid_argument", "workflow", "approve", "hold-3", "--by", "ada"),
		{args: []string{"workflow", "reject", "agent-1", "--call", "call_2", "--by", "ada", "--reason", "no"}, srv: "paused"},
		fails(2, "usage", "workflow", "reject", "hold-3", "--by", "ada"),

		ok("activity"),
		fails(2, "usage", "activity", "nonsense"),
		ok("activity", "heartbeat", "--workflow-id", "await-1", "--activity-id", "ask", "--details", `"half"`),
		fails(1, "not_found", "activity", "heartbeat", "--workflow-id", "nobody", "--activity-id", "ask"),
		ok("activity", "complete", "--workflow-id", "await-1", "--activity-id", "ask", "--result", `"yes"`),
		fails(1, "not_found", "activity", "complete", "--workflow-id", "nobody", "--activity-id", "ask"),
		ok("activity", "fail", "--workflow-id", "await-2", "--activity-id", "ask", "--message", "no"),
		fails(2, "usage", "activity", "fail", "--workflow-id", "await-2", "--activity-id", "ask"),
		ok("schedule"),
		ok("schedule", "create", "--id", "sch-1", "--cron", "@hourly", "--type", "Size", "--task-queue", testQueue, "--input", `"abc"`),
		fails(1, "already_started", "schedule", "create", "--id", "sch-1", "--cron", "@hourly", "--type", "Size", "--task-queue", testQueue),
		ok("schedule", "list"),
		fails(1, "unavailable", "schedule", "list", "--address", closedPort),
		ok("schedule", "describe", "sch-1"),
		fails(1, "not_found", "schedule", "describe", "nobody"),
		ok("schedule", "update", "sch-1", "--interval", "90m", "--offset", "10m"),
		fails(1, "not_found", "schedule", "update", "nobody", "--interval", "1h"),
		ok("schedule", "pause", "sch-1", "--note", "test"),
		fails(1, "not_found", "schedule", "pause", "nobody"),
		ok("schedule", "unpause", "sch-1"),
		fails(1, "not_found", "schedule", "unpause", "nobody"),
		ok("schedule", "trigger", "sch-1"),
		fails(2, "usage", "schedule", "trigger", "sch-1", "--overlap", "sometimes"),
		ok("schedule", "backfill", "sch-1", "--start", "2026-01-01T00:00:00Z", "--end", "2026-01-01T02:00:00Z"),
		fails(2, "usage", "schedule", "backfill", "sch-1", "--start", "yesterday", "--end", "2026-01-01T02:00:00Z"),
		ok("schedule", "delete", "sch-1"),
		fails(1, "not_found", "schedule", "delete", "sch-1"),

		ok("task-queue"),
		ok("task-queue", "describe", testQueue),
		fails(2, "usage", "task-queue", "describe"),
		ok("task-queue", "list"),
		ok("task-queue", "limit", testQueue, "--type", "Charge", "--key", "tenant/*", "--max", "2", "--rate", "1.5"),
		ok("task-queue", "limit", testQueue, "--type", "Charge", "--key", "tenant/*", "--clear"),
		fails(2, "usage", "task-queue", "limit", testQueue),
		fails(1, "invalid_argument", "task-queue", "limit", testQueue, "--key", "a,b", "--max", "1"),
		ok("cluster"),
		fails(2, "usage", "cluster", "nope"),
		ok("cluster", "describe"),
		fails(1, "unavailable", "cluster", "describe", "--address", closedPort),
		fails(1, "unavailable", "task-queue", "list", "--address", closedPort),

		ok("cluster"),
		ok("cluster", "describe"), // one server on the embedded store: no cluster
		ok("cluster", "describe", "--servers"),
		fails(1, "unavailable", "cluster", "describe", "--address", closedPort),

		ok("effects"),
		ok("effects", "list"),
		fails(1, "unavailable", "effects", "list", "--address", closedPort),

		ok("history"),
		ok("history", "export", "hold-1", "--inline", "-o", "@DIR/hold-1.json"),
		fails(1, "not_found", "history", "export", "nobody"),
		fails(1, codeUnknownWorkflowType, "replay", "--history", "@DIR/hold-1.json"), // Hold is not a built-in workflow
		fails(1, "not_found", "replay", "--history", "@DIR/no-such-history.json"),
		ok("replay", "--history", "@DIR/pay.json"),
		fails(2, "usage", "replay"),

		ok("backup", "--out", "@DIR/backup", "--address", s.addr),
		fails(2, "usage", "backup", "--out", "@DIR/backup", "--address", s.addr), // it exists
		ok("restore", "--from", "@DIR/backup", "--data", "@DIR/restored"),
		fails(1, "not_found", "restore", "--from", "@DIR/no-such-backup", "--data", "@DIR/restored-2"),
		ok("check", "--data", "@DIR/restored"),
		fails(2, "usage", "check"),
		ok("effects", "doubt", "--data", "@DIR/restored", "--reason", "restored from a snapshot"),
		fails(2, "usage", "effects", "doubt", "--data", "@DIR/restored"), // no reason
		fails(2, "usage", "migrate", "--from", "@DIR/restored"),
		fails(1, "not_found", "migrate", "--from", "@DIR/no-such-dir", "--to", "postgres://127.0.0.1:1/none"),

		fails(1, "invalid_argument", "server", "--data", "@DIR/server", "--listen", "127.0.0.1:0", "--ui-listen", "0.0.0.0:0"), // an open UI needs a token
		fails(2, "usage", "dev", "--listen", "0.0.0.0:0"),
		fails(1, "not_found", "fakellm", "--script", "@DIR/no-such-script"),
		fails(2, "usage", "demo", "nonsense"),
		fails(2, "usage", "demo", "agent", "extra"),
		fails(2, "usage", "bench", "--workflows", "many"),
		fails(2, "usage", "bench", "agent", "--turns", "many"),
		fails(2, "usage", "bench", "retention", "--runs", "many"),

		ok("vet", "./testdata/vet/good"),
		fails(2, "usage", "vet", "--no-such-flag"),
	}

	root := newRoot(&globals{})
	succeeded, failed := map[string]bool{}, map[string]bool{}
	for _, tc := range cases {
		args := make([]string, len(tc.args))
		for i, a := range tc.args {
			args[i] = strings.ReplaceAll(a, "@DIR", dir)
		}
		cmd, _, err := root.Find(args)
		if err != nil {
			cmd = root
		}
		what := "cairn " + strings.Join(args, " ") + " --json"
		target := s
		if tc.srv == "paused" {
			target = paused
		}
		if cmd.Flag("address") != nil && !slices.Contains(args, "--address") {
			args = append(args, "--address", target.addr)
		}
		var out, errb bytes.Buffer
		exit := cli(append(args, "--json"), strings.NewReader(""), &out, &errb)
		stdout, stderr := out.String(), errb.String()
		if tc.exit == 0 {
			succeeded[cmd.CommandPath()] = true
			if exit != 0 || stderr != "" {
				t.Errorf("%s: exit %d, stderr %q", what, exit, stderr)
				continue
			}
			checkJSONOut(t, what, stdout, tc.lines)
			continue
		}
		failed[cmd.CommandPath()] = true
		var eb map[string]any
		dec := json.NewDecoder(strings.NewReader(stderr))
		if err := dec.Decode(&eb); err != nil || dec.More() || exit != tc.exit || stdout != "" || eb["code"] != string(tc.code) || eb["message"] == "" || len(eb) != 2 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and {\"code\": %q, \"message\": …}", what, exit, stdout, stderr, tc.exit, tc.code)
		}
	}
	for _, path := range commandPaths(root) {
		if _, skip := notRunWithSuccess[path]; !skip && !succeeded[path] {
			t.Errorf("%s has no case showing its --json output (add one to TestEveryCommandSpeaksJSON, or say in notRunWithSuccess why not)", path)
		}
		if !failed[path] && path != "cairn workflow" && path != "cairn task-queue" && path != "cairn effects" && path != "cairn history" &&
			path != "cairn cluster" && path != "cairn schedule" {
			t.Errorf("%s has no case showing its --json error (add one to TestEveryCommandSpeaksJSON)", path)
		}
	}
}

// checkJSONOut checks stdout: one object (or, for a stream, one a line),
// keys by the view convention.
func checkJSONOut(t *testing.T, what, stdout string, lines bool) {
	t.Helper()
	if lines {
		sc := bufio.NewScanner(strings.NewReader(stdout))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var v map[string]any
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				t.Errorf("%s: a line is not a JSON object: %v\n%s", what, err, sc.Text())
			}
			checkKeys(t, what, v)
		}
		return
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&v); err != nil || dec.More() {
		t.Errorf("%s: not one JSON value: %v\n%s", what, err, stdout)
		return
	}
	if _, ok := v.(map[string]any); !ok {
		t.Errorf("%s: not an object (every command prints one):\n%s", what, stdout)
	}
	checkKeys(t, what, v)
}

// commandPaths lists the commands a person can run (hidden ones are the
// worker processes the demo and the benchmark start themselves).
func commandPaths(root *cobra.Command) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		if c.Runnable() {
			out = append(out, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	slices.Sort(out)
	return out
}

// closedAddress is a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// pausedServer is a server (on an injected clock, no worker) holding run
// pay-1 paused on a SideEffect activity whose attempt lost its lease.
func pausedServer(t *testing.T) *testServer {
	t.Helper()
	clk := clock.NewFake(time.Now())
	s := newTestServer(t, false, func(o *engine.Options) { o.Clock = clk })
	ctx := context.Background()
	eng := s.eng
	if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: "pay-1", WorkflowType: "Pay", TaskQueue: "raw"}); err != nil {
		t.Fatal(err)
	}
	wft, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "raw", Identity: "w"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Identity: "w",
		Commands: []api.Command{{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1",
			ActivityType: "SendPayment", Effect: history.SideEffect, Options: history.ActivityOptions{StartToCloseTimeout: time.Minute}}}}}); err != nil {
		t.Fatal(err)
	}
	if at, err := eng.PollActivityTask(ctx, &api.PollActivityTaskRequest{TaskQueue: "raw", Identity: "w"}); err != nil || at.Task == nil {
		t.Fatalf("poll activity: %+v %v", at, err)
	}
	clk.Advance(time.Minute + time.Second) // the attempt's lease runs out: its outcome is unknown
	eng.Settle()
	d, err := eng.DescribeWorkflow(ctx, &api.DescribeWorkflowRequest{WorkflowID: "pay-1"})
	if err != nil || d.Info.Status != api.StatusPaused {
		t.Fatalf("pay-1: %+v %v, want it paused", d, err)
	}
	awaitingAgent(t, s, "agent-1", "call_1", "call_2")
	return s
}

// awaitingAgent starts a run id whose agent awaits approval of calls, its
// approval markers recorded as sdk/agent records them (no worker runs it).
func awaitingAgent(t *testing.T, s *testServer, id string, calls ...string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "Agent", TaskQueue: "raw-agents"}); err != nil {
		t.Fatal(err)
	}
	wft, err := s.eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "raw-agents", Identity: "w"})
	if err != nil || wft.Task == nil {
		t.Fatalf("poll: %+v %v", wft, err)
	}
	var cmds []api.Command
	for _, c := range calls {
		b, err := msgpack.Marshal(&history.ApprovalRequest{CallID: c, Tool: "SendPayment", Arguments: `{"invoice":"INV-9"}`, Signal: "approve"})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, api.Command{Type: api.CommandRecordMarker, RecordMarker: &api.RecordMarkerCommand{Name: history.MarkerApprovalRequested,
			ID: "1:" + c, Data: history.Payload{Encoding: "msgpack", Data: b}}})
	}
	if _, err := s.eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: wft.Task.TaskToken, Identity: "w", Commands: cmds}); err != nil {
		t.Fatal(err)
	}
}

// demoHistory runs the demo's PayInvoice (a built-in workflow, which
// cairn replay knows) to completion on a server of its own and exports
// its history to file.
func demoHistory(t *testing.T, file string) {
	t.Helper()
	s := newTestServer(t, false)
	w, err := worker.New(s.c, worker.Options{TaskQueue: demo.TaskQueue, Identity: "demo-worker", GracefulStop: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := demo.Register(w, &demo.Agent{Ledger: filepath.Join(t.TempDir(), "ledger")}, true, true); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	run, err := s.c.StartWorkflow(ctx, client.StartOptions{ID: "pay-INV-1", TaskQueue: demo.TaskQueue}, demo.PayInvoice,
		demo.Invoice{ID: "INV-1", Vendor: "ACME", Amount: 100})
	if err != nil {
		t.Fatal(err)
	}
	var r demo.Receipt
	if err := run.Get(ctx, &r); err != nil {
		t.Fatalf("the demo's run: %v", err)
	}
	s.must(t, "history", "export", "pay-INV-1", "--inline", "-o", file)
	if _, err := os.Stat(file); err != nil {
		t.Fatal(err)
	}
}
