package badgerstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cairnflow/cairn/history"
)

// RefusedFile is the file a refusal leaves in the data directory. An open
// that refuses damage may already have written to the directory (Badger
// replays its write-ahead log and rewrites files on its way to the
// damage; the integrity file is re-created), and some damage would then
// not be seen the next time: a restarted server would serve the older data
// without a word. So a refusal is written down before Open returns it,
// and every later Open refuses again with the same damage until the
// directory is restored (into a new directory) or opened with
// AcceptDataLoss, which records the loss and removes the file.
const RefusedFile = "CAIRN-REFUSED"

// refusalRecord is RefusedFile's content.
type refusalRecord struct {
	At         time.Time `json:"at"`
	File       string    `json:"file,omitempty"`
	Offset     int64     `json:"offset"`
	Reason     string    `json:"reason"`
	Acceptable bool      `json:"acceptable"`
}

// recordRefusal writes de down in its directory (durably: a temporary
// file, fsynced, renamed, the directory fsynced). A refusal that cannot be
// written down says so in its reason: the next open may not see the damage.
func recordRefusal(de *DamagedError, now time.Time) {
	if !de.Since.IsZero() {
		return // read from the file: already written down
	}
	rec := refusalRecord{At: now, File: de.File, Offset: de.Offset, Reason: de.Reason, Acceptable: de.Acceptable}
	if err := writeRefusal(de.Dir, rec); err != nil {
		de.Reason += fmt.Sprintf(" (and the refusal could not be written down, so the next open may not see this damage: %v)", err)
		return
	}
	de.Since = now
}

func writeRefusal(dir string, rec refusalRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, RefusedFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, RefusedFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// priorRefusal returns the refusal written down in dir, or nil. A file
// that does not parse is a refusal too: what it held is unknown.
func priorRefusal(dir string) (*DamagedError, error) {
	b, err := os.ReadFile(filepath.Join(dir, RefusedFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("badgerstore: read %s: %w", filepath.Join(dir, RefusedFile), err)
	}
	var rec refusalRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Reason == "" {
		rec = refusalRecord{Offset: -1, Reason: "an earlier open refused this directory, and its record of why (" + RefusedFile + ") does not parse", Acceptable: true}
	}
	if rec.At.IsZero() {
		rec.At = time.Unix(0, 0).UTC()
	}
	de := &DamagedError{Dir: dir, File: rec.File, Offset: rec.Offset, Reason: rec.Reason, Acceptable: rec.Acceptable, Since: rec.At}
	de.Err = &history.CorruptError{File: filepath.Join(dir, rec.File), Offset: rec.Offset, Reason: rec.Reason}
	return de, nil
}

// clearRefusal removes the written-down refusal (AcceptDataLoss recorded
// the loss).
func clearRefusal(dir string) error {
	err := os.Remove(filepath.Join(dir, RefusedFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("badgerstore: remove %s: %w", RefusedFile, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory, so that a rename or removal in it survives
// a power loss.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// errOrNil returns de as an error, nil (not a typed nil) when there is none.
func errOrNil(de *DamagedError) error {
	if de == nil {
		return nil
	}
	return de
}
