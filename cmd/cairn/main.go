// Command cairn is Cairn's single binary: the server, the web UI, the CLI
// and the demo.
//
//	cairn dev                                   # a server on loopback with its web UI, for trying things
//	cairn demo                                  # the double-payment demo, nothing to set up
//	cairn server --data ./cairn-data            # serve the engine on 127.0.0.1:7233, the UI on 127.0.0.1:8233
//	cairn workflow start --type PayInvoice --id invoice-INV-9 --task-queue agents --input '{"ID":"INV-9"}'
//	cairn workflow show invoice-INV-9
//	cairn effects list --duplicates              # every action that may have happened twice
//	cairn migrate --from ./cairn-data --to postgres://…  # move a data directory into PostgreSQL
//	cairn vet ./...                              # check workflow code for nondeterminism (exit 1 on findings)
//
// Exit codes: 0 ok, 1 failed or not found, 2 usage, 3 the server refused a
// damaged data directory (history.ErrCorrupt: restore a backup, or start
// with --accept-data-loss). With --json, a failure
// is a JSON object {"code", "message"} on standard error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mattn/go-isatty"
	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker/workercli"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

// globals are the flags and streams the commands share. address and token
// are flags of the client commands only (clientFlags); json is global.
type globals struct {
	address string
	token   string
	json    bool
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	color   bool
}

func main() {
	os.Exit(cli(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError marks a command-line mistake (exit code 2).
type usageError struct{ error }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func cli(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globals{stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRoot(g)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		code := exitCode(err)
		if errors.As(err, new(silentError)) {
			return code
		}
		if g.json || (!root.PersistentFlags().Parsed() && wantsJSON(args)) {
			writeJSONError(stderr, err, code)
		} else {
			fmt.Fprintln(stderr, "error:", err)
		}
		return code
	}
	return 0
}

// newRoot returns the command tree, its flags bound to g.
func newRoot(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "cairn",
		Short:         "Cairn: durable workflows for AI agents, on an embedded event log",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error { // no command: the list of them
			if g.json {
				return printJSON(g.stdout, groupOut(cmd))
			}
			return cmd.Help()
		},
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			g.color = isTerminal(g.stdout) && !g.json && os.Getenv("NO_COLOR") == ""
		},
	}
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON for scripts (errors too, on stderr)")
	root.AddCommand(serverCommand(g), devCommand(g), workflowCommand(g), taskQueueCommand(g), clusterCommand(g), effectsCommand(g), historyCommand(g), replayCommand(g), activityCommand(g),
		demoCommand(g), benchCommand(g), versionCommand(g), backupCommand(g), restoreCommand(g), checkCommand(g), migrateCommand(g), fakeLLMCommand(g), vetCommand(g))
	return root
}

// wantsJSON spots --json in arguments cobra failed to parse.
func wantsJSON(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "--json" || a == "--json=true" {
			return true
		}
	}
	return false
}

func exitCode(err error) int {
	if isUsage(err) {
		return 2
	}
	var c corruptError
	if errors.As(err, &c) {
		return exitCorrupt
	}
	return 1
}

// exitCorrupt is the exit code of `cairn server` refusing a damaged data
// directory (history.ErrCorrupt at open): a supervisor must not restart it
// in a loop, an operator must restore a backup or accept the loss.
const exitCorrupt = 3

// corruptError marks the server's refusal to open damaged data.
type corruptError struct{ error }

func (e corruptError) Unwrap() error { return e.error }

// isUsage reports a command-line mistake: ours, or one cobra or pflag
// found.
func isUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "required flag",
		"accepts ", "requires ", "if any flags in the group"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "flag needs an argument")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// DefaultAddress is where the client commands look for a server, and
// DefaultPort the port an address without one gets.
const (
	DefaultAddress = "127.0.0.1:7233"
	DefaultPort    = "7233"
)

