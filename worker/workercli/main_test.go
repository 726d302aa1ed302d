package workercli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
	"github.com/cairnflow/cairn/worker/workercli"
)

// Echo returns its input.
func Echo(ctx sdk.Context, in string) (string, error) { return in, nil }

func register(r worker.Registrar) error { return r.RegisterWorkflow(Echo) }

// export writes a history to a file as `cairn history export` does.
func export(t *testing.T, run history.RunRef, evs []history.Event) string {
	t.Helper()
	var buf bytes.Buffer
	if err := history.ExportJSON(&buf, run, evs); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), run.WorkflowID+".json")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// echoHistory runs Echo and exports its history.
func echoHistory(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := testenv.New(t, testenv.Options{})
	env.RegisterWorkflow(Echo)
	env.Start()
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "echo-1", TaskQueue: env.TaskQueue()}, Echo, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	evs, err := env.Client.GetHistory(ctx, "echo-1", run.RunID())
	if err != nil {
		t.Fatal(err)
	}
	return export(t, history.RunRef{WorkflowID: "echo-1", RunID: run.RunID()}, evs)
}

func mainOf(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = workercli.Main(register, workercli.Options{Name: "echo", Args: args, Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), code
}

// A worker binary's replay speaks JSON with --json, as cairn's commands
// do: its outcome on stdout, its failure as {"code", "message"} on stderr,
// the trace on stderr.
func TestReplayJSON(t *testing.T) {
	ok := echoHistory(t)
	stdout, stderr, code := mainOf("replay", "--history", ok, "--json", "--trace")
	var out map[string]any
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || out["ok"] != true || out["history"] != ok ||
		!strings.Contains(stderr, "waiting at") && !strings.Contains(stderr, "── decision 1") {
		t.Fatalf("replay --json: exit %d\nstdout %s\nstderr %s", code, stdout, stderr)
	}

	unknown := export(t, history.RunRef{WorkflowID: "ship-1", RunID: "r1"},
		[]history.Event{{ID: 1, Time: time.Unix(1, 0).UTC(), Attrs: &history.WorkflowStarted{WorkflowType: "ShipOrder", TaskQueue: "q"}}})
	for _, c := range []struct {
		args []string
		exit int
		code string
		says string
	}{
		{[]string{"replay", "--history", unknown, "--json"}, 1, "unknown_workflow_type", "r.RegisterWorkflow"},
		{[]string{"replay", "--history", filepath.Join(t.TempDir(), "none.json"), "--json"}, 1, "not_found", "none.json"},
		{[]string{"replay", "--json"}, 2, "usage", "history"},
	} {
		stdout, stderr, code := mainOf(c.args...)
		var body map[string]string
		if code != c.exit || stdout != "" || json.Unmarshal([]byte(stderr), &body) != nil || body["code"] != c.code ||
			!strings.Contains(body["message"], c.says) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d and code %q", c.args, code, stdout, stderr, c.exit, c.code)
		}
	}
}
