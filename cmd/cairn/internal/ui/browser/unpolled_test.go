package browser

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/clock"
)

// A run whose workflow task waits on a task queue no worker has polled
// says so on its page, with where to look.
func TestWebUISaysNoWorkerPollsTheQueue(t *testing.T) {
	exe := chromium(t)
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Now().Add(-time.Minute))
	eng, err := engine.Open(engine.Options{Store: st, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	if _, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "lonely", WorkflowType: "PayInvoice",
		TaskQueue: "nobody-polls"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	srv := httptest.NewServer(ui.New(eng, ui.Options{}))
	t.Cleanup(srv.Close)
	ctx, _ := browse(t, exe)
	run(t, ctx, "open the run",
		chromedp.Navigate(srv.URL+"/runs/lonely"),
		until(`document.querySelector("#waiting .unpolled") !== null`),
	)
	w := textOf(t, ctx, "#waiting")
	for _, want := range []string{"Waiting for a worker", `no worker has ever polled task queue "nobody-polls" for workflow tasks (since the engine started 30 s ago)`,
		"is a worker running on task queue nobody-polls?"} {
		if !strings.Contains(w, want) {
			t.Errorf("the run page does not say %q:\n%s", want, w)
		}
	}
	shot(t, ctx, screenshotDir(t), "run-unpolled")
}
