package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// dataDirWithTable returns a data directory whose store was closed (its
// memtable flushed into a table) and the path of that table.
func dataDirWithTable(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if err := st.Commit(t.Context(), &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: fmt.Appendf(nil, "k%d", i), Value: bytes.Repeat([]byte("v"), 100)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("%d tables, want 1", len(ssts))
	}
	return dir, ssts[0]
}

// TestServerRefusesATruncatedTable: a table cut short is refused with exit
// code 3 and one line that names the directory and the table and says
// what to do — restore a backup; --accept-data-loss cannot go past a
// damaged table, and a server started with it says so too.
func TestServerRefusesATruncatedTable(t *testing.T) {
	dir, sst := dataDirWithTable(t)
	fi, err := os.Stat(sst)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sst, fi.Size()-1); err != nil {
		t.Fatal(err)
	}
	for _, extra := range [][]string{nil, {"--accept-data-loss"}} {
		var out, errb bytes.Buffer
		args := append([]string{"server", "--data", dir, "--listen", "127.0.0.1:0", "--ui-listen", "off", "--log-level", "error"}, extra...)
		code := cli(args, strings.NewReader(""), &out, &errb)
		lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
		last := lines[len(lines)-1]
		want := "error: the data directory " + dir + " is damaged: table " + filepath.Base(sst) + ": "
		if code != exitCorrupt || !strings.HasPrefix(last, want) {
			t.Fatalf("server %v on a truncated table: exit %d, last line\n%s\nwant exit 3 and a line starting %q", extra, code, last, want)
		}
		for _, must := range []string{"restore a backup (cairn restore --from BACKUP --data NEW_DIR, then serve NEW_DIR)", "--accept-data-loss cannot go past this damage"} {
			if !strings.Contains(last, must) {
				t.Errorf("server %v: the refusal does not say %q:\n%s", extra, must, last)
			}
		}
		for _, crash := range []string{"panic", "runtime error", "Recovering", "goroutine"} {
			if strings.Contains(errb.String(), crash) {
				t.Errorf("server %v: the output reads like a crash (%q):\n%s", extra, crash, errb.String())
			}
		}
	}
}

// TestServerRefusalOffersAcceptDataLoss: a directory whose integrity file
// is gone (so acknowledged commits may be missing) is refused naming that
// file, and the refusal offers --accept-data-loss, which goes past it.
func TestServerRefusalOffersAcceptDataLoss(t *testing.T) {
	dir, _ := dataDirWithTable(t)
	if err := os.Remove(filepath.Join(dir, badgerstore.HWMFile)); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := cli([]string{"server", "--data", dir, "--listen", "127.0.0.1:0", "--ui-listen", "off", "--log-level", "error"}, strings.NewReader(""), &out, &errb)
	lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
	last := lines[len(lines)-1]
	if code != exitCorrupt || !strings.HasPrefix(last, "error: the data directory "+dir+" is damaged: "+badgerstore.HWMFile) ||
		!strings.Contains(last, "or start with --accept-data-loss to serve what is intact") {
		t.Fatalf("server without its integrity file: exit %d:\n%s", code, errb.String())
	}
}
