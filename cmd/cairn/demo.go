package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/demo"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

func demoCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch a retry pay an invoice twice, then watch Cairn prevent it",
		Long: `Runs the founding article's scenario with real processes and no setup: an
accounts-payable agent pays $4,200 to ACME for INV-9, its worker process is
killed with SIGKILL right after the payment, and the job is retried in a fresh
process — without the guard, with it, and in the case nobody can decide.`,
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
			res, err := demo.Run(cmd.Context(), demo.Options{Out: out, Color: g.color, WorkerCommand: func(args ...string) *exec.Cmd {
				return exec.Command(exe, append([]string{"demo", "worker"}, args...)...)
			}})
			if err != nil {
				return err
			}
			return g.emit(res, func(io.Writer) {})
		},
	}
	cmd.AddCommand(demoWorkerCommand(), demoAgentCommand(g), demoAgentWorkerCommand())
	return cmd
}

// demoWorkerCommand is the worker process the demo starts and kills.
func demoWorkerCommand() *cobra.Command {
	var address, ledger string
	var guard, stallNotify, hang bool
	cmd := &cobra.Command{
		Use:    "worker",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := client.Dial(address, client.Options{}, client.DialOptions{})
			if err != nil {
				return err
			}
			a := &demo.Agent{Ledger: ledger, StallNotify: stallNotify, HangAfterPay: hang, OnPaid: func(r demo.Receipt) {
				b, _ := json.Marshal(r)
				fmt.Fprintf(cmd.OutOrStdout(), "paid %s\n", b)
			}}
			w, err := worker.New(c, worker.Options{TaskQueue: demo.TaskQueue, StopOnSignals: true})
			if err != nil {
				return err
			}
			if err := demo.Register(w, a, guard, false); err != nil {
				return err
			}
			return w.Run(context.Background())
		},
	}
	f := cmd.Flags()
	f.StringVar(&address, "address", "", "server address")
	f.StringVar(&ledger, "ledger", "", "provider ledger file")
	f.BoolVar(&guard, "guard", false, "register SendPayment as SideEffect")
	f.BoolVar(&stallNotify, "stall-notify", false, "hang in NotifyVendor")
	f.BoolVar(&hang, "hang-after-pay", false, "hang in SendPayment after paying")
	return cmd
}
