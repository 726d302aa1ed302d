//go:build linux

package storage_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/testkit"
)

// crashWords are what a refusal must not contain: they read as a crash of
// Cairn, not as a damaged data directory.
var crashWords = []string{"panic", "runtime error", "Recovering", "goroutine", "initIndex", "SIGSEGV"}

// checkRefusal checks that a refusal to open the damaged copy dir reads as
// a damaged data directory, as the store's error (refusal) and as what
// `cairn server` prints on again, a copy damaged the same way: exit code
// 3, and a last line naming the directory and the damaged file (or the
// records, or the lost commits) and saying what to do. It returns what is
// wrong, or "".
//
// The server does not get dir itself: an open that refused may have
// written to it (Badger flushes the WAL it replayed into a table, and the
// integrity file learns the MANIFEST's new size), and some damage is then
// no longer refused.
func checkRefusal(t *testing.T, dir, again string, refusal error) string {
	t.Helper()
	if bad := refusalForm(dir, refusal); bad != "" {
		return bad
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, _ := testkit.CLI(ctx, t, "", "server", "--data", again, "--listen", "127.0.0.1:0", "--ui-listen", "off")
	return serverRefusalForm(again, refusal, out)
}

// refusalForm checks the store's or the engine's error.
func refusalForm(dir string, refusal error) string {
	msg := refusal.Error()
	if w := containsAny(msg, append(crashWords, "\n")...); w != "" {
		return fmt.Sprintf("the error contains %q: %q", w, msg)
	}
	var de *badgerstore.DamagedError
	if !errors.As(refusal, &de) {
		return "" // the engine's: it names the record
	}
	switch {
	case de.Dir != dir:
		return fmt.Sprintf("the error names directory %q, not %q", de.Dir, dir)
	case de.File != "" && fileKind(de.File) == "":
		return fmt.Sprintf("the error names %q, no file of a data directory: %q", de.File, msg)
	case de.File == "" && !strings.Contains(de.Reason, "commit"):
		return fmt.Sprintf("the error names no file and no lost commits: %q", msg)
	}
	return ""
}

// serverRefusalForm checks what `cairn server` printed on the copy.
func serverRefusalForm(dir string, refusal error, out testkit.Output) string {
	lines := strings.Split(strings.TrimSpace(out.Stderr), "\n")
	last := lines[len(lines)-1]
	switch {
	case out.Code != 3:
		return fmt.Sprintf("cairn server exited with %d, want 3:\n%s", out.Code, out.Combined)
	case containsAny(out.Combined, crashWords...) != "":
		return fmt.Sprintf("cairn server's output contains %q:\n%s", containsAny(out.Combined, crashWords...), out.Combined)
	case !strings.HasPrefix(last, "error: the data directory "+dir+" is damaged: "):
		return fmt.Sprintf("cairn server's last line does not say the data directory is damaged: %q", last)
	case !strings.Contains(last, "restore a backup (cairn restore "):
		return fmt.Sprintf("cairn server's last line does not say to restore a backup: %q", last)
	}
	for _, l := range lines[:len(lines)-1] {
		if !strings.HasPrefix(l, "{") {
			return fmt.Sprintf("cairn server printed a line that is neither a log record nor its error: %q", l)
		}
	}
	var de *badgerstore.DamagedError
	if errors.As(refusal, &de) {
		if de.File != "" && !strings.Contains(last, ": "+de.Where()+": ") {
			return fmt.Sprintf("cairn server's last line does not name %s: %q", de.Where(), last)
		}
		if de.Acceptable != strings.Contains(last, "or start with --accept-data-loss") {
			return fmt.Sprintf("cairn server's last line offers --accept-data-loss %v, the store says it would go past the damage %v: %q",
				!de.Acceptable, de.Acceptable, last)
		}
	}
	return ""
}

// containsAny returns the first of words in s, or "".
func containsAny(s string, words ...string) string {
	for _, w := range words {
		if strings.Contains(s, w) {
			return w
		}
	}
	return ""
}
