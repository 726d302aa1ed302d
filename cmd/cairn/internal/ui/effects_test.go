package ui

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// Notify sends one idempotent notice.
func Notify(ctx sdk.Context, to string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivity(ctx, Mail, to).Get(ctx)
}

// Mail is an Idempotent activity: it has a ledger entry.
func Mail(_ context.Context, to string) (string, error) { return "sent to " + to, nil }

// The ledger the effects page reads names an entry's runs "runIds" — the
// key effects.js reads (the JSON said "runIDs", and the page showed no
// runs) — and an empty ledger is an empty list.
func TestEffectsAPINamesTheRuns(t *testing.T) {
	eng := newEngine(t)
	b := newBrowser(t, New(eng, Options{}))
	var v struct {
		Effects []map[string]json.RawMessage `json:"effects"`
	}
	code, body, _ := b.do("GET", "/api/effects", "", nil)
	if code != 200 || body != `{"effects":[]}` {
		t.Fatalf("an empty ledger: %d %s", code, body)
	}
	c := client.NewLocal(eng, client.Options{})
	w, err := worker.New(c, worker.Options{TaskQueue: "mail", Identity: "ui-test", GracefulStop: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterWorkflow(Notify); err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterActivity(Mail, activities.Options{Effect: activities.Idempotent}); err != nil {
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
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "notify-1", TaskQueue: "mail"}, Notify, "ada")
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Get(ctx, nil); err != nil {
		t.Fatal(err)
	}
	code, body, _ = b.do("GET", "/api/effects", "", nil)
	if code != 200 || json.Unmarshal([]byte(body), &v) != nil || len(v.Effects) != 1 {
		t.Fatalf("the ledger: %d %s", code, body)
	}
	var runs []string
	if err := json.Unmarshal(v.Effects[0]["runIds"], &runs); err != nil || len(runs) != 1 || runs[0] != run.RunID() {
		t.Fatalf("the entry's runs: %s", body)
	}
}
