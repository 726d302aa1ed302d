package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

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
		Args: cobra.ExactArgs(1),
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
// cairn (the demo agent). User workers get the same command from
// workercli.Main.
func replayCommand(g *globals) *cobra.Command {
	var file string
	var trace bool
	cmd := &cobra.Command{
		Use:   "replay --history FILE [--trace] [--address SERVER]",
		Short: "Replay an exported history of a built-in workflow (the demo agent)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r := worker.NewReplayer(worker.ReplayerOptions{})
			// The built-in workflows share tool names: register the set
			// the history was recorded with.
			register := func() error { return demo.Register(r, &demo.Agent{}, true, true) }
			if typ, err := historyType(file); err == nil && typ == "PayInvoiceAgent" {
				register = func() error { return payables.Register(r, nil, nil) }
			}
			if err := register(); err != nil {
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
				if errors.Is(err, sdk.ErrUnknownWorkflowType) {
					return fmt.Errorf("%w; cairn replay knows only its built-in workflows: replay a history of yours with your worker binary's replay command (workercli.Main)", err)
				}
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

// historyType returns the workflow type an exported history records.
func historyType(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	_, evs, err := history.ImportJSON(f)
	if err != nil || len(evs) == 0 {
		return "", err
	}
	if s, ok := evs[0].Attrs.(*history.WorkflowStarted); ok {
		return s.WorkflowType, nil
	}
	return "", nil
}
