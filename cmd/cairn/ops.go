package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/storecopy"
)

// The operator's commands: an online backup through the running server, a
// restore into a new directory, and a check of a stopped data directory
// (docs/reliability.md, "Operations: backup, restore, check").

func backupCommand(g *globals) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "backup --out FILE",
		Short: "Write a consistent copy of the running server's data to a file",
		Long: `Ask the running server for a backup: a consistent copy of all its data at one
moment, streamed while it goes on serving. The copy is checked as it arrives
(its checksum and its end) and written to FILE only once complete; restore it
with cairn restore.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, err := g.backup(cmd.Context(), out)
			if err != nil {
				return err
			}
			return g.emit(info, func(w io.Writer) {
				fmt.Fprintf(w, "backup written to %s: %d bytes, %d keys (%d events), up to commit %d, sha256 %s\n",
					out, info.Bytes, info.Keys, info.Events, info.Seq, info.SHA256)
			})
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the backup file to write (must not exist)")
	_ = cmd.MarkFlagRequired("out")
	return clientFlags(cmd, g)
}

// backup downloads a backup into out, verifying it as it arrives.
func (g *globals) backup(ctx context.Context, out string) (badgerstore.BackupInfo, error) {
	var none badgerstore.BackupInfo
	if _, err := os.Stat(out); err == nil {
		return none, usagef("--out %s exists: choose a new file", out)
	}
	base := withDefaultPort(g.address)
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(base, "/")+httpapi.BackupPath, nil)
	if err != nil {
		return none, usagef("--address %q: %v", g.address, err)
	}
	if g.token != "" {
		req.Header.Set("Authorization", "Bearer "+g.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return none, fmt.Errorf("%w: %v", api.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb api.ErrorBody
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(b, &eb) != nil || eb.Code == "" {
			return none, fmt.Errorf("backup: %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		return none, api.ErrorFromCode(eb.Code, eb.Message)
	}
	partial := out + ".partial"
	f, err := os.OpenFile(partial, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return none, err
	}
	defer os.Remove(partial) // gone after the rename
	w := bufio.NewWriterSize(f, 1<<20)
	info, err := badgerstore.VerifyBackup(io.TeeReader(resp.Body, w))
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return none, fmt.Errorf("backup: %w", err)
	}
	if err := os.Rename(partial, out); err != nil {
		return none, err
	}
	if d, err := os.Open(filepath.Dir(out)); err == nil { // make the rename durable
		_ = d.Sync()
		_ = d.Close()
	}
	return info, nil
}

func restoreCommand(g *globals) *cobra.Command {
	var from, data string
	cmd := &cobra.Command{
		Use:   "restore --from FILE --data DIR",
		Short: "Restore a backup into a new data directory, and check it",
		Long: `Restore a backup written by cairn backup into DIR, which must not exist or be
empty. The file's checksum and end are checked, the restored copy is opened
with every integrity check of the server, and then checked as cairn check
does; only then is it moved into DIR. Start the server on DIR to serve it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := os.Open(from)
			if err != nil {
				return err
			}
			defer f.Close()
			info, err := badgerstore.Restore(cmd.Context(), data, bufio.NewReaderSize(f, 1<<20), badgerstore.RestoreOptions{})
			if err != nil {
				if errors.Is(err, history.ErrCorrupt) {
					return corruptError{err}
				}
				return err
			}
			report, err := checkDir(cmd.Context(), data)
			if err != nil {
				return err
			}
			out := struct {
				Restored badgerstore.BackupInfo `json:"restored"`
				Check    *checkOutput           `json:"check"`
			}{info, report}
			if err := g.emit(out, func(w io.Writer) {
				fmt.Fprintf(w, "restored %s into %s: %d keys (%d events), up to commit %d\n", from, data, info.Keys, info.Events, info.Seq)
				report.print(w)
			}); err != nil {
				return err
			}
			return report.verdict()
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the backup file")
	cmd.Flags().StringVar(&data, "data", "", "the data directory to create (must not exist or be empty)")
	_ = cmd.MarkFlagRequired("from")
	_ = cmd.MarkFlagRequired("data")
	return cmd
}

