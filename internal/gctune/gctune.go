// Package gctune sets the garbage collector for Cairn's long-lived
// processes (the server and workers): their live heap is small and their
// allocation rate high, so Go's default (collect when the heap doubles)
// spends about 6% of their CPU collecting. Measured with cairn bench on the
// development machine: 994 → 929 CPU-µs per workflow across the server and
// the worker with GOGC=400.
package gctune

import (
	"os"
	"runtime/debug"
)

const (
	// Percent is the GOGC used unless the environment sets one.
	Percent = 400
	// MemoryLimit is the soft memory limit used unless GOMEMLIMIT is set:
	// as the heap nears it the collector runs as often as it must, so the
	// higher Percent does not let a large live heap grow five-fold.
	MemoryLimit = 1 << 30
)

// ForServer applies Percent and MemoryLimit where the environment does not
// set GOGC or GOMEMLIMIT.
func ForServer() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(Percent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(MemoryLimit)
	}
}
