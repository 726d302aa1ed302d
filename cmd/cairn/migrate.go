package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/history/storecopy"
)

// migrateCommand is `cairn migrate`: a data directory copied into
// PostgreSQL (docs/scale-out.md, "Moving in").
func migrateCommand(g *globals) *cobra.Command {
	var from, to, schema string
	cmd := &cobra.Command{
		Use:   "migrate --from DIR --to URL",
		Short: "Copy a data directory into an empty PostgreSQL store, and verify the copy",
		Long: `Copy everything a stopped server's data directory holds — every run's
history, run states, the effects ledger, payload chunks, budgets and usage,
indexes — into an empty PostgreSQL store, then read both back and compare
them record by record and event by event. Progress goes to stderr.

Interrupted (Ctrl-C, a lost connection, a crash), run the same command
again: it resumes where the copy stopped. A target that holds anything else
is refused and left untouched. Serve the store (cairn server --store URL)
only once the copy is verified; cairn check --store URL says whether it is.

Exit code 0: copied and verified; 3: the target or the source differs, or
the source is damaged (the error says what and where); 1: the copy could not
run or finish (run it again); 2: usage.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMigrate(cmd.Context(), g, from, to, schema)
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the data directory (no server may be running on it)")
	cmd.Flags().StringVar(&to, "to", "", "the PostgreSQL store: postgres://user:password@host:5432/db?sslmode=…")
	cmd.Flags().StringVar(&schema, "schema", pgstore.DefaultSchema, "the schema of Cairn's tables in the database")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("to")
	return cmd
}

// migrateOutput is what cairn migrate prints.
type migrateOutput struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Schema string `json:"schema"`
	*storecopy.Result
	// Losses are data losses the source accepted earlier
	// (--accept-data-loss): they are not copied.
	Losses []badgerstore.LossRecord `json:"losses,omitempty"`
}

func runMigrate(ctx context.Context, g *globals, from, to, schema string) error {
	if !isPostgresURL(to) {
		return usagef("--to must be a PostgreSQL URL (postgres://…), not %q", to)
	}
	dir, err := filepath.Abs(from)
	if err != nil {
		return err
	}
	src, err := openDir(dir)
	if err != nil {
		return migrateError(err, dir)
	}
	defer src.Close()
	dst, err := openPostgres(ctx, to, schema)
	if err != nil {
		return err
	}
	defer dst.Close()
	out := &migrateOutput{From: dir, To: redactURL(to), Schema: schema}
	if out.Losses, err = src.Losses(); err != nil {
		return err
	}
	opts := storecopy.Options{Source: "badger:" + dir}
	if !g.json {
		opts.Progress = newProgressPrinter(g.stderr).print
	}
	out.Result, err = storecopy.Run(ctx, src, dst, opts)
	if err != nil {
		return migrateError(err, dir)
	}
	return g.emit(out, func(w io.Writer) { out.print(w) })
}

// migrateError maps a failed migration to the CLI's codes: damage and
// differences exit 3, a busy directory or a refused target 1.
func migrateError(err error, dir string) error {
	switch {
	case errors.Is(err, storecopy.ErrMismatch):
		return corruptError{fmt.Errorf("%w: %w", api.ErrDataCorrupt, err)}
	case errors.Is(err, history.ErrCorrupt):
		return corruptError{fmt.Errorf("%w: %w (see cairn check --data %s)", api.ErrDataCorrupt, err, dir)}
	case errors.Is(err, storecopy.ErrTargetNotEmpty):
		return fmt.Errorf("%w: %w: migrate into an empty database or schema (--schema)", api.ErrInvalidArgument, err)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("interrupted, the target holds part of the copy: run the same command again to resume: %w", err)
	}
	return fmt.Errorf("%w (run the same command again to resume)", err)
}

// print writes the summary for people.
func (o *migrateOutput) print(w io.Writer) {
	c, v := o.Copy, o.Verify
	copied, skipped := c.Records()
	switch {
	case c.AlreadyVerified:
		fmt.Fprintf(w, "%s was copied from %s and verified before; verified again:\n", o.To, o.From)
	default:
		fmt.Fprintf(w, "copied %s into %s (schema %s)%s:\n", o.From, o.To, o.Schema, resumedNote(c))
		fmt.Fprintf(w, "  %d records copied (%d already there), %d runs, %d events copied (%d already there), %s, %d batches, %s\n",
			copied, skipped, c.Runs, c.Events, c.EventsSkipped, sizeOf(c.EventBytes+recordBytes(c)), c.Batches, roundDur(c.Elapsed))
	}
	fmt.Fprintf(w, "  verified: %d records in %d spaces, %d runs, %d events read back from both and equal byte for byte (%s)\n",
		v.Records(), len(v.Spaces), v.Runs, v.Events, roundDur(v.Elapsed))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  space\trecords\tbytes\tsha256")
	for _, s := range v.Spaces {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%s\n", s.Space, s.Records, s.Bytes, s.Digest[:16])
	}
	fmt.Fprintf(tw, "  events\t%d\t%d\t%s\n", v.Events, v.EventBytes, v.EventsDigest[:16])
	_ = tw.Flush()
	for _, l := range o.Losses {
		fmt.Fprintf(w, "note: the source accepted a data loss at %s (not copied; the target starts without it): %s\n",
			l.At.Format("2006-01-02 15:04:05Z"), l.Refused)
	}
	schema := ""
	if o.Schema != pgstore.DefaultSchema {
		schema = " --schema " + o.Schema
	}
	fmt.Fprintf(w, "next: serve it with cairn server --store URL%s (the --to URL); keep %s, unserved, until you no longer need to go back\n",
		schema, o.From)
}

func resumedNote(c *storecopy.Report) string {
	if c.Resumed {
		return ", resuming an interrupted copy"
	}
	return ""
}

func recordBytes(c *storecopy.Report) int64 {
	var n int64
	for _, s := range c.Spaces {
		n += s.Bytes
	}
	return n
}

func roundDur(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// sizeOf renders a byte count for people.
func sizeOf(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// progressPrinter writes a copy's progress on stderr: each space and
// phase when it ends, and at most one line a second in between.
type progressPrinter struct {
	w    io.Writer
	last time.Time
}

func newProgressPrinter(w io.Writer) *progressPrinter {
	return &progressPrinter{w: w, last: time.Now()}
}

func (p *progressPrinter) print(pr storecopy.Progress) {
	if !pr.Done && time.Since(p.last) < time.Second {
		return
	}
	p.last = time.Now()
	fmt.Fprintf(p.w, "migrate: %s\n", pr)
}
