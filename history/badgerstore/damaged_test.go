package badgerstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// checkRefusal checks that err is Open's refusal of dir as a damaged data
// directory naming file (in dir; "" for no single file) on one line that
// reads as damage, not as a crash, and whether AcceptDataLoss would go
// past it.
func checkRefusal(t *testing.T, what, dir string, err error, file string, acceptable bool) {
	t.Helper()
	var de *DamagedError
	if !errors.As(err, &de) || !errors.Is(err, history.ErrCorrupt) {
		t.Fatalf("%s: %T %v, want a *DamagedError wrapping history.ErrCorrupt", what, err, err)
	}
	msg := err.Error()
	prefix := "badgerstore: the data directory " + dir + " is damaged: "
	if !strings.HasPrefix(msg, prefix) {
		t.Errorf("%s: %q does not start with %q", what, msg, prefix)
	}
	if de.File != file || (file != "" && !strings.Contains(msg, file)) {
		t.Errorf("%s: names file %q (%q), want %q", what, de.File, msg, file)
	}
	for _, crash := range []string{"\n", "panic", "runtime error", "Recovering", "goroutine", "initIndex"} {
		if strings.Contains(msg, crash) {
			t.Errorf("%s: the refusal contains %q, as a crash would: %q", what, crash, msg)
		}
	}
	if de.Acceptable != acceptable {
		t.Errorf("%s: Acceptable %v, want %v (%s)", what, de.Acceptable, acceptable, msg)
	}
}

// tableCopy returns a copy of a closed store's directory and the name of
// its (one) table file.
func tableCopy(t *testing.T) (string, string) {
	t.Helper()
	dir := crashCopy(t, 200, true) // the close flushes the memtable into a table
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("%d table files, want 1", len(ssts))
	}
	return dir, filepath.Base(ssts[0])
}

// TestDamagedTableRefusal: a table cut short or with a zeroed footer —
// where Badger read lengths from the footer unchecked, panicked, and
// reported the recovered panic with a dump of the footer (or ended the
// process) — is refused as a damaged data directory naming the table, on
// one line; AcceptDataLoss cannot go past it.
func TestDamagedTableRefusal(t *testing.T) {
	src, sst := tableCopy(t)
	size := fileSize(filepath.Join(src, sst))
	for _, c := range []struct {
		name   string
		damage func(path string) error
	}{
		{"cut to nothing", func(p string) error { return os.Truncate(p, 0) }},
		{"cut to 3 bytes", func(p string) error { return os.Truncate(p, 3) }},
		{"cut at a third", func(p string) error { return os.Truncate(p, size/3) }},
		{"cut by one byte", func(p string) error { return os.Truncate(p, size-1) }},
		{"footer zeroed", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			copy(b[len(b)-64:], make([]byte, 64))
			return os.WriteFile(p, b, 0o644)
		}},
		{"checksum length all ones", func(p string) error {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			copy(b[len(b)-4:], bytes.Repeat([]byte{0xff}, 4))
			return os.WriteFile(p, b, 0o644)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := copyTree(src, dir); err != nil {
				t.Fatal(err)
			}
			if err := c.damage(filepath.Join(dir, sst)); err != nil {
				t.Fatal(err)
			}
			_, err := Open(Options{Dir: dir})
			checkRefusal(t, "Open", dir, err, sst, false)
			if !strings.Contains(err.Error(), "table "+sst+": ") {
				t.Errorf("the refusal does not say the file is a table: %v", err)
			}
			_, err = Open(Options{Dir: dir, AcceptDataLoss: true})
			checkRefusal(t, "Open with AcceptDataLoss", dir, err, sst, false)
		})
	}
}

// TestLostCommitsRefusal: commits missing from the database are no one
// file's damage, and AcceptDataLoss goes past them; damage to the WAL
// names the log and its offset, and AcceptDataLoss goes past it too.
func TestLostCommitsRefusal(t *testing.T) {
	dir := crashCopy(t, 5, true)
	h, _, err := openHWM(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.reset(8); err != nil {
		t.Fatal(err)
	}
	if err := h.close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir})
	checkRefusal(t, "lost commits", dir, err, "", true)

	dir = crashCopy(t, 40, false)
	mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
	b, err := os.ReadFile(mems[0])
	if err != nil {
		t.Fatal(err)
	}
	b[bytes.Index(b, []byte("k20"))] ^= 0x40
	if err := os.WriteFile(mems[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(Options{Dir: dir})
	checkRefusal(t, "damaged WAL", dir, err, filepath.Base(mems[0]), true)
	var de *DamagedError
	if errors.As(err, &de) && (de.Offset <= 0 || !strings.HasPrefix(de.Where(), "write-ahead log "+filepath.Base(mems[0])+" at offset ")) {
		t.Errorf("damaged WAL: where %q, want the log and the offset", de.Where())
	}
}