// clientFlags gives a command (and its subcommands) the flags of the
// commands that talk to a server: --address and --token.
func clientFlags(cmd *cobra.Command, g *globals) *cobra.Command {
	cmd.PersistentFlags().StringVar(&g.address, "address", workercli.Env("CAIRN_ADDRESS", DefaultAddress),
		"server address; without a port, "+DefaultPort+"; several servers of a cluster, comma-separated (CAIRN_ADDRESS)")
	cmd.PersistentFlags().StringVar(&g.token, "token", os.Getenv("CAIRN_TOKEN"), "bearer token (CAIRN_TOKEN)")
	return cmd
}

// dial returns a client for the server named by the client flags.
func (g *globals) dial() (client.Client, error) {
	return client.Dial(withDefaultPort(g.address), client.Options{Identity: cliIdentity()}, client.DialOptions{Token: g.token})
}

func cliIdentity() string {
	if u := os.Getenv("USER"); u != "" {
		return u + "@cli"
	}
	return "cli"
}

// exactArgs is cobra.ExactArgs(n) whose mistakes name the arguments, as
// the command's Use line spells them: `cairn workflow describe` without
// its id is "missing WORKFLOW_ID", not "accepts 1 arg(s), received 0".
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		names := argNames(cmd.Use)
		switch {
		case len(args) < n && len(args) < len(names):
			return usagef("missing %s (usage: %s)", strings.Join(names[len(args):min(n, len(names))], " and "), cmd.UseLine())
		case len(args) < n:
			return usagef("missing an argument: %s takes %d (usage: %s)", cmd.CommandPath(), n, cmd.UseLine())
		case len(args) > n:
			return usagef("%s takes %d argument%s, not %d: %q is one too many (usage: %s)", cmd.CommandPath(), n, plural(n), len(args),
				args[n], cmd.UseLine())
		}
		return nil
	}
}

// argNames returns the positional arguments a Use line names: the
// upper-case words right after the command's name ("describe WORKFLOW_ID
// [--run ID]" → WORKFLOW_ID).
func argNames(use string) []string {
	var names []string
	fields := strings.Fields(use)
	if len(fields) == 0 {
		return nil
	}
	for _, w := range fields[1:] {
		if strings.TrimFunc(w, func(r rune) bool { return r >= 'A' && r <= 'Z' || r == '_' }) != "" {
			break
		}
		names = append(names, w)
	}
	return names
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// group returns a command that only holds subcommands: without one it
// prints its help; with an unknown one it is a usage error (exit 2).
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				return usagef("%s (see: %s --help)", msg, cmd.CommandPath())
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON { // its subcommands, for a script
				return printJSON(cmd.OutOrStdout(), groupOut(cmd))
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(subs...)
	return cmd
}

// groupOutput is what a group prints with --json: its subcommands.
type groupOutput struct {
	Command     string
	Subcommands []subcommand
}

type subcommand struct{ Name, Short string }

func groupOut(cmd *cobra.Command) groupOutput {
	out := groupOutput{Command: cmd.CommandPath()}
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			out.Subcommands = append(out.Subcommands, subcommand{c.Name(), c.Short})
		}
	}
	return out
}

func versionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.emit(map[string]string{"version": version}, func(w io.Writer) { fmt.Fprintf(w, "cairn %s\n", version) })
		},
	}
}

// withDefaultPort gives an address without a port the default one:
// "localhost" → "localhost:7233", "https://cairn.example" →
// "https://cairn.example:7233"; each of several, comma-separated (the
// servers of a cluster).
func withDefaultPort(address string) string {
	if strings.Contains(address, ",") {
		parts := strings.Split(address, ",")
		for i, p := range parts {
			parts[i] = withDefaultPort(strings.TrimSpace(p))
		}
		return strings.Join(parts, ",")
	}
	scheme, hostport := "", address
	if i := strings.Index(address, "://"); i >= 0 {
		scheme, hostport = address[:i+3], address[i+3:]
	}
	hostport = strings.TrimRight(hostport, "/")
	if hostport == "" {
		return address
	}
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return scheme + hostport
	}
	host := strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	return scheme + net.JoinHostPort(host, DefaultPort)
}
