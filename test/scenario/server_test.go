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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// startServer runs `cairn server` on a fresh store and returns its
// API address; the process is killed and reaped when the test ends.
func startServer(t *testing.T, args ...string) string {
	t.Helper()
	return testkit.StartServer(t.Context(), t, testkit.ServerOptions{Args: append([]string{"--log-level", "info"}, args...)}).Addr
}

// readSSE follows the run's Server-Sent Events until `event: closed`.
func readSSE(ctx context.Context, url string, v *streamView) error {
	_, err := readSSEFrom(ctx, url, "", 0, v)
	return err
}

// readSSEFrom connects with Last-Event-ID lastID (when set) and reads
// until `event: closed`, or until it has read stopAfter events (when > 0),
// when it hangs up as a browser tab losing its connection would; it
// returns the last event id read.
func readSSEFrom(ctx context.Context, url, lastID string, stopAfter int, v *streamView) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return lastID, err
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	read := 0
	err = func() error {
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
		var event, data, id string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
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
					lastID = id
					if read++; stopAfter > 0 && read == stopAfter {
						return nil
					}
				}
				event, data, id = "", "", ""
			}
		}
		if err := sc.Err(); err != nil {
			return err
		}
		return fmt.Errorf("the stream ended without a closed event")
	}()
	return lastID, err
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
	c, _ := startWorker(t, addr, model)

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

// startWorker runs an in-process worker against the server until the test
// ends.
func startWorker(t *testing.T, addr string, model *fakellm.Server) (client.Client, *Provider) {
	t.Helper()
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
	return c, p
}

// The operator's side with the real binary, as docs/agents.md shows it: a
// call awaiting approval is approved with `cairn workflow signal --name
// approve --input '{…}'` (JSON from the command line), and `cairn workflow
// watch --json` prints the run's stream, in which the final answer's text
// appears exactly once, the cut attempt marked superseded.
func TestCLIApproveAndWatch(t *testing.T) {
	ctx := testCtx(t)
	addr := startServer(t)
	model := fakellm.New(fakellm.Script{
		fakellm.CallTool("SendPayment", `{"invoice_id":"INV-6","amount":3}`),
		{Content: finalText, Faults: []fakellm.Reply{{Content: finalText, CutAfter: 3}}},
	})
	c, p := startWorker(t, addr, model)
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "cli-INV-6", TaskQueue: "scenario"}, Payables,
		Task{InvoiceID: "INV-6", Approve: true, Stream: true})
	must(t, err)
	watched := make(chan string, 1)
	watchErr := make(chan error, 1)
	go func() {
		out, err := testkit.CLI(ctx, t, addr, "workflow", "watch", "cli-INV-6", "--json")
		watched <- out.Stdout
		watchErr <- err
	}()
	waitEvent(t, ctx, c, "cli-INV-6", "", "approval requested", isMarker(history.MarkerApprovalRequested))
	if _, err := testkit.CLI(ctx, t, addr, "workflow", "signal", "cli-INV-6", "--name", "approve",
		"--input", `{"Approved":true,"By":"ap-clerk"}`); err != nil {
		t.Fatal(err)
	}
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if pay, _, _, _, _ := p.snapshot(); pay != 1 || res.Final != finalText {
		t.Fatalf("%d payments, result %+v", pay, res)
	}
	out := <-watched
	must(t, <-watchErr)
	v := newStreamView()
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev api.StreamEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("watch --json line %q: %v", line, err)
		}
		v.add(ev)
	}
	v.check(t)
	if got := toolCalls(t, ctx, c, "cli-INV-6", "")["SendPayment"]; len(got) != 1 || got[0].ApprovedBy != "ap-clerk" {
		t.Fatalf("approved call %+v", got)
	}
}

// `cairn workflow budget` as docs/agents.md shows it: a run paused on its
// token budget goes on after `--max-tokens N --reason …`; a second run
// paused likewise ends after `--stop`, failed with the agent's
// ErrBudgetExceeded.
func TestCLIBudgetRaiseAndStop(t *testing.T) {
	ctx := testCtx(t)
	addr := startServer(t)
	model := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		rep := readLoop("Both read.")[min(r.Turn, 2)]
		rep.PromptTokens, rep.CompletionTokens = 600, 10
		return rep
	})
	c, _ := startWorker(t, addr, model)
	for _, id := range []string{"cli-raise", "cli-stop"} {
		_, err := c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: "scenario"}, Payables,
			Task{InvoiceID: id, Budget: history.Budget{MaxTokens: 1000}})
		must(t, err)
		waitEvent(t, ctx, c, id, "", "BudgetExceeded", func(ev history.Event) bool {
			_, ok := ev.Attrs.(*history.BudgetExceeded)
			return ok
		})
		d, err := c.DescribeWorkflow(ctx, id, "")
		must(t, err)
		if d.Info.Status != api.StatusPaused || d.Info.Pause == nil || d.Info.Pause.Kind != api.PauseBudget {
			t.Fatalf("%s: status %v, pause %+v", id, d.Info.Status, d.Info.Pause)
		}
	}
	if _, err := testkit.CLI(ctx, t, addr, "workflow", "budget", "cli-raise", "--max-tokens", "200000", "--reason", "worth finishing"); err != nil {
		t.Fatal(err)
	}
	var res agent.Result
	must(t, c.GetWorkflow(ctx, "cli-raise", "").Get(ctx, &res))
	if res.Final != "Both read." {
		t.Fatalf("raised run: %+v", res)
	}
	if _, err := testkit.CLI(ctx, t, addr, "workflow", "budget", "cli-stop", "--stop", "--reason", "enough"); err != nil {
		t.Fatal(err)
	}
	err := c.GetWorkflow(ctx, "cli-stop", "").Get(ctx, nil)
	if err == nil || !strings.Contains(err.Error(), agent.ErrBudgetExceeded.Error()) {
		t.Fatalf("stopped run ended with %v", err)
	}
}

// A browser's EventSource that loses its connection mid-answer reconnects
// with Last-Event-ID and resumes after it: no event is lost or repeated,
// and the final answer is shown exactly once.
func TestSSEReconnectResumesAfterLastEventID(t *testing.T) {
	ctx := testCtx(t)
	addr := startServer(t)
	model := fakellm.New(streamScript())
	model.ChunkDelay = 2 * time.Millisecond // the answer is still streaming when the tab drops
	c, _ := startWorker(t, addr, model)
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: "sse-resume", TaskQueue: "scenario"}, Payables,
		Task{InvoiceID: "INV-5", Stream: true})
	must(t, err)
	url := "http://" + addr + "/api/v1/stream/sse-resume?run=" + run.RunID()
	v := newStreamView()
	last, err := readSSEFrom(ctx, url, "", 4, v)
	must(t, err)
	if last == "" {
		t.Fatal("no event id to resume from")
	}
	_, err = readSSEFrom(ctx, url, last, 0, v)
	must(t, err)
	must(t, run.Get(ctx, nil))
	v.check(t)
}
