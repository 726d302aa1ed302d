//go:build unix

package testkit

import "syscall"

// terminate is the signal Terminate sends.
var terminate = syscall.SIGTERM

// Freeze stops the process (SIGSTOP): it holds its connections and does
// nothing until Thaw.
func (p *Proc) Freeze() {
	p.t.Helper()
	p.Signal(syscall.SIGSTOP)
}

// Thaw resumes a frozen process (SIGCONT).
func (p *Proc) Thaw() {
	p.t.Helper()
	p.Signal(syscall.SIGCONT)
}
