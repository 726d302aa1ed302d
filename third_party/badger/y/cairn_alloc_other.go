//go:build !linux

package y

import "os"

// Allocate is a no-op where fallocate does not exist.
func Allocate(*os.File, int64, int64) error { return nil }
