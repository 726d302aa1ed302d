//go:build !race

package historytest

// raceEnabled reports whether the race detector is on; the heavy subtests
// run smaller under it.
const raceEnabled = false
