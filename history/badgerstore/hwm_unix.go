//go:build linux

package badgerstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapHWM maps the integrity file's two slots (allocating them first), or
// returns nil to fall back to writes.
func mapHWM(f *os.File) []byte {
	const size = 2 * hwmSlotSize
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
		return nil
	}
	b, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil
	}
	return b
}

// syncHWM makes the slots durable.
func syncHWM(h *hwmFile) error {
	if h.mapped != nil {
		if err := unix.Msync(h.mapped, unix.MS_SYNC); err != nil {
			return err
		}
	}
	return h.f.Sync()
}

func unmapHWM(h *hwmFile) {
	if h.mapped != nil {
		_ = unix.Munmap(h.mapped)
		h.mapped = nil
	}
}
