package badgerstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// TestRefusalSticks: a directory whose integrity file was zeroed is
// refused — and the refused open writes the integrity file on its way out
// (closing Badger flushes the replayed log into a table, and the integrity
// file learns the MANIFEST's new size), so without the written-down
// refusal the next open served the database as if nothing had happened. Every later open refuses the same damage
// (saying since when); AcceptDataLoss opens it, records the loss and
// removes the refusal; then a plain open opens.
func TestRefusalSticks(t *testing.T) {
	dir := crashCopy(t, 30, false) // the WAL holds the commits: a refused open's close flushes them
	if err := os.WriteFile(filepath.Join(dir, HWMFile), make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	_, first := Open(Options{Dir: dir})
	checkRefusal(t, "the first open", dir, first, HWMFile, true)
	for i := range 2 {
		_, err := Open(Options{Dir: dir})
		checkRefusal(t, "a later open", dir, err, HWMFile, true)
		var de *DamagedError
		errors.As(err, &de)
		if de.Since.IsZero() || !strings.Contains(err.Error(), "(refused since ") || de.Reason != first.(*DamagedError).Reason {
			t.Fatalf("open %d after the refusal: %v, want the first refusal (%v) and since when", i+2, err, first)
		}
	}
	s, err := Open(Options{Dir: dir, AcceptDataLoss: true})
	if err != nil {
		t.Fatalf("AcceptDataLoss: %v", err)
	}
	losses, err := s.Losses()
	if err != nil || len(losses) != 1 || !strings.Contains(losses[0].Refused, "the integrity file is missing") {
		t.Fatalf("the recorded losses: %+v, %v; want the refusal", losses, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RefusedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refusal is still written down after AcceptDataLoss: %v", err)
	}
	mustOpen(t, Options{Dir: dir}).Close()
}

// TestRefusalFileUnreadable: a refusal file that does not parse still
// refuses (what it held is unknown), and AcceptDataLoss goes past it; a
// directory that could not be opened for another reason (held by another
// store) leaves no refusal behind.
func TestRefusalFileUnreadable(t *testing.T) {
	dir := crashCopy(t, 3, true)
	if err := os.WriteFile(filepath.Join(dir, RefusedFile), []byte("{garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(Options{Dir: dir})
	checkRefusal(t, "an unparseable refusal", dir, err, "", true)
	s := mustOpen(t, Options{Dir: dir, AcceptDataLoss: true})
	if _, err := Open(Options{Dir: dir}); !errors.Is(err, history.ErrLocked) {
		t.Fatalf("a second open of a held directory: %v, want ErrLocked", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RefusedFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refusal file after AcceptDataLoss and a locked open: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
