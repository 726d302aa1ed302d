package badgerstore

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cairnflow/cairn/history"
)

// ReserveFile is the name of the space reserve in the data directory: a
// preallocated file the store deletes to be able to open on a full disk,
// and recreates once there is room again.
const ReserveFile = "CAIRN-RESERVE"

// reserveSize is the reserve's size: room for Badger to open (a memtable's
// first WAL chunk, a value-log header) and to write its MANIFEST.
const reserveSize = 8 << 20

// space guards commits against a full disk: a group commit is refused
// with history.ErrNoSpace, before Badger writes anything, while the
// filesystem has fewer than MinFreeBytes available.
//
// The check is a statfs (3 µs on the development machine), made at most
// every Options.SpaceCheckInterval: the floor keeps room for Badger's own
// work; what another process takes in between is caught by Badger, which
// allocates its files' blocks before it writes them (ErrNoSpace, never
// SIGBUS).
type space struct {
	dir      string
	min      int64
	every    time.Duration
	last     time.Time // committer only
	lastFree int64
	missing  atomic.Bool // the reserve file is to be made again
}

// freeBytes returns the bytes available to an unprivileged writer in dir.
func freeBytes(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// check returns history.ErrNoSpace (wrapped) when a commit must not be
// attempted. It runs on the committer.
func (sp *space) check() error {
	if sp.min <= 0 {
		return nil
	}
	now := time.Now()
	free := sp.lastFree
	if sp.every < 0 || now.Sub(sp.last) >= sp.every {
		f, err := freeBytes(sp.dir)
		if err != nil {
			return nil // cannot tell: let the write itself fail if it must
		}
		free, sp.last, sp.lastFree = f, now, f
	}
	if free < sp.min {
		return fmt.Errorf("%w: %d bytes free in %s, below the floor of %d (MinFreeBytes)", history.ErrNoSpace, free, sp.dir, sp.min)
	}
	if sp.missing.Load() && free >= sp.min+reserveSize {
		if makeReserve(sp.dir) == nil {
			sp.missing.Store(false)
		}
	}
	return nil
}

// makeReserve creates the reserve file, fully allocated.
func makeReserve(dir string) error {
	path := filepath.Join(dir, ReserveFile)
	if fi, err := os.Stat(path); err == nil && fi.Size() == reserveSize {
		return nil
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = allocateFile(f, reserveSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// dropReserve deletes the reserve file; it reports whether there was one.
func dropReserve(dir string) bool {
	return os.Remove(filepath.Join(dir, ReserveFile)) == nil
}
