package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
)

// AgentOptions configure RunAgent.
type AgentOptions struct {
	Out   io.Writer
	Color bool
	// WorkerCommand builds the command of one agent worker process with the
	// given arguments (cairn's hidden `demo agent-worker`).
	WorkerCommand func(args ...string) *exec.Cmd
	// Dir holds the data (default: a temporary directory, removed).
	Dir string
}

// AgentWorkflowID is the agent demo's run.
const AgentWorkflowID = "pay-INV-9"

// RunAgent plays the accounts-payable agent driven by a (scripted) model:
// a worker process reads the invoice and checks the budget with the
// model's tool calls, the model asks to pay, the run waits for a person —
// and the worker is killed with SIGKILL. A fresh worker process resumes:
// it replays the history (no model call, no tool runs again), the person
// approves, the agent pays once and e-mails once. The model server runs in
// this process, so every model call is counted.
func RunAgent(ctx context.Context, opts AgentOptions) error {
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "cairn-agent-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	p := &printer{w: opts.Out, color: opts.Color}
	p.title("an accounts-payable agent driven by a model, killed with SIGKILL mid-turn")
	st, err := badgerstore.Open(badgerstore.Options{Dir: filepath.Join(dir, "cairn-data")})
	if err != nil {
		return err
	}
	defer st.Close()
	eng, err := engine.Open(engine.Options{Store: st, Pricing: engine.Pricing{payables.FakeModel: {Input: 0.15, CachedInput: 0.075, Output: 0.6}}})
	if err != nil {
		return err
	}
	defer eng.Close()
	srv, addr, err := serveOn(httpapi.NewHandler(eng, httpapi.Options{}))
	if err != nil {
		return err
	}
	defer srv.Close()
	model := fakellm.NewFunc(payables.Reply)
	msrv, maddr, err := serveOn(model)
	if err != nil {
		return err
	}
	defer msrv.Close()
	tools := &payables.Tools{Dir: dir}
	c := client.NewLocal(eng, client.Options{Identity: "ap-desk"})
	d := &agentDemo{ctx: ctx, p: p, c: c, eng: eng, tools: tools, model: model, opts: opts,
		args: []string{"--address", addr, "--model-url", maddr + "/v1", "--dir", dir}}
	defer d.stopWorkers()
	return d.play()
}

type agentDemo struct {
	ctx     context.Context
	p       *printer
	c       client.Client
	eng     *engine.Engine
	tools   *payables.Tools
	model   *fakellm.Server
	opts    AgentOptions
	args    []string
	workers []*exec.Cmd
}

