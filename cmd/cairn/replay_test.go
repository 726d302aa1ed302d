package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// A history whose workflow type cairn replay does not know fails with a
// typed error that names the type and the workflows it knows, and says
// where to replay it — not as an internal error.
func TestReplayUnknownWorkflowType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.json")
	var buf bytes.Buffer
	evs := []history.Event{{ID: 1, Time: time.Unix(1, 0).UTC(), Attrs: &history.WorkflowStarted{WorkflowType: "ShipOrder", TaskQueue: "orders"}}}
	check(t, history.ExportJSON(&buf, history.RunRef{WorkflowID: "ship-1", RunID: "r1"}, evs))
	check(t, os.WriteFile(path, buf.Bytes(), 0o644))

	var out, errb bytes.Buffer
	if code := cli([]string{"replay", "--history", path}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	msg := errb.String()
	for _, want := range []string{`workflow type "ShipOrder"`, "not registered", "PayInvoice", "replay command"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q: %s", want, msg)
		}
	}
	out.Reset()
	errb.Reset()
	if code := cli([]string{"replay", "--json", "--history", path}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Fatalf("--json: exit %d", code)
	}
	var body api.ErrorBody
	check(t, json.Unmarshal(errb.Bytes(), &body))
	if body.Code != "unknown_workflow_type" || !strings.Contains(body.Message, "ShipOrder") {
		t.Fatalf("--json error %+v", body)
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
