package main

// How the commands print (read this before adding one):
//
//   - A command prints its outcome with g.emit(v, human): with --json, v
//     is written as indented JSON by internal/view's convention (the one
//     the web UI and the history export use: lower camel case keys with
//     "ID" written "Id", enums by name, times RFC 3339, payloads
//     {"encoding", "json"} decoded — never base64 msgpack); otherwise
//     human(w) writes text for people. Every command supports --json:
//     pass an api response as it is where one fits, else a small struct
//     or map with lower camel keys.
//   - Errors are returned, never printed: cli() prints them, as
//     {"code": "not_found", "message": "…"} on stderr with --json (code
//     "usage" for a command-line mistake), and sets the exit code: 0 ok,
//     1 failed or not found, 2 usage (usagef).
//   - Payloads in tables and lines: view.PayloadText. Histories:
//     view.Timeline (showHistory). Times: relative(t, now). Statuses:
//     g.statusText. Columns: table.
//   - Flags: --address and --token belong to the commands that talk to a
//     server (clientFlags on their group); a run id flag is runFlag and is
//     resolved with g.runID (a unique prefix, as `list` shows it, is
//     enough); JSON input is inputFlags (--input or --input-file).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/worker/workercli"
)

// emit prints a command's outcome: v as JSON with --json, else human.
func (g *globals) emit(v any, human func(w io.Writer)) error {
	if g.json {
		return printJSON(g.stdout, v)
	}
	human(g.stdout)
	return nil
}

// printJSON writes v as indented JSON by the view convention.
func printJSON(w io.Writer, v any) error {
	b, err := view.MarshalIndent(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// codeUnknownWorkflowType is the code of a replay of a history whose
// workflow type the binary does not register (sdk.ErrUnknownWorkflowType).
const codeUnknownWorkflowType = workercli.CodeUnknownWorkflowType

// errorCode is the code --json prints for err (worker binaries print the
// same: workercli.ErrorCode).
func errorCode(err error, exit int) api.Code { return workercli.ErrorCode(err, exit == 2) }

// writeJSONError prints err as {"code", "message"}.
func writeJSONError(w io.Writer, err error, exit int) {
	b, _ := json.Marshal(api.ErrorBody{Code: errorCode(err, exit), Message: err.Error()}) // two strings always encode
	fmt.Fprintf(w, "%s\n", b)
}

func abbreviate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// inputFlags adds --NAME (JSON) and --NAME-file (a file of JSON, "-" for
// standard input) to cmd, and returns a function reading whichever was
// given. Argv caps inline input near 128 KiB; a file has no such limit.
func inputFlags(cmd *cobra.Command, g *globals, name, usage string) func() (history.Payload, error) {
	var inline, file string
	cmd.Flags().StringVar(&inline, name, "", usage+" as JSON")
	cmd.Flags().StringVar(&file, name+"-file", "", "read "+usage+" as JSON from this file (- for stdin)")
	cmd.MarkFlagsMutuallyExclusive(name, name+"-file")
	return func() (history.Payload, error) {
		if file == "" {
			p, err := view.JSONInput("--"+name, inline)
			if err != nil {
				return p, usageError{err}
			}
			return p, nil
		}
		var b []byte
		var err error
		if file == "-" {
			b, err = io.ReadAll(g.stdin)
		} else {
			b, err = os.ReadFile(file)
		}
		if err != nil {
			return history.Payload{}, usagef("--%s-file: %v", name, err)
		}
		if strings.TrimSpace(string(b)) == "" {
			return history.Payload{}, usagef("--%s-file %s is empty", name, file)
		}
		p, err := view.JSONInput("--"+name+"-file "+file, string(b))
		if err != nil {
			return p, usageError{err}
		}
		return p, nil
	}
}

// relative renders t relative to now ("3m ago", "in 2s").
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := now.Sub(t); d >= 0 {
		return roundDuration(d) + " ago"
	} else {
		return "in " + roundDuration(-d)
	}
}

func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d < 48*time.Hour:
		return d.Round(time.Minute).String()
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiBlue   = "\x1b[34m"
	ansiGray   = "\x1b[90m"
)

// statusText colours a status on a terminal.
func (g *globals) statusText(s api.Status) string {
	name := s.String()
	if !g.color {
		return name
	}
	c := ansiGray
	switch s {
	case api.StatusRunning:
		c = ansiBlue
	case api.StatusCompleted:
		c = ansiGreen
	case api.StatusPaused:
		c = ansiYellow
	case api.StatusFailed, api.StatusTerminated, api.StatusTimedOut, api.StatusCanceled:
		c = ansiRed
	}
	return c + name + ansiReset
}

// table writes aligned columns.
func table(w io.Writer, header []string, rows [][]string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// showHistory renders a history one line per event.
func showHistory(w io.Writer, evs []history.Event, full bool) {
	width := 60
	if full {
		width = 1 << 30
	}
	rows := make([][]string, 0, len(evs))
	for i, r := range view.Timeline(evs) {
		detail := r.Detail
		if full {
			if b, err := json.Marshal(evs[i]); err == nil {
				detail = string(b)
			}
		}
		dur := ""
		if r.Duration > 0 {
			dur = roundDuration(r.Duration)
		}
		rows = append(rows, []string{fmt.Sprint(r.ID), "+" + roundDuration(r.Offset), r.Type, r.Name, dur, abbreviate(detail, width)})
	}
	table(w, []string{"ID", "TIME", "EVENT", "NAME", "DURATION", "DETAILS"}, rows)
}
