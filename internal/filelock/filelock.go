// Package filelock serialises the read-modify-append of a file that
// goroutines and processes share — the demos' fake payment providers keep
// their ledgers so, and number each payment after those before it:
//
//	err := filelock.With(ledger, func() error {
//		n, err := countPayments(ledger) // nobody appends meanwhile
//		…
//		return appendPayment(ledger, fmt.Sprintf("pay_%03d", n+1))
//	})
//
// The lock is flock(2) on the file itself where the system has it (Linux,
// the BSDs, macOS), so processes exclude each other; within a process a
// mutex per path does too, everywhere.
package filelock

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// locks holds a mutex per absolute path, for the goroutines of this
// process.
var locks sync.Map // string → *sync.Mutex

// With runs fn holding an exclusive lock on path, which it creates when
// missing (empty). Every process and goroutine that changes the file must
// do so inside With for the lock to mean anything.
func With(path string, fn func() error) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("filelock: %w", err)
	}
	m, _ := locks.LoadOrStore(abs, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	defer mu.Unlock()
	f, err := os.OpenFile(abs, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("filelock: %w", err)
	}
	defer f.Close()
	if err := lock(f); err != nil {
		return fmt.Errorf("filelock: lock %s: %w", abs, err)
	}
	defer unlock(f)
	return fn()
}
