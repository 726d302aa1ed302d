// Package wfutil holds helpers that workflow code of another package
// calls: workflowcheck follows the calls through facts.
package wfutil

import (
	"context"
	"sort"
	"time"
)

// Stamp reads the wall clock through a helper.
func Stamp() int64 { return unix() }

func unix() int64 { return time.Now().Unix() }

// Sorted is deterministic.
func Sorted(in map[string]int) []string {
	keys := make([]string, 0, len(in))
	for k := range in {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Fine is nondeterministic only where the directive says it is fine.
func Fine() int64 {
	return time.Now().Unix() //cairn:nondeterministic-ok only logged
}

// Fetch is an activity: no fact.
func Fetch(ctx context.Context, _ string) (int64, error) { return time.Now().Unix(), nil }

// Clock is a type whose method reads the wall clock.
type Clock struct{}

// Now reads the wall clock.
func (Clock) Now() time.Time { return time.Now() }
