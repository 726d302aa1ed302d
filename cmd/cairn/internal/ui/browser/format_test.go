package browser

import (
	"context"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// The UI's formatters of durations and of times ago, as the browser runs
// them: a value rounds up into the next unit ("12m 0s", not "11m 60s").
func TestWebUIFormatsDurations(t *testing.T) {
	exe := chromium(t)
	srv := httptest.NewServer(ui.New(memEngine(t), ui.Options{}))
	t.Cleanup(srv.Close)
	ctx, _ := browse(t, exe)
	run(t, ctx, "open the UI", chromedp.Navigate(srv.URL+"/runs"), until(`document.querySelector("#runs-table") !== null`))

	durations := []struct {
		ms   float64
		want string
	}{
		{0, "0"}, {0.4, "<1ms"}, {250, "250ms"}, {999.4, "999ms"}, {999.6, "1.00s"}, {1234, "1.23s"},
		{9994, "9.99s"}, {9996, "10.0s"}, {59_940, "59.9s"}, {59_960, "1m 0s"}, {90_400, "1m 30s"},
		{719_400, "11m 59s"}, {719_500, "12m 0s"}, {3_599_499, "59m 59s"}, {3_599_500, "1h 0m"},
		{5_400_000, "1h 30m"}, {7_199_999, "2h 0m"}, {90_000_000, "25h 0m"},
	}
	for _, c := range durations {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			`import("/static/lib.js").then((m) => m.fmtMs(`+jsNumber(c.ms)+`))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("fmtMs(%v) = %q, want %q", c.ms, got, c.want)
		}
	}

	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	agos := []struct {
		before time.Duration
		want   string
	}{
		{400 * time.Millisecond, "400ms ago"}, {9970 * time.Millisecond, "9.9s ago"}, {59_700 * time.Millisecond, "59s ago"},
		{90 * time.Second, "1m 30s ago"}, {599_900 * time.Millisecond, "9m 59s ago"}, {11 * time.Minute, "11m ago"},
		{3*time.Hour + 59*time.Minute + 59*time.Second, "3h 59m ago"}, {72 * time.Hour, "3d ago"}, {-90 * time.Second, "in 1m 30s"},
	}
	for _, c := range agos {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](
			`import("/static/lib.js").then((m) => m.ago(`+jsString(now.Add(-c.before).Format(time.RFC3339Nano))+`, `+jsNumber(float64(now.UnixMilli()))+`))`,
			chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("ago(%v before) = %q, want %q", c.before, got, c.want)
		}
	}
}

// jsNumber writes f for a script.
func jsNumber(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// memEngine is an engine on an in-memory store, closed by the test's
// cleanup.
func memEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	return eng
}

// A payload's integers are shown as they are, also those a JavaScript
// number cannot hold exactly (an int64 id, a time in nanoseconds): what
// the run page shows can be pasted back as the same value.
func TestWebUIShowsBigIntegersExactly(t *testing.T) {
	exe := chromium(t)
	eng := memEngine(t)
	const input = `{"ID":9007199254740993,"At":1764627123456789012,"Small":42,"Ratio":0.1,"Neg":-9223372036854775808}`
	if _, err := eng.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "big-1", WorkflowType: "Pay", TaskQueue: "q",
		Input: history.Payload{Encoding: "json", Data: []byte(input)}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(ui.New(eng, ui.Options{}))
	t.Cleanup(srv.Close)
	ctx, _ := browse(t, exe)
	run(t, ctx, "open the run",
		chromedp.Navigate(srv.URL+"/runs/big-1"),
		until(`document.querySelector("#io pre") !== null && document.querySelector("#timeline tr[data-detail='1'] pre") !== null`),
	)
	shown, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#io pre").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	event, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#timeline tr[data-detail='1'] pre").textContent`)) // folded: not visible
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"ID": 9007199254740993`, `"At": 1764627123456789012`, `"Small": 42`, `"Ratio": 0.1`, `"Neg": -9223372036854775808`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the input shown lacks %s:\n%s", want, shown)
		}
		if !strings.Contains(event, want) {
			t.Errorf("the expanded WorkflowStarted lacks %s:\n%s", want, event)
		}
	}
}
