//go:build !linux

package badgerstore

import "os"

// allocateFile sets f's size (without a guarantee of blocks).
func allocateFile(f *os.File, size int64) error { return f.Truncate(size) }
