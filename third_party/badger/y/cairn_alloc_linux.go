//go:build linux

package y

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Allocate reserves the blocks of f's byte range [off, off+n) without
// changing its size (fallocate mode 0), so that storing into a memory map
// of that range cannot raise SIGBUS on a full disk (Cairn patch). A full
// filesystem returns an error matching ErrNoSpace; a filesystem without
// fallocate is left as it is.
func Allocate(f *os.File, off, n int64) error {
	if n <= 0 {
		return nil
	}
	for {
		err := unix.Fallocate(int(f.Fd()), 0, off, n)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
			return fmt.Errorf("%w: reserving %d bytes of %s: %w", ErrNoSpace, n, f.Name(), err)
		case errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.ENOSYS):
			return nil
		}
		return fmt.Errorf("fallocate %s: %w", f.Name(), err)
	}
}
