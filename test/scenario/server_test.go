//go:build linux

package scenario_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// cairnBin builds the cairn binary once for the package.
var cairnBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cairn-scenario-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cairn")
	out, err := exec.Command("go", "build", "-o", bin, "../../cmd/cairn").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// startServer runs `cairn server` on a fresh data directory and returns its
// API address; the process is killed and reaped when the test ends.
func startServer(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := cairnBin()
	must(t, err)
	args = append([]string{"server", "--data", filepath.Join(t.TempDir(), "data"), "--listen", "127.0.0.1:0",
		"--ui-listen", "off", "--log-level", "info"}, args...)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	addr := make(chan string, 1)
	exited := make(chan struct{})
	var mu sync.Mutex
	var logs []string
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			mu.Lock()
			logs = append(logs, sc.Text())
			mu.Unlock()
			var line struct{ Message, Listen string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "cairn server ready" {
				addr <- line.Listen
			}
		}
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	select {
	case a := <-addr:
		return a
	case <-exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("cairn server exited before it was ready:\n%s", strings.Join(logs, "\n"))
	case <-time.After(time.Minute):
		t.Fatal("cairn server not ready within a minute")
	}
	return ""
}

// readSSE follows the run's Server-Sent Events until `event: closed`.
func readSSE(ctx context.Context, url string, v *streamView) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return fmt.Errorf("stream: %s, %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var event, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		case line == "":
			switch event {
			case "closed":
				return nil
			case "gap":
				return fmt.Errorf("a gap in the stream")
			case "text", "tool_call", "done", "superseded":
				var ev api.StreamEvent
				if err := json.Unmarshal([]byte(data), &ev); err != nil {
					return fmt.Errorf("event %s %q: %w", event, data, err)
				}
				if string(ev.Kind) != event {
					return fmt.Errorf("event %s carries kind %q", event, ev.Kind)
				}
				v.add(ev)
			}
			event, data = "", ""
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return fmt.Errorf("the stream ended without a closed event")
}

// Against a real `cairn server` with a price table: an agent run crosses
// its cost budget and is paused with kind "budget" (describe over HTTP
// shows it and what was spent), raising the budget finishes it, and a
// browser-style SSE reader of the run's stream sees the final answer
// exactly once although its first attempt was cut.
func TestServerCostBudgetAndSSEStream(t *testing.T) {
	ctx := testCtx(t)
	prices := filepath.Join(t.TempDir(), "prices.json")
	// 1,000 USD per million prompt tokens: 600 tokens cost 0.60.
	must(t, os.WriteFile(prices, []byte(`{"fake-1": {"input": 1000, "output": 0}}`), 0o600))
	addr := startServer(t, "--pricing", prices)

	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		s := fakellm.Script{
			fakellm.CallTool("ReadInvoice", `{"id":"INV-5"}`),
			fakellm.CallTool("CheckVendor", `{"id":"INV-5"}`),
			{Content: finalText, Faults: []fakellm.Reply{{Content: finalText, CutAfter: 3}}},
		}
		rep := s[min(r.Turn, len(s)-1)]
		rep.PromptTokens, rep.CompletionTokens = 600, 5
		return rep
	})
	hs := httptest.NewServer(model)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", Model: "fake-1"})
	must(t, err)

	c, err := client.Dial(addr, client.Options{}, client.DialOptions{})
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	w, err := worker.New(c, worker.Options{TaskQueue: "scenario", Identity: "scenario-worker"})
	must(t, err)
	p := newProvider()
	register(t, w, m, p)
	wctx, stop := context.WithCancel(context.Background())
	wdone := make(chan error, 1)
	go func() { wdone <- w.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-wdone; err != nil {
			t.Errorf("worker: %v", err)
		}
	})

	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "cost-INV-5", TaskQueue: "scenario"}, Payables,
		Task{InvoiceID: "INV-5", Budget: history.Budget{MaxCostUSD: 1}, Stream: true})
	must(t, err)
	v := newStreamView()
	sse := make(chan error, 1)
	go func() { sse <- readSSE(ctx, "http://"+addr+"/api/v1/stream/cost-INV-5", v) }()

	waitEvent(t, ctx, c, "cost-INV-5", "", "BudgetExceeded", func(ev history.Event) bool {
		_, ok := ev.Attrs.(*history.BudgetExceeded)
		return ok
	})
	d, err := c.DescribeWorkflow(ctx, "cost-INV-5", "")
	must(t, err)
	if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseBudget {
		t.Fatalf("describe: status %v, pause %+v", d.Info.Status, d.Info.Pause)
	}
	if d.Usage == nil || d.Usage.Total.CostUSD < 1 || d.Budget == nil || d.Budget.Used.CostUSD < 1 || len(d.Budget.Held) != 1 {
		t.Fatalf("usage %+v, budget %+v", d.Usage, d.Budget)
	}
	if model.Calls() != 2 {
		t.Fatalf("%d model calls before the pause, want 2", model.Calls())
	}
	_, err = c.Service().UpdateBudget(ctx, &api.UpdateBudgetRequest{WorkflowID: "cost-INV-5", Budget: history.Budget{MaxCostUSD: 5},
		Identity: "ada", Reason: "worth finishing"})
	must(t, err)
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != finalText || res.StopReason != "final" {
		t.Fatalf("result %+v", res)
	}
	must(t, <-sse)
	v.check(t)
}
