// Command cairn is Cairn's single binary: the server, the CLI and the demo.
//
//	cairn demo                                  # the double-payment demo, nothing to set up
//	cairn server --data ./cairn-data            # serve the engine on 127.0.0.1:7233
//	cairn workflow start --type PayInvoice --id invoice-INV-9 --task-queue agents --input '{"ID":"INV-9"}'
//	cairn workflow show invoice-INV-9
//	cairn effects list --duplicates              # every action that may have happened twice
//
// Exit codes: 0 ok, 1 failed or not found, 2 usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// globals are the flags every client command shares.
type globals struct {
	address string
	token   string
	json    bool
	stdout  io.Writer
	stderr  io.Writer
	color   bool
}

func main() {
	os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks a command-line mistake (exit code 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func cli(args []string, stdout, stderr io.Writer) int {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "Cairn: durable workflows for AI agents, on an embedded event log",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.color = isTerminal(stdout) && !g.json && os.Getenv("NO_COLOR") == ""
		},
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.address, "address", worker.Env("CAIRN_ADDRESS", "127.0.0.1:7233"), "server address (CAIRN_ADDRESS)")
	root.PersistentFlags().StringVar(&g.token, "token", os.Getenv("CAIRN_TOKEN"), "bearer token (CAIRN_TOKEN)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON for scripts")
	root.AddCommand(serverCommand(g), workflowCommand(g), effectsCommand(g), historyCommand(g), replayCommand(g), demoCommand(g), benchCommand(g), versionCommand(g))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "error:", err)
		return exitCode(err)
	}
	return 0
}

func exitCode(err error) int {
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument",
		"invalid argument", "required flag", "accepts ", "requires "} {
		if strings.HasPrefix(msg, p) || strings.Contains(msg, "flag needs an argument") {
			return 2
		}
	}
	return 1
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// dial returns a client for the server named by the global flags.
func (g *globals) dial() (client.Client, error) {
	return client.Dial(g.address, client.Options{Identity: cliIdentity()}, client.DialOptions{Token: g.token})
}

func cliIdentity() string {
	if u := os.Getenv("USER"); u != "" {
		return u + "@cli"
	}
	return "cli"
}

func versionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(g.stdout, "cairn %s\n", version)
			return nil
		},
	}
}
