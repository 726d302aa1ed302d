package y

import (
	"errors"
	"strings"
	"syscall"
)

// ErrNoSpace is matched by errors caused by a full filesystem (ENOSPC or
// EDQUOT) while reserving room for a write (Cairn patch).
var ErrNoSpace = errors.New("badger: no space left on device")

// IsNoSpace reports whether err comes from a full filesystem.
func IsNoSpace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoSpace) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	// Badger flattens many error chains into text.
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// IteratorErr returns the error that stopped it, if it reports one (Cairn
// patch: table iterators stop on a damaged block instead of looking as if
// they ended).
func IteratorErr(it Iterator) error {
	if e, ok := it.(interface{ Err() error }); ok {
		return e.Err()
	}
	return nil
}
