package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/demo"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

func historyCommand(g *globals) *cobra.Command {
	var run, out string
	var inline bool
	export := &cobra.Command{
		Use:   "export WORKFLOW_ID [--run ID] [--inline] [-o FILE]",
		Short: "Export a run's history as JSON (the replayer's input)",
		Long: `Export a run's history as JSON (the replayer's input).

Payloads the engine stores by reference (transcripts, large results) stay
references; with --inline the file also carries every chunk they reference,
so that it replays without the server (cairn replay reads both forms).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.dial()
			if err != nil {
				return err
			}
			runID, evs, err := g.history(cmd.Context(), c, args[0], run)
			if err != nil {
				return err
			}
			doc := history.Document{Run: history.RunRef{WorkflowID: args[0], RunID: runID}, Events: evs}
			if inline {
				if doc.Chunks, err = history.CollectChunks(cmd.Context(), client.NewChunkCache(c.Service(), 0), evs); err != nil {
					return err
				}
			}
			var buf bytes.Buffer
			if err := history.ExportDocument(&buf, doc); err != nil {
				return err
			}
			if out == "" || out == "-" {
				_, err = g.stdout.Write(buf.Bytes())
				return err
			}
			if err := os.WriteFile(out, buf.Bytes(), 0o644); err != nil {
				return err
			}
			return g.emit(exportOut{args[0], runID, len(evs), out}, func(io.Writer) {
				fmt.Fprintf(g.stderr, "wrote %d events to %s\n", len(evs), out)
			})
		},
	}
	runFlag(export, &run)
	export.Flags().StringVarP(&out, "output", "o", "", "file to write (default: stdout)")
	export.Flags().BoolVar(&inline, "inline", false, "carry the payload chunks the history references (a self-contained file)")
	return clientFlags(group("history", "Export histories", export), g)
}

// exportOut is the --json of an export written to a file.
type exportOut struct {
	WorkflowID string
	RunID      string
	Events     int
	File       string
}

// replayCommand replays exported histories of the workflows built into
// cairn (the demo agents). User workers get the same command from
// workercli.Main.
func replayCommand(g *globals) *cobra.Command {
	var file string
	var trace bool
	cmd := &cobra.Command{
		Use:   "replay --history FILE [--trace] [--address SERVER]",
		Short: "Replay an exported history of a built-in workflow (the demo agents)",
		Long: `Replays an exported history (cairn history export) through the code of the
workflows built into cairn: ` + strings.Join(builtinTypes(), ", ") + ` — the runs of
cairn demo and cairn dev --demo. A history of your own workflows replays with
your worker binary's replay command (workercli.Main gives every worker
binary one).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			typ, err := historyType(file)
			if err != nil {
				return err
			}
			r := worker.NewReplayer(worker.ReplayerOptions{})
			if err := registerBuiltin(r, typ); err != nil {
				return err
			}
			var ro worker.ReplayOptions
			if cmd.Flags().Changed("address") { // an export without --inline: its chunks come from the server
				c, err := g.dial()
				if err != nil {
					return err
				}
				defer c.Close()
				ro.Chunks = client.NewChunkCache(c.Service(), 0)
			}
			if trace {
				ro.Trace = g.stdout
				if g.json {
					ro.Trace = g.stderr
				}
			}
			if err := r.ReplayFile(file, ro); err != nil {
				return err
			}
			return g.emit(map[string]any{"ok": true, "history": file}, func(w io.Writer) {
				fmt.Fprintln(w, "replay ok: the code reproduces every recorded decision")
			})
		},
	}
	cmd.Flags().StringVar(&file, "history", "", "exported history JSON file")
	cmd.Flags().BoolVar(&trace, "trace", false, "print each event, command and waiting line")
	_ = cmd.MarkFlagRequired("history")
	// --address: the server whose chunks an export without --inline
	// references (the model's answers of an agent history).
	return clientFlags(cmd, g)
}

// builtins are the workflows cairn replay knows, each with what its
// histories were recorded with: they share tool names (SendPayment,
// CheckBudget, the model call) with other declarations, so a replay
// registers one set.
var builtins = []struct {
	typ      string
	register func(worker.Registrar) error
}{
	{"PayInvoice", func(r worker.Registrar) error { return demo.Register(r, &demo.Agent{}, true, true) }},
	{"PayInvoiceAgent", func(r worker.Registrar) error { return payables.Register(r, nil, nil) }},
	{"Assistant", func(r worker.Registrar) error { return demo.RegisterAssistant(r, nil, nil) }},
}

// builtinTypes lists the workflow types cairn replay knows.
func builtinTypes() []string {
	out := make([]string, len(builtins))
	for i, b := range builtins {
		out[i] = b.typ
	}
	return out
}

// registerBuiltin registers the built-in workflow typ, with its
// activities, on r — or says that typ is not one, and how to replay it.
func registerBuiltin(r worker.Registrar, typ string) error {
	for _, b := range builtins {
		if b.typ == typ {
			return b.register(r)
		}
	}
	return fmt.Errorf("%w %q: it is not registered in cairn replay, which knows only the workflows built into cairn (%s). "+
		"Replay a history of your own workflows with your worker binary's replay command: a program whose main is "+
		"workercli.Main(register, …), where register calls r.RegisterWorkflow(%s), has `replay --history FILE [--address SERVER]`",
		sdk.ErrUnknownWorkflowType, typ, strings.Join(builtinTypes(), ", "), goName(typ))
}

// goName is the Go name a workflow type is registered under by default:
// the function's name (a type registered under another name needs
// sdk.RegisterOptions{Name: …}).
func goName(typ string) string {
	if i := strings.LastIndexAny(typ, "./"); i >= 0 {
		return typ[i+1:]
	}
	return typ
}

// historyType returns the workflow type an exported history records.
func historyType(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, evs, err := history.ImportJSON(f)
	if err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if len(evs) == 0 {
		return "", fmt.Errorf("%w: %s holds no events", worker.ErrBadHistory, file)
	}
	s, ok := evs[0].Attrs.(*history.WorkflowStarted)
	if !ok {
		return "", fmt.Errorf("%w: the first event of %s is %s, not WorkflowStarted", worker.ErrBadHistory, file, evs[0])
	}
	return s.WorkflowType, nil
}
