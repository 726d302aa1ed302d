package badgerstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/third_party/badger"
	"github.com/cairnflow/cairn/third_party/badger/y"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// corruptFile reports damage to one of the store's files.
func corruptFile(file string, offset int64, format string, args ...any) error {
	return &history.CorruptError{File: file, Offset: offset, Reason: sprintf(format, args...)}
}

// fromBadgerCorrupt turns Badger's *CorruptError into history's.
func fromBadgerCorrupt(err error) error {
	var be *badger.CorruptError
	if errors.As(err, &be) {
		return &history.CorruptError{File: be.Path, Offset: be.Offset, Reason: be.Reason}
	}
	return &history.CorruptError{Offset: -1, Reason: err.Error()}
}

// readError maps a failure to read from Badger: Badger's reads fail only on
// damage (a table block that fails its checksum, a value pointer past the
// end of its value log, an unreadable file) or after Close.
func readError(what string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, history.ErrCorrupt), errors.Is(err, history.ErrClosed):
		return err
	case errors.Is(err, badger.ErrDBClosed):
		return fmt.Errorf("%w: %s: %v", history.ErrClosed, what, err)
	}
	c := fromBadgerCorrupt(err).(*history.CorruptError)
	c.Reason = what + ": " + c.Reason
	return c
}

// writeError maps a failed Badger commit.
func writeError(err error) error {
	switch {
	case y.IsNoSpace(err):
		return fmt.Errorf("%w: badgerstore: commit: %w", history.ErrNoSpace, err)
	case errors.Is(err, badger.ErrCorrupt):
		return fromBadgerCorrupt(err)
	}
	return fmt.Errorf("badgerstore: commit: %w", err)
}

// DamagedError is Open's refusal of a data directory that is damaged or
// lost acknowledged commits. It says which file, where and what, in one
// line an operator can act on, and wraps the *history.CorruptError found
// (errors.Is(err, history.ErrCorrupt) holds).
type DamagedError struct {
	// Dir is the data directory.
	Dir string
	// File is the damaged file's name in Dir; empty when the damage is no
	// one file's (acknowledged commits missing from the database, a
	// damaged record) or the file is outside Dir (then Reason names it).
	File string
	// Offset is where in File (-1: unknown, or not one place).
	Offset int64
	// Reason says what is wrong.
	Reason string
	// Acceptable: Options.AcceptDataLoss would open the store without the
	// lost data (and record the loss). False for damage it cannot go past
	// (a table, a MANIFEST that does not parse), and when the store was
	// opened with AcceptDataLoss already: then only a backup restores it.
	Acceptable bool
	// Err is the damage as the store found it.
	Err *history.CorruptError
	// Since is when the damage was first refused and written down
	// (RefusedFile): every open refuses it until the directory is restored
	// or opened with AcceptDataLoss. Zero when it could not be written.
	Since time.Time
}

// Error says which directory, which file and what, on one line.
func (e *DamagedError) Error() string {
	return "badgerstore: the data directory " + e.Dir + " is damaged: " + e.Detail()
}

// Detail is the damage without the directory: "table 000003.sst: …".
func (e *DamagedError) Detail() string {
	d := e.Reason
	if w := e.Where(); w != "" {
		d = w + ": " + d
	}
	if !e.Since.IsZero() {
		d += " (refused since " + e.Since.UTC().Format(time.RFC3339) + ")"
	}
	return d
}

// Unwrap returns the *history.CorruptError.
func (e *DamagedError) Unwrap() error { return e.Err }

// Where names the damaged file by what it is ("table 000003.sst",
// "write-ahead log 00001.mem at offset 4096"), "" when there is no one file.
func (e *DamagedError) Where() string {
	if e.File == "" {
		return ""
	}
	w := fileRole(e.File)
	if e.Offset >= 0 {
		w += fmt.Sprintf(" at offset %d", e.Offset)
	}
	return w
}

// fileRole names a file of a data directory by what it holds.
func fileRole(name string) string {
	switch {
	case strings.HasSuffix(name, ".sst"):
		return "table " + name
	case strings.HasSuffix(name, ".mem"):
		return "write-ahead log " + name
	case strings.HasSuffix(name, ".vlog"):
		return "value log " + name
	}
	switch name {
	case "MANIFEST":
		return "MANIFEST (the list of tables)"
	case badger.KeyRegistryFileName:
		return name + " (the key registry)"
	case "DISCARD":
		return name + " (the value log's discard statistics)"
	case HWMFile:
		return name + " (the integrity file)"
	}
	return "file " + name
}

// damaged turns a refusal to open dir into a *DamagedError (acceptable:
// AcceptDataLoss would go past it). Errors that are not damage, and
// DamagedErrors, are returned as they are.
func damaged(dir string, acceptable bool, err error) error {
	var de *DamagedError
	var ce *history.CorruptError
	if errors.As(err, &de) || !errors.As(err, &ce) {
		return err
	}
	de = &DamagedError{Dir: dir, Offset: -1, Reason: ce.Reason, Acceptable: acceptable, Err: ce}
	switch rel, rerr := filepath.Rel(dir, ce.File); {
	case ce.File == "":
		de.Reason = recordDamage(ce)
	case rerr == nil && rel == ".":
		// The directory itself: commits missing from it.
	case rerr == nil && !strings.HasPrefix(rel, ".."):
		de.File, de.Offset = rel, ce.Offset
	default:
		de.Reason = ce.File + ": " + ce.Reason
	}
	de.Reason = oneLine(de.Reason)
	return de
}

// oneLine joins the lines of s (some of Badger's errors span several).
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// recordDamage describes damage to a record (not to a file).
func recordDamage(ce *history.CorruptError) string {
	switch {
	case ce.Run.WorkflowID != "" || ce.EventID != 0:
		return fmt.Sprintf("workflow %q run %q event %d: %s", ce.Run.WorkflowID, ce.Run.RunID, ce.EventID, ce.Reason)
	case ce.Space != 0 || ce.Key != nil:
		return fmt.Sprintf("record %x of space %s: %s", ce.Key, ce.Space, ce.Reason)
	}
	return ce.Reason
}
