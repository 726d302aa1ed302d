package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/cmd/cairn/internal/demo"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// runAssistant runs the invoice assistant of `cairn dev --demo` (an agent
// on the fake model, which streams) on s, asked q, until it answers.
func runAssistant(t *testing.T, s *testServer, id, q string) {
	t.Helper()
	model, err := demo.ServeAssistantModel(0)
	check(t, err)
	t.Cleanup(func() { _ = model.Close() })
	m, err := llm.New(llm.Config{BaseURL: model.URL, Model: demo.AssistantModel})
	check(t, err)
	w, err := worker.New(s.c, worker.Options{TaskQueue: demo.TaskQueue, Identity: "assistant-worker", GracefulStop: time.Second})
	check(t, err)
	check(t, demo.RegisterAssistant(w, &demo.Assistants{}, m))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		check(t, <-done)
	}()
	run, err := s.c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: demo.TaskQueue}, demo.Assistant, demo.Question{Text: q})
	check(t, err)
	check(t, run.Get(ctx, nil))
}

// cairn replay replays the runs `cairn dev --demo` makes, the invoice
// assistant's included (it knew only PayInvoice and PayInvoiceAgent).
func TestReplayTheDemoAssistant(t *testing.T) {
	s := newTestServer(t, false)
	runAssistant(t, s, "assistant-INV-5", "Can we pay INV-5?")
	dir := t.TempDir()
	inline, plain := filepath.Join(dir, "inline.json"), filepath.Join(dir, "plain.json")
	s.must(t, "history", "export", "assistant-INV-5", "--inline", "-o", inline)
	s.must(t, "history", "export", "assistant-INV-5", "-o", plain)
	for _, args := range [][]string{{"replay", "--history", inline}, {"replay", "--history", plain, "--address", s.addr}} {
		out, errs, code := s.run(t, "", args...)
		if code != 0 || !strings.Contains(out, "replay ok") {
			t.Fatalf("cairn %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
		}
	}
}

// A history of a workflow cairn does not know fails naming the type and
// how to replay it — with a worker binary registering it — even when it
// references chunks the file lacks (it used to suggest --inline first).
func TestReplayUnknownTypeSaysHowToRegisterIt(t *testing.T) {
	ref := make([]byte, 32)
	ref[0] = 1
	path := filepath.Join(t.TempDir(), "h.json")
	var buf bytes.Buffer
	evs := []history.Event{{ID: 1, Time: time.Unix(1, 0).UTC(), Attrs: &history.WorkflowStarted{WorkflowType: "ShipOrder", TaskQueue: "orders",
		Input: history.Payload{Encoding: sdk.EncodingMsgpack, Ref: ref}}}}
	check(t, history.ExportJSON(&buf, history.RunRef{WorkflowID: "ship-1", RunID: "r1"}, evs))
	check(t, os.WriteFile(path, buf.Bytes(), 0o644))
	var out, errb bytes.Buffer
	if code := cli([]string{"replay", "--history", path}, strings.NewReader(""), &out, &errb); code != 1 {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
	msg := errb.String()
	for _, want := range []string{`"ShipOrder"`, "r.RegisterWorkflow(ShipOrder)", "workercli.Main", "replay --history FILE", "Assistant"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the message lacks %q: %s", want, msg)
		}
	}
	if strings.Contains(msg, "--inline") {
		t.Errorf("the message suggests --inline: %s", msg)
	}
}
