package badgerstore

import (
	"errors"
	"fmt"

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