func checkCommand(g *globals) *cobra.Command {
	var data string
	var sf storeFlags
	cmd := &cobra.Command{
		Use:   "check (--data DIR | --store DIR|URL)",
		Short: "Verify a stopped server's data directory, or a PostgreSQL store",
		Long: `Verify a data directory no server is running on: the store's own integrity
checks (no acknowledged commit lost, logs and tables undamaged), every
record's checksum, every history contiguous and ending where its run's state
says, the indexes and current-run pointers, and the effects ledger against
the histories. Prints what it found. Exit code 0: nothing wrong; 3: damage
or inconsistency found; 1: the check could not run.

--store takes a data directory or a PostgreSQL URL (postgres://…, with
--schema when the tables are not in "cairn"); without --data or --store,
$` + envStore + ` names the store. A PostgreSQL store that cairn migrate copied
into and did not finish is reported as inconsistent: run the migration again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			report, err := checkStoreOrDir(cmd.Context(), data, &sf)
			if err != nil {
				return err
			}
			if err := g.emit(report, func(w io.Writer) { report.print(w) }); err != nil {
				return err
			}
			return report.verdict()
		},
	}
	cmd.Flags().StringVar(&data, "data", "", "the data directory")
	sf.add(cmd)
	cmd.MarkFlagsMutuallyExclusive("data", "store")
	return cmd
}

// checkStoreOrDir checks the data directory of --data, or the store of
// --store (or $CAIRN_STORE): a directory or a PostgreSQL URL.
func checkStoreOrDir(ctx context.Context, data string, sf *storeFlags) (*checkOutput, error) {
	spec := data
	if spec == "" {
		spec = sf.spec()
	}
	switch {
	case spec == "":
		return nil, usagef("give the store to check: --data DIR, or --store DIR|URL (or set %s)", envStore)
	case isPostgresURL(spec):
		return checkPostgres(ctx, spec, sf.schema)
	}
	return checkDir(ctx, spec)
}

// checkPostgres checks a PostgreSQL store, and that no copy into it was
// left unfinished.
func checkPostgres(ctx context.Context, dbURL, schema string) (*checkOutput, error) {
	st, err := openPostgres(ctx, dbURL, schema)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	out := &checkOutput{URL: redactURL(dbURL), Schema: schema}
	if out.Copy, err = storecopy.ReadState(ctx, st); err != nil {
		return nil, err
	}
	if out.CheckReport, err = engine.Check(ctx, st); err != nil {
		return nil, err
	}
	return out, nil
}

// checkOutput is what cairn check prints.
type checkOutput struct {
	Dir string `json:"dir,omitempty"`
	// URL (password removed) and Schema name a PostgreSQL store.
	URL    string `json:"url,omitempty"`
	Schema string `json:"schema,omitempty"`
	// Copy is the copy cairn migrate made into the store, if it did: a
	// copy not verified holds part of its source only.
	Copy *storecopy.State `json:"copy,omitempty"`
	// Store is the store's refusal to open, when it refused (then nothing
	// else could be checked).
	Store string `json:"store,omitempty"`
	// Losses are data losses accepted earlier (--accept-data-loss).
	Losses []badgerstore.LossRecord `json:"losses,omitempty"`
	// Doubts are the doubt marks the next server start applies (a restore,
	// an accepted loss, cairn effects doubt).
	Doubts []history.DoubtMark `json:"doubts,omitempty"`
	*engine.CheckReport
}

func (c *checkOutput) ok() bool {
	return c.Store == "" && c.CheckReport != nil && c.CheckReport.OK() && (c.Copy == nil || c.Copy.Verified())
}

// where names the store checked.
func (c *checkOutput) where() string {
	if c.URL != "" {
		return c.URL + " (schema " + c.Schema + ")"
	}
	return c.Dir
}

// verdict is the command's error: a silent one with exit code 3 when
// something is wrong (the report said what).
func (c *checkOutput) verdict() error {
	if c.ok() {
		return nil
	}
	return silentError{corruptError{errors.New("damage or inconsistency found")}}
}

// checkDir opens dir's store (running its integrity checks) and checks it.
func checkDir(ctx context.Context, dir string) (*checkOutput, error) {
	out := &checkOutput{Dir: dir}
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	switch {
	case errors.Is(err, history.ErrLocked):
		return nil, fmt.Errorf("%w: a server is running on %s: stop it first, or check a restored backup instead", err, dir)
	case errors.Is(err, history.ErrCorrupt):
		out.Store = err.Error()
		return out, nil
	case err != nil:
		return nil, err
	}
	defer st.Close()
	if out.Losses, err = st.Losses(); err != nil {
		return nil, err
	}
	if out.Doubts, _, err = history.DoubtMarks(ctx, st); err != nil {
		return nil, err
	}
	if out.CheckReport, err = engine.Check(ctx, st); err != nil {
		return nil, err
	}
	return out, nil
}

// printCopy says what copy the store holds, if any.
func (c *checkOutput) printCopy(w io.Writer) {
	switch {
	case c.Copy == nil:
	case c.Copy.Verified():
		fmt.Fprintf(w, "note: copied from %s by cairn migrate, verified %s\n", c.Copy.Source, c.Copy.VerifiedAt.Format("2006-01-02 15:04:05Z"))
	default:
		fmt.Fprintf(w, "INCOMPLETE: the copy from %s that cairn migrate began at %s did not finish: the store holds part of it only\n",
			c.Copy.Source, c.Copy.Started.Format("2006-01-02 15:04:05Z"))
		fmt.Fprintln(w, "next: run the same cairn migrate again (it resumes), and serve the store only once it says the copy is verified")
	}
}

// print writes the report for people.
func (c *checkOutput) print(w io.Writer) {
	if c.Store != "" {
		fmt.Fprintf(w, "DAMAGED: the store refuses to open %s:\n  %s\n", c.Dir, c.Store)
		fmt.Fprintln(w, "next: restore a backup (cairn restore), or start the server with --accept-data-loss (docs/reliability.md)")
		return
	}
	r := c.CheckReport
	fmt.Fprintf(w, "checked %s: %d runs (%d open), %d events, %d records, %d ledger entries, %d payload chunks\n",
		c.where(), r.Runs, r.OpenRuns, r.Events, r.Records, r.LedgerEntries, r.Chunks)
	c.printCopy(w)
	for _, l := range c.Losses {
		fmt.Fprintf(w, "note: data loss accepted at %s: %s\n", l.At.Format("2006-01-02 15:04:05Z"), l.Refused)
	}
	for _, m := range c.Doubts {
		fmt.Fprintf(w, "note: in doubt since %s (%s): the next server start puts the side effects of the open runs in doubt\n",
			m.At.Format("2006-01-02 15:04:05Z"), m.Describe())
	}
	if r.OK() && c.ok() {
		fmt.Fprintln(w, "OK: every record's checksum, every history, the run states, indexes, ledger and payload chunks agree")
		return
	}
	if r.OK() {
		return // an unfinished copy, said above
	}
	fmt.Fprintf(w, "%d problems:\n", len(r.Problems))
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, p := range r.Problems {
		where := p.WorkflowID
		if p.RunID != "" {
			where += "/" + p.RunID
		}
		if where == "" {
			where = p.Space + " " + p.Key
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Kind, where, p.Message)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "next: restore a backup (cairn restore) — see docs/reliability.md, \"Operations: backup, restore, check\"")
}
