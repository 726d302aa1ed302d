package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// effectsDoubt marks a stopped server's store in doubt: the step after any
// restore the store cannot see (a filesystem snapshot, a database's
// point-in-time recovery). See docs/reliability.md, "Effects after a
// restore or an accepted loss".
func effectsDoubt(g *globals) *cobra.Command {
	var data, reason, lost string
	cmd := &cobra.Command{
		Use:   "doubt --data DIR --reason WHY [--lost WHAT]",
		Short: "Mark a restored store in doubt: its open runs' side effects are looked up or paused, never run again blindly",
		Long: `Mark the store of a stopped server as recovered: it may hold less than the
outside world saw (it was restored from a snapshot, a copy or a point in
time, by means the store cannot see). When the server next starts, every
scheduled or in-flight SideEffect action of every open run is put in
doubt: its Reconcile lookup runs first, and without one its run pauses for
a person (cairn workflow resolve). Idempotent and Read actions run again as
usual. Run it after any such restore, before the server starts. (cairn
restore and --accept-data-loss leave the same mark by themselves.)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(reason) == "" {
				return usagef("--reason is required: say what was restored, from when")
			}
			mark := history.DoubtMark{At: time.Now().UTC(), Source: history.DoubtOperator, Reason: reason, Lost: lost}
			if err := markDir(cmd, data, mark); err != nil {
				return err
			}
			return g.emit(struct {
				Dir  string            `json:"dir"`
				Mark history.DoubtMark `json:"mark"`
			}{data, mark}, func(w io.Writer) { printMark(w, data, mark) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&data, "data", "", "the data directory of the stopped server")
	f.StringVar(&reason, "reason", "", "what was restored, from when (shown with every action put in doubt)")
	f.StringVar(&lost, "lost", "", "what is known to be lost, if anything")
	_ = cmd.MarkFlagRequired("data")
	return cmd
}

// markDir writes mark into the store in dir, which no server may hold.
func markDir(cmd *cobra.Command, dir string, mark history.DoubtMark) error {
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	switch {
	case errors.Is(err, history.ErrLocked):
		return fmt.Errorf("%w: a server is running on %s: stop it first (the mark is read when the server starts)", err, dir)
	case errors.Is(err, history.ErrCorrupt):
		return corruptError{err}
	case err != nil:
		return err
	}
	if err := history.MarkInDoubt(cmd.Context(), st, mark); err != nil {
		_ = st.Close()
		return err
	}
	return st.Close()
}

func printMark(w io.Writer, dir string, m history.DoubtMark) {
	fmt.Fprintf(w, "marked %s in doubt: %s\n", dir, m.Describe())
	fmt.Fprintln(w, "next: start the server; every scheduled or in-flight SideEffect action of its open runs runs its Reconcile lookup first, or pauses its run (cairn workflow list --status paused, cairn effects list --in-doubt)")
}
