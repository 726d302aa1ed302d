package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk/client"
)

// updateOut is update's --json.
type updateOut struct {
	WorkflowID string
	RunID      string
	UpdateID   string
	Update     string
	// Stage is "completed" (Result is the handler's) or "accepted"
	// (--no-wait: the handler runs).
	Stage  string
	Result history.Payload
}

func wfUpdate(g *globals) *cobra.Command {
	var run, name, updateID, typ, queue string
	var startRun, noWait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "update WORKFLOW_ID --name NAME [--input JSON | --input-file FILE] [--update-id ID] [--no-wait] [--start --type TYPE --task-queue QUEUE [--start-input JSON]]",
		Short: "Send an update to a run and print its handler's result",
		Long: `Sends an update to the run (the current one unless --run names another).
The run's validator, on a worker, accepts or rejects it at once: a rejection
is an error (exit 1) with the validator's reason, and nothing is recorded.
An accepted update is recorded, its handler runs as workflow code, and its
result is printed (--no-wait: print "accepted" without waiting for it).

--update-id names the update: sent again with the same id, it is applied
once and the first outcome is printed. With --start, the run is started
(--type, --task-queue, --start-input) when the workflow has no open run,
then updated.`,
		Args: exactArgs(1),
	}
	input := inputFlags(cmd, g, "input", "the update's argument")
	startInput := inputFlags(cmd, g, "start-input", "the started workflow's input")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		in, err := input()
		if err != nil {
			return err
		}
		if startRun && (typ == "" || queue == "") {
			return usagef("--start needs --type and --task-queue")
		}
		if !startRun && (typ != "" || queue != "" || cmd.Flags().Changed("start-input")) {
			return usagef("--type, --task-queue and --start-input go with --start")
		}
		if startRun && run != "" {
			return usagef("--start updates the open (or started) run: leave out --run")
		}
		ctx, cancel := withTimeout(cmd.Context(), timeout)
		defer cancel()
		c, runID, err := g.dialRun(ctx, args[0], run)
		if err != nil {
			return err
		}
		if updateID == "" {
			updateID = newUpdateID() // named here, so that a message can name it
		}
		opts := client.UpdateOptions{WorkflowID: args[0], RunID: runID, UpdateID: updateID, Name: name, Args: in}
		if noWait {
			opts.WaitForStage = api.UpdateStageAccepted
		}
		var h client.UpdateHandle
		if startRun {
			sin, err := startInput()
			if err != nil {
				return err
			}
			h, err = c.UpdateWithStartWorkflow(ctx, client.StartOptions{ID: args[0], TaskQueue: queue}, typ, sin, opts)
			if err != nil {
				return updateGaveUp(cmd.Context(), err, args[0], updateID, timeout)
			}
		} else if h, err = c.UpdateWorkflow(ctx, opts); err != nil {
			return updateGaveUp(cmd.Context(), err, args[0], updateID, timeout)
		}
		out := updateOut{WorkflowID: args[0], RunID: h.RunID(), UpdateID: h.UpdateID(), Update: name, Stage: api.UpdateStageAccepted.String()}
		if !noWait {
			if err := h.Get(ctx, &out.Result); err != nil {
				return updateGaveUp(cmd.Context(), err, args[0], updateID, timeout)
			}
			out.Stage = api.UpdateStageCompleted.String()
		}
		return g.emit(out, func(w io.Writer) {
			if noWait {
				fmt.Fprintf(w, "update %s (%s) of %s accepted\n", out.UpdateID, name, args[0])
				return
			}
			fmt.Fprintln(w, view.PayloadText(out.Result))
		})
	}
	runFlag(cmd, &run)
	f := cmd.Flags()
	f.StringVar(&name, "name", "", "update name")
	f.StringVar(&updateID, "update-id", "", "the update's id (default: a new one)")
	f.BoolVar(&noWait, "no-wait", false, "return once the update is accepted, without waiting for its result")
	f.BoolVar(&startRun, "start", false, "start the run when the workflow has no open run (update-with-start)")
	f.StringVar(&typ, "type", "", "with --start: the workflow type")
	f.StringVar(&queue, "task-queue", "", "with --start: the task queue")
	timeoutFlag(cmd, &timeout)
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// updateGaveUp explains an update whose wait --timeout ended: an update
// already accepted goes on (ask again with its --update-id).
func updateGaveUp(parent context.Context, err error, workflowID, updateID string, timeout time.Duration) error {
	if timeout <= 0 || !errors.Is(err, context.DeadlineExceeded) || parent.Err() != nil {
		return err
	}
	return fmt.Errorf("update %s of %s did not complete within --timeout %s; if it was accepted it goes on "+
		"(its outcome: the same command with --update-id %s): %w", updateID, workflowID, timeout, updateID, err)
}

// newUpdateID returns a random update id.
func newUpdateID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
