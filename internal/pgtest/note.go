package pgtest

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// noteEnv, set to "stdout", makes the note go to standard output instead
// of the terminal (pgtest's own tests read it there).
const noteEnv = "CAIRN_PGTEST_NOTE"

// markerPrefix starts the names of the files in os.TempDir() that record
// that a go test run (the parent process of every test binary it starts)
// has printed the note.
const markerPrefix = "cairn-pgtest-note-"

// note prints line once per go test run: the first test binary of the run
// to get here creates the run's marker file and prints; the others find
// it. Markers of runs that have ended are removed.
func note(line string) {
	sweepMarkers()
	if err := claimMarker(os.Getppid()); err != nil {
		return
	}
	w, closeW := noteWriter()
	defer closeW()
	_, _ = io.WriteString(w, line)
}

// noteWriter is the terminal when one can be opened, else standard output.
func noteWriter() (io.Writer, func()) {
	if os.Getenv(noteEnv) != "stdout" {
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			return tty, func() { _ = tty.Close() }
		}
	}
	return os.Stdout, func() {}
}

func markerPath(pid int) string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", markerPrefix, pid))
}

// claimMarker creates the marker of the run whose process is pid, or
// returns errNoted when it exists.
func claimMarker(pid int) error {
	f, err := os.OpenFile(markerPath(pid), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return errNoted
	}
	if err != nil {
		return nil // no marker possible: print anyway
	}
	return f.Close()
}

// sweepMarkers removes the markers of go test runs that have ended.
func sweepMarkers() {
	paths, _ := filepath.Glob(filepath.Join(os.TempDir(), markerPrefix+"*"))
	for _, p := range paths {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), markerPrefix))
		if err != nil || !alive(pid) {
			_ = os.Remove(p)
		}
	}
}

// alive reports whether process pid exists.
func alive(pid int) bool {
	proc, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = proc.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
