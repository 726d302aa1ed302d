package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// The worker keeps the fake providers' files in a data directory it
// names when it starts — by default in the user's cache directory — and
// writes nothing into the directory it runs in (it wrote calls.log,
// payments.jsonl and outbox.jsonl there).
func TestStateFilesGoToTheDataDirectory(t *testing.T) {
	cwd, cache := t.TempDir(), t.TempDir()
	t.Chdir(cwd)
	t.Setenv("XDG_CACHE_HOME", cache) // os.UserCacheDir on Linux
	t.Setenv("HOME", cache)           // and elsewhere
	env := testenv.New(t, testenv.Options{NoTimeSkipping: true, TaskQueue: payables.TaskQueue})
	var log bytes.Buffer
	if err := register(env.Worker, func(string) string { return "" }, &log); err != nil {
		t.Fatal(err)
	}
	env.Start()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	off := false // no approval wanted: an invoice over budget is declined without one
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "pay-INV-7", TaskQueue: payables.TaskQueue}, payables.PayInvoiceAgent,
		payables.Task{InvoiceID: "INV-7", Stream: &off})
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
		t.Fatalf("the worker wrote into its working directory: %v", entries)
	}
	dir, err := dataDir(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dir, cache) || !strings.Contains(log.String(), dir) {
		t.Fatalf("data directory %s (cache %s); the worker said %q", dir, cache, log.String())
	}
	if calls, err := os.ReadFile(filepath.Join(dir, "calls.log")); err != nil || !strings.Contains(string(calls), "ReadInvoice") {
		t.Fatalf("calls.log in %s: %q %v", dir, calls, err)
	}
	if d, _ := dataDir(func(k string) string { return map[string]string{"PAYABLES_DIR": "mine"}[k] }); d != filepath.Join(cwd, "mine") {
		t.Fatalf("PAYABLES_DIR=mine: %s", d)
	}
}
