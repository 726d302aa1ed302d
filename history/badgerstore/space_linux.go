//go:build linux

package badgerstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocateFile reserves size bytes of blocks for f.
func allocateFile(f *os.File, size int64) error {
	return unix.Fallocate(int(f.Fd()), 0, 0, size)
}
