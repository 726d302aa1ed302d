package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/cmd/cairn/internal/demo"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// demoAgentCommand is `cairn demo agent`.
func demoAgentCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Watch a model-driven agent killed with SIGKILL mid-turn resume without calling the model or a tool again",
		Long: `Runs the accounts-payable agent of examples/agent, driven by a scripted model
served by this process: it reads the invoice and checks the budget through
the model's tool calls; the model asks to pay and the run waits for a
person; the worker process is killed with SIGKILL; a fresh one resumes from
the history, the person approves, and the agent pays once and e-mails once.
Every model call and tool call is counted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			out := g.stdout
			if g.json {
				out = g.stderr // the narration; the outcome goes to stdout
			}
			if err := demo.RunAgent(cmd.Context(), demo.AgentOptions{Out: out, Color: g.color, WorkerCommand: func(args ...string) *exec.Cmd {
				return exec.Command(exe, append([]string{"demo", "agent-worker"}, args...)...)
			}}); err != nil {
				return err
			}
			return g.emit(map[string]any{"demo": "agent", "ok": true}, func(io.Writer) {})
		},
	}
	return cmd
}

// demoAgentWorkerCommand is the agent demo's worker process.
func demoAgentWorkerCommand() *cobra.Command {
	var address, modelURL, dir string
	cmd := &cobra.Command{
		Use:    "agent-worker",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client.Dial(address, client.Options{}, client.DialOptions{})
			if err != nil {
				return err
			}
			m, err := llm.New(llm.Config{BaseURL: modelURL, Model: payables.FakeModel})
			if err != nil {
				return err
			}
			w, err := worker.New(c, worker.Options{TaskQueue: payables.TaskQueue, StopOnSignals: true})
			if err != nil {
				return err
			}
			if err := payables.Register(w, &payables.Tools{Dir: dir}, m); err != nil {
				return err
			}
			return w.Run(context.Background())
		},
	}
	f := cmd.Flags()
	f.StringVar(&address, "address", "", "server address")
	f.StringVar(&modelURL, "model-url", "", "model endpoint base URL")
	f.StringVar(&dir, "dir", "", "the fake providers' directory")
	return cmd
}

// fakeLLMCommand is `cairn fakellm`: the scripted OpenAI-compatible model
// server as a process.
func fakeLLMCommand(g *globals) *cobra.Command {
	var listen, script string
	cmd := &cobra.Command{
		Use:   "fakellm [--listen ADDR] [--script FILE]",
		Short: "Serve a scripted, deterministic OpenAI-compatible model (for tests and demos: no network, no key)",
		Long: `Serves POST /v1/chat/completions from a script: a JSON array of replies, one per
turn (the number of assistant messages in the request), e.g.

  [{"ToolCalls": [{"Name": "ReadInvoice", "Arguments": "{\"invoice_id\":\"INV-9\"}"}]},
   {"Content": "Done."},
   {"Status": 429, "RetryAfter": 2000000000}]

Without --script it plays the accounts-payable agent's scripted model
(examples/agent), which follows the invoice the task names (INV-9, INV-3;
INV-7 is over budget). Point a model call at it with llm.Config{BaseURL:
"http://ADDR/v1"}.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			model, turns := fakellm.NewFunc(payables.Reply), payables.Turns
			if script != "" {
				b, err := os.ReadFile(script)
				if err != nil {
					return err
				}
				var s fakellm.Script
				dec := json.NewDecoder(bytes.NewReader(b))
				dec.DisallowUnknownFields()
				if err := dec.Decode(&s); err != nil {
					return usagef("--script %s: %v", script, err)
				}
				model, turns = fakellm.New(s), len(s)
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: model, ReadHeaderTimeout: 10 * time.Second}
			url := "http://" + ln.Addr().String() + "/v1"
			if err := g.emit(map[string]any{"url": url, "turns": turns}, func(w io.Writer) {
				fmt.Fprintf(w, "fake model serving on %s (%d scripted turns)\n", url, turns)
			}); err != nil {
				_ = ln.Close()
				return err
			}
			go func() {
				<-cmd.Context().Done()
				_ = srv.Close()
			}()
			if err := srv.Serve(ln); err != http.ErrServerClosed {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "listen address")
	cmd.Flags().StringVar(&script, "script", "", "JSON file of replies (default: the payables agent's scripted model)")
	return cmd
}
