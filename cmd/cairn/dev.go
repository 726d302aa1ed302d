package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/cmd/cairn/internal/demo"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

func devCommand(g *globals) *cobra.Command {
	var f serverFlags
	var withDemo bool
	cmd := &cobra.Command{
		Use:   "dev [--demo] [--data DIR]",
		Short: "A server and its web UI on this machine, for trying Cairn",
		Long: `Starts a server on loopback over a fresh data directory (removed when it stops;
--data DIR keeps one), with its web UI, and prints where to reach both.

--demo also runs the demo agent's worker in this process (the accounts-payable
agent of ` + "`cairn demo`" + `) and starts a few runs of it, so the UI has
something to show: one that completes, one that fails over budget, one whose
payment provider times out (it pauses until a person resolves it), and one
on a task queue no worker polls; and an invoice assistant (an agent with a
scripted model that streams its answers, made with the agent kit) whose first
run answers at once and whose second waits for a question:

  cairn workflow signal assistant-INV-5 --name ask --input '"Can we pay INV-7?"'

and a third assistant run, assistant-INV-8, allowed one model call: it
pauses on its budget until you raise it (cairn workflow budget, or the UI);
and the accounts-payable agent (demo/payables), pay-INV-9, whose payment
waits for a person's approval (cairn workflow approve|reject, or the UI).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.data == "" {
				dir, err := os.MkdirTemp("", "cairn-dev-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				f.data = filepath.Join(dir, "data")
			}
			hooks := serveHooks{ready: func(apiAddr, uiURL string) { devBanner(g, f, apiAddr, uiURL, withDemo) }}
			if withDemo {
				hooks.actors = func(eng *engine.Engine, _ string) ([]actor, error) { return demoActors(eng, f.data) }
				hooks.pricing = engine.Pricing{demo.AssistantModel: {Input: 0.15, CachedInput: 0.075, Output: 0.6}}
			}
			return serve(cmd.Context(), g, f, hooks)
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "", "data directory (default: a fresh one, removed on exit)")
	cmd.Flags().StringVar(&f.listen, "listen", DefaultAddress, "listen address of the API (loopback)")
	cmd.Flags().StringVar(&f.uiListen, "ui-listen", DefaultUIListen, "listen address of the web UI (loopback)")
	cmd.Flags().StringVar(&f.logLevel, "log-level", "warn", "log level (debug, info, warn, error)")
	cmd.Flags().BoolVar(&withDemo, "demo", false, "run the demo agent's worker in this process, with a few runs to look at")
	cmd.PreRunE = func(cmd *cobra.Command, _ []string) error {
		for _, l := range []struct{ flag, addr string }{{"--listen", f.listen}, {"--ui-listen", f.uiListen}} {
			if ok, err := isLoopback(l.flag, l.addr); err != nil || !ok {
				return usagef("cairn dev listens on loopback only (%s %s): use cairn server with a token to serve others", l.flag, l.addr)
			}
		}
		f.maxSessions = 1024
		// No default retention (the data is the developer's, often
		// removed on exit), but a start's own retention is honoured.
		f.sweepEvery = engine.DefaultRetentionSweepInterval
		return nil
	}
	return cmd
}

// devOut is dev's --json: where everything is.
type devOut struct {
	Address string
	UI      string
	Data    string
	Demo    bool
}

func devBanner(g *globals, f serverFlags, apiAddr, uiURL string, withDemo bool) {
	if g.json {
		_ = printJSON(g.stdout, devOut{apiAddr, uiURL, f.data, withDemo})
		return
	}
	w := g.stdout
	fmt.Fprintf(w, "Cairn dev server\n\n  Web UI   %s\n  API      %s   (cairn workflow list --address %s; workers: --address %s)\n  Data     %s\n",
		uiURL, apiAddr, apiAddr, apiAddr, f.data)
	if withDemo {
		fmt.Fprintf(w, "  Demo     the demo agent's worker runs in this process on task queue %s; it started:\n", demo.TaskQueue)
		for _, r := range devRuns {
			fmt.Fprintf(w, "             %-16s %s\n", r.id, r.what)
		}
		fmt.Fprintf(w, "             %-16s an agent (scripted model): run 1 answered; run 2 waits for your question:\n", assistantID)
		fmt.Fprintf(w, "             %-16s cairn workflow signal %s --name %s --input '\"Can we pay INV-7?\"' --address %s\n", "", assistantID, demo.AskSignal, apiAddr)
		fmt.Fprintf(w, "             %-16s an agent allowed one model call: paused on its budget until you raise it:\n", budgetID)
		fmt.Fprintf(w, "             %-16s cairn workflow budget %s --max-turns 4 --reason \"worth finishing\" --address %s\n", "", budgetID, apiAddr)
		fmt.Fprintf(w, "             %-16s the accounts-payable agent: its payment waits for your approval (Paused page):\n", approvalID)
		fmt.Fprintf(w, "             %-16s cairn workflow approve %s --reason \"INV-9 checked\" --address %s\n", "", approvalID, apiAddr)
	}
	fmt.Fprintf(w, "\nCtrl-C stops it.\n")
}

// devRuns are the runs --demo starts.
var devRuns = []struct {
	id, queue, what string
	inv             demo.Invoice
}{
	{"invoice-INV-1", demo.TaskQueue, "pays $1,250 to ACME and completes", demo.Invoice{ID: "INV-1", Vendor: "ACME", Amount: 1250}},
	{"invoice-INV-2", demo.TaskQueue, "the provider times out: paused until you resolve it (Paused page)", demo.Invoice{ID: "INV-2", Vendor: "Globex", Amount: 4200}},
	{"invoice-INV-3", demo.TaskQueue, "over budget: fails", demo.Invoice{ID: "INV-3", Vendor: "Initech", Amount: 12000}},
	{"invoice-INV-4", "accounts-payable-eu", "on a queue no worker polls: stuck (Task queues page)", demo.Invoice{ID: "INV-4", Vendor: "Umbrella", Amount: 300}},
}

// assistantID is the workflow id of the demo's two assistant runs, and
// budgetID that of the assistant run that pauses on its budget.
const (
	assistantID = "assistant-INV-5"
	budgetID    = "assistant-INV-8"
)

// assistantChunkDelay paces the fake model's streamed pieces, so that a
// person (or the browser test) sees an answer arrive.
const assistantChunkDelay = 150 * time.Millisecond

// demoActors runs the demo agent's worker over the engine and starts the
// demo's runs (again after a restart over the same data: an id that ran
// already is left as it is).
func demoActors(eng *engine.Engine, data string) ([]actor, error) {
	c := client.NewLocal(eng, client.Options{Identity: "cairn dev"})
	a := &demo.Agent{Ledger: data + "-provider-ledger.jsonl",
		TimesOut: func(p demo.Payment) bool { return p.Invoice == "INV-2" }}
	w, err := worker.New(c, worker.Options{TaskQueue: demo.TaskQueue, Identity: "cairn-dev-demo-worker", GracefulStop: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	if err := demo.Register(w, a, true, false); err != nil {
		return nil, err
	}
	model, err := demo.ServeAssistantModel(assistantChunkDelay)
	if err != nil {
		return nil, err
	}
	m, err := llm.New(llm.Config{BaseURL: model.URL, Model: demo.AssistantModel})
	if err != nil {
		_ = model.Close()
		return nil, err
	}
	if err := demo.RegisterAssistant(w, &demo.Assistants{}, m); err != nil {
		_ = model.Close()
		return nil, err
	}
	approvals, err := payablesActor(c, data)
	if err != nil {
		_ = model.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return []actor{approvals, {
		run: func() error {
			for _, r := range devRuns {
				_, err := c.StartWorkflow(ctx, client.StartOptions{ID: r.id, TaskQueue: r.queue, ReusePolicy: api.RejectDuplicate}, demo.PayInvoice, r.inv)
				if err != nil && !errors.Is(err, api.ErrAlreadyStarted) {
					return fmt.Errorf("start %s: %w", r.id, err)
				}
			}
			go startAssistant(ctx, c)
			defer model.Close()
			return w.Run(ctx)
		},
		interrupt: func(error) { cancel() },
	}}, nil
}

// startAssistant starts the assistant's first run with a question, and
// once it answered, a second run of the same workflow id that waits for
// one: two runs of one id to compare side by side; and a run allowed one
// model call, which pauses on its budget.
func startAssistant(ctx context.Context, c client.Client) {
	_, _ = c.StartWorkflow(ctx, client.StartOptions{ID: budgetID, TaskQueue: demo.TaskQueue, ReusePolicy: api.RejectDuplicate}, demo.Assistant,
		demo.Question{Text: "Can we pay INV-8?", Budget: history.Budget{MaxTurns: 1}})
	if _, err := c.DescribeWorkflow(ctx, assistantID, ""); err == nil {
		return // started before (a data directory given again)
	}
	run, err := c.StartWorkflow(ctx, client.StartOptions{ID: assistantID, TaskQueue: demo.TaskQueue}, demo.Assistant, demo.Question{Text: "Can we pay INV-5?"})
	if err != nil {
		return
	}
	if err := run.Get(ctx, nil); err != nil {
		return
	}
	_, _ = c.StartWorkflow(ctx, client.StartOptions{ID: assistantID, TaskQueue: demo.TaskQueue}, demo.Assistant, demo.Question{})
}
