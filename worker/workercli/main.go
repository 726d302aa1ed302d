// Package workercli is the standard entry point of a worker binary: two
// commands, `run` (connect to a server and work until SIGINT/SIGTERM) and
// `replay` (replay an exported history through the binary's workflows).
// It is a package of its own so that the worker library links no CLI
// framework: a program that builds its own command line uses worker
// directly.
//
//	func main() {
//		os.Exit(workercli.Main(func(r worker.Registrar) error {
//			if err := r.RegisterWorkflow(PayInvoice); err != nil {
//				return err
//			}
//			return r.RegisterActivity(SendPayment, activities.Options{Effect: activities.SideEffect})
//		}, workercli.Options{TaskQueue: "agents"}))
//	}
package workercli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/gctune"
	"github.com/cairnflow/cairn/internal/tracing/otlpenv"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// Options configure Main.
type Options struct {
	// Name is the binary's name in usage text (default: os.Args[0]).
	Name string
	// TaskQueue is the default of --task-queue.
	TaskQueue string
	// Args are the command-line arguments (default os.Args[1:]).
	Args []string
	// Stdout and Stderr default to the process's.
	Stdout, Stderr io.Writer
}

// Main is the standard entry point of a worker binary (see the package
// doc). It provides two commands: `run` (connect to a server and work until
// SIGINT/SIGTERM; flags --address, --token, --task-queue, --log-level, with
// CAIRN_ADDRESS and CAIRN_TOKEN as fallbacks) and `replay --history FILE
// [--trace]` (replay an exported history through this binary's workflows).
// It returns the process exit code: 0 ok, 1 failed, 2 usage; `replay
// --json` prints its outcome as JSON, and a failure as {"code", "message"}
// on stderr (ErrorCode).
func Main(register func(worker.Registrar) error, opts Options) int {
	if opts.Args == nil {
		opts.Args = os.Args[1:]
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Name == "" {
		opts.Name = os.Args[0]
	}
	root := &cobra.Command{Use: opts.Name, Short: "A Cairn worker", SilenceUsage: true, SilenceErrors: true}
	root.SetArgs(opts.Args)
	root.SetOut(opts.Stdout)
	root.SetErr(opts.Stderr)
	var asJSON bool
	root.AddCommand(runCommand(register, opts), replayCommand(register, &asJSON))
	if err := root.Execute(); err != nil {
		usage := isUsage(err)
		if asJSON || wantsJSON(opts.Args) {
			b, _ := json.Marshal(api.ErrorBody{Code: ErrorCode(err, usage), Message: err.Error()}) // two strings always encode
			fmt.Fprintf(opts.Stderr, "%s\n", b)
		} else {
			fmt.Fprintln(opts.Stderr, "error:", err)
		}
		if usage {
			return 2
		}
		return 1
	}
	return 0
}

// CodeUnknownWorkflowType is the --json error code of a replay of a
// history whose workflow type the binary does not register
// (sdk.ErrUnknownWorkflowType).
const CodeUnknownWorkflowType api.Code = "unknown_workflow_type"

// ErrorCode is the code a command's failure has in its --json error
// ({"code", "message"} on stderr): "usage" for a command-line mistake,
// CodeUnknownWorkflowType, "not_found" for a missing file, else the API's
// code for err (api.TransportCode). Cairn's CLI and worker binaries share
// it.
func ErrorCode(err error, usage bool) api.Code {
	if usage {
		return "usage"
	}
	if errors.Is(err, sdk.ErrUnknownWorkflowType) {
		return CodeUnknownWorkflowType
	}
	if c := api.TransportCode(err); c != api.CodeInternal || !errors.Is(err, fs.ErrNotExist) {
		return c
	}
	return api.CodeNotFound // a file the command was given is missing
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

// usageError marks command-line mistakes (exit code 2).
type usageError struct{ error }

func isUsage(err error) bool {
	if _, ok := err.(usageError); ok {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.Contains(msg, "flag needs an argument") ||
		strings.HasPrefix(msg, "invalid argument") || strings.HasPrefix(msg, "required flag")
}

// Env returns the environment variable's value or def.
func Env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func runCommand(register func(worker.Registrar) error, opts Options) *cobra.Command {
	var address, token, queue, level string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Connect to a Cairn server and run workflows and activities until SIGINT or SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lvl, err := zerolog.ParseLevel(level)
			if err != nil {
				return usageError{fmt.Errorf("invalid argument --log-level %q", level)}
			}
			log := zerolog.New(cmd.ErrOrStderr()).Level(lvl).With().Timestamp().Logger()
			gctune.ForServer()
			shutdown, err := otlpenv.Setup(cmd.Context(), opts.Name)
			if err != nil {
				return usageError{err}
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = shutdown(ctx) // flush the spans still queued; an unreachable collector must not hold the exit
			}()
			c, err := client.Dial(address, client.Options{}, client.DialOptions{Token: token})
			if err != nil {
				return err
			}
			w, err := worker.New(c, worker.Options{TaskQueue: queue, Logger: &log, StopOnSignals: true})
			if err != nil {
				return err
			}
			if err := register(w); err != nil {
				return err
			}
			return w.Run(context.Background())
		},
	}
	cmd.Flags().StringVar(&address, "address", Env("CAIRN_ADDRESS", "127.0.0.1:7233"), "server address; several servers of a cluster, comma-separated (CAIRN_ADDRESS)")
	cmd.Flags().StringVar(&token, "token", os.Getenv("CAIRN_TOKEN"), "bearer token (CAIRN_TOKEN)")
	cmd.Flags().StringVar(&queue, "task-queue", opts.TaskQueue, "task queue to poll")
	cmd.Flags().StringVar(&level, "log-level", "info", "log level (debug, info, warn, error)")
	return cmd
}

func replayCommand(register func(worker.Registrar) error, asJSON *bool) *cobra.Command {
	var file, address, token string
	var trace bool
	cmd := &cobra.Command{
		Use:   "replay --history FILE [--trace] [--address SERVER] [--json]",
		Short: "Replay an exported history (cairn history export) through this binary's workflow code",
		Long: `Replays an exported history (cairn history export) through this binary's
workflow code, and fails with a NondeterminismError naming the event if the
code no longer makes the recorded decisions. --trace prints each decision
(on stderr with --json); --json prints {"ok": true, "history": FILE}, or the
failure as {"code", "message"} on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := worker.NewReplayer(worker.ReplayerOptions{})
			if err := register(r); err != nil {
				return err
			}
			var ro worker.ReplayOptions
			if trace {
				ro.Trace = cmd.OutOrStdout()
				if *asJSON {
					ro.Trace = cmd.ErrOrStderr()
				}
			}
			if address != "" { // payloads the file holds by reference come from the server
				svc, err := client.NewRemoteService(address, client.DialOptions{Token: token})
				if err != nil {
					return err
				}
				defer svc.Close()
				ro.Chunks = client.NewChunkCache(svc, 0)
			}
			if err := r.ReplayFile(file, ro); err != nil {
				if errors.Is(err, sdk.ErrUnknownWorkflowType) {
					return fmt.Errorf("%w; register it in the function this binary passes to workercli.Main (r.RegisterWorkflow(…), "+
						"under the name the history records), rebuild, and replay again", err)
				}
				return err
			}
			if *asJSON {
				b, _ := json.Marshal(replayOut{OK: true, History: file}) // a bool and a string always encode
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\n", b)
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "replay ok: the code reproduces every recorded decision")
			return nil
		},
	}
	cmd.Flags().StringVar(&file, "history", "", "exported history JSON file")
	cmd.Flags().BoolVar(&trace, "trace", false, "print each event, command and waiting line")
	cmd.Flags().StringVar(&address, "address", "", "server to read the payload chunks an export without --inline references")
	cmd.Flags().StringVar(&token, "token", os.Getenv("CAIRN_TOKEN"), "bearer token for --address (CAIRN_TOKEN)")
	cmd.Flags().BoolVar(asJSON, "json", false, "print JSON for scripts (errors too, on stderr)")
	_ = cmd.MarkFlagRequired("history")
	return cmd
}

// replayOut is replay's --json: what `cairn replay --json` prints too.
type replayOut struct {
	OK      bool   `json:"ok"`
	History string `json:"history"`
}
