package historytest

import "testing"

// small reports whether the heavy subtests should run smaller: under the
// race detector (several times slower) or with -short.
func small() bool { return raceEnabled || testing.Short() }

// largeHistoryEvents is the length of the LargeHistory run.
func largeHistoryEvents() int {
	if small() {
		return 20_000
	}
	return 100_000
}

// concurrentWriters returns how many writers ConcurrentWriters runs on
// their own runs and how many single-event commits each makes.
func concurrentWriters() (writers, appends int) {
	if small() {
		return 64, 8
	}
	return 64, 25
}