func serveOn(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

func (d *agentDemo) worker() (*exec.Cmd, error) {
	cmd := d.opts.WorkerCommand(d.args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent worker: %w", err)
	}
	d.workers = append(d.workers, cmd)
	return cmd, nil
}

func (d *agentDemo) stopWorkers() {
	for _, w := range d.workers {
		if w.ProcessState == nil {
			_ = w.Process.Kill()
			_ = w.Wait()
		}
	}
}

func (d *agentDemo) play() error {
	p := d.p
	w1, err := d.worker()
	if err != nil {
		return err
	}
	run, err := d.c.StartWorkflow(d.ctx, client.StartOptions{ID: AgentWorkflowID, TaskQueue: payables.TaskQueue}, payables.PayInvoiceAgent,
		payables.Task{InvoiceID: "INV-9"}) // streams by default
	if err != nil {
		return err
	}
	p.line("  ▶  agent started: \"Pay invoice INV-9.\" (workflow %s, worker process %d)", AgentWorkflowID, w1.Process.Pid)
	if err := d.waitMarker(history.MarkerApprovalRequested); err != nil {
		return err
	}
	if err := d.showTranscript(); err != nil {
		return err
	}
	before := d.model.Calls()
	callsBefore, _ := d.tools.Calls()
	p.warn("  ⏸  the model asked to pay $4,200 to ACME; the run waits for a person's approval")
	_ = w1.Process.Signal(syscall.SIGKILL)
	_ = w1.Wait()
	p.line("  ☠  worker process %d killed with SIGKILL, mid-turn (%d model calls and %d tool calls so far)", w1.Process.Pid, before, len(callsBefore))
	w2, err := d.worker()
	if err != nil {
		return err
	}
	p.line("  ↻  a fresh worker process %d takes over: it replays the history instead of asking the model again", w2.Process.Pid)
	if err := d.c.SignalWorkflow(d.ctx, AgentWorkflowID, "", agent.ApprovalSignal, agent.Approval{Approved: true, By: "ap-clerk@acme"}); err != nil {
		return err
	}
	p.line("  🧑 ap-clerk@acme approves the payment")
	wctx, cancel := context.WithTimeout(d.ctx, 90*time.Second)
	defer cancel()
	var res agent.Result
	if err := run.Get(wctx, &res); err != nil {
		return err
	}
	if err := d.showTranscript(); err != nil {
		return err
	}
	p.good("  ✓ %s", res.Final)
	return d.check(before)
}

// check verifies and reports that nothing ran twice.
func (d *agentDemo) check(before int64) error {
	p := d.p
	calls, err := d.tools.Calls()
	if err != nil {
		return err
	}
	count := map[string]int{}
	for _, c := range calls {
		count[strings.Fields(c)[0]]++
	}
	pays, _ := d.tools.Payments()
	mails, _ := d.tools.Outbox()
	turns := int64(payables.Turns)
	p.line("  model calls: %d for %d turns (%d before the kill, %d after: none repeated)", d.model.Calls(), turns, before, d.model.Calls()-before)
	p.line("  tools run:   ReadInvoice %d, CheckBudget %d, SendPayment %d, EmailVendor %d", count["ReadInvoice"], count["CheckBudget"],
		count["SendPayment"], count["EmailVendor"])
	p.line("  provider:    %d payment, %d e-mail", len(pays), len(mails))
	if d.model.Calls() != turns {
		return fmt.Errorf("the model was called %d times for %d turns", d.model.Calls(), turns)
	}
	for _, tool := range []string{"ReadInvoice", "CheckBudget", "SendPayment", "EmailVendor"} {
		if count[tool] != 1 {
			return fmt.Errorf("%s ran %d times", tool, count[tool])
		}
	}
	if len(pays) != 1 || len(mails) != 1 {
		return fmt.Errorf("%d payments and %d e-mails, want one of each", len(pays), len(mails))
	}
	desc, err := d.c.DescribeWorkflow(d.ctx, AgentWorkflowID, "")
	if err != nil {
		return err
	}
	if u := desc.Usage; u != nil {
		p.line("  usage:       %d tokens over %d model calls, $%.6f", u.Total.Tokens(), u.Calls, u.Total.CostUSD)
	}
	p.good("  ✓ killed mid-turn and resumed: no model call and no tool call was made twice")
	return nil
}

// waitMarker long-polls the history for a marker.
func (d *agentDemo) waitMarker(name string) error {
	ctx, cancel := context.WithTimeout(d.ctx, 60*time.Second)
	defer cancel()
	from := int64(1)
	for {
		resp, err := d.eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: AgentWorkflowID, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", name, err)
		}
		for _, ev := range resp.Events {
			if m, ok := ev.Attrs.(*history.MarkerRecorded); ok && m.Name == name {
				return nil
			}
		}
		from = resp.NextEventID
		if resp.Closed {
			return fmt.Errorf("the run closed before %s", name)
		}
	}
}

// showTranscript prints the conversation so far (GetTranscript).
func (d *agentDemo) showTranscript() error {
	tr, err := d.eng.GetTranscript(d.ctx, &api.GetTranscriptRequest{WorkflowID: AgentWorkflowID})
	if err != nil {
		return err
	}
	p := d.p
	p.line("  ── transcript (%s)", tr.Status)
	for _, it := range tr.Items {
		switch {
		case it.Message != nil && it.Message.Role != "system":
			m := it.Message
			text := m.Content
			if m.Role == "tool" {
				text = abbrev(text, 70)
			}
			if text != "" {
				p.line("     %-9s %s", m.Role, text)
			}
		case it.ToolCall != nil:
			t := it.ToolCall
			state := t.State
			if t.ScheduledEventID != 0 {
				state = t.Effect.String() + " " + state
			}
			p.line("     → %s(%s)  [%s]", t.Name, abbrev(t.Arguments, 60), state)
		}
	}
	return nil
}

func abbrev(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
