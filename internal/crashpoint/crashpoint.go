// Package crashpoint names the places where a fault test makes a process
// die: around every durable commit of the engine, just before the commit
// (nothing of it reaches the disk) and just after it (it is durable, but
// nobody hears so). Off — the normal case — a point costs one atomic load.
//
// A test process arms a point with an action:
//
//	crashpoint.Arm("CompleteActivity"+crashpoint.After, 3, func() { store.Kill() })
//	defer crashpoint.Disarm()
//
// A server process arms one from its environment, and dies there by
// SIGKILL (no deferred function, no flush, no reply):
//
//	CAIRN_CRASH_AT=CompleteActivity.after:3 cairn server …
//
// The engine's points are named after the API method (or background task)
// whose transaction commits: "<Method>.before" and "<Method>.after"
// (engine.CrashPoints lists them).
package crashpoint

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// The suffixes of a commit's two points.
const (
	Before = ".before"
	After  = ".after"
)

// EnvVar arms a point in a process that calls FromEnv: "name" or
// "name:n" (die at the n-th time the point is reached, default 1).
const EnvVar = "CAIRN_CRASH_AT"

type armed struct {
	name   string
	at     int64
	hits   atomic.Int64
	action func()
	once   sync.Once
}

var (
	current  atomic.Pointer[armed]
	observer atomic.Pointer[func(string)]
)

// Enabled reports whether a point is armed or observed (callers skip the
// work of naming a point when not).
func Enabled() bool { return current.Load() != nil || observer.Load() != nil }

// Observe calls fn with the name of every point reached, until it is
// called again with nil (tests use it to list the points a workload
// passes).
func Observe(fn func(name string)) {
	if fn == nil {
		observer.Store(nil)
		return
	}
	observer.Store(&fn)
}

// Hit is called at a point. When the point is armed and reached for the
// n-th time, the action runs (once).
func Hit(name string) {
	if o := observer.Load(); o != nil {
		(*o)(name)
	}
	a := current.Load()
	if a == nil || a.name != name {
		return
	}
	if a.hits.Add(1) == a.at {
		a.once.Do(a.action)
	}
}

// Arm makes action run the n-th time point name is reached (n < 1 means 1),
// replacing any point armed before.
func Arm(name string, n int, action func()) {
	current.Store(&armed{name: name, at: int64(max(n, 1)), action: action})
}

// Disarm turns the armed point off.
func Disarm() { current.Store(nil) }

// Hits returns how often the armed point was reached.
func Hits() int64 {
	if a := current.Load(); a != nil {
		return a.hits.Load()
	}
	return 0
}

// FromEnv arms the point named by CAIRN_CRASH_AT, if set, to kill this
// process with SIGKILL. It returns the point's name ("" when unset).
func FromEnv() (string, error) {
	v := os.Getenv(EnvVar)
	if v == "" {
		return "", nil
	}
	name, count, _ := strings.Cut(v, ":")
	n := 1
	if count != "" {
		var err error
		if n, err = strconv.Atoi(count); err != nil || n < 1 {
			return "", fmt.Errorf("crashpoint: %s=%q: the count must be a positive integer", EnvVar, v)
		}
	}
	Arm(name, n, func() {
		fmt.Fprintf(os.Stderr, "crashpoint: %s reached (%d): SIGKILL\n", name, n)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill() // SIGKILL on Unix
		}
		select {} // the signal is on its way: never go past the point
	})
	return name, nil
}
