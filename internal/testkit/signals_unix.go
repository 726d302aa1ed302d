//go:build unix

package testkit

import "syscall"

// terminate is the signal Terminate sends.
var terminate = syscall.SIGTERM

// Freeze stops the process (SIGSTOP): it holds its connections and does
// nothing until Thaw. It fails the test if the process was reaped.
func (p *Proc) Freeze() {
	p.t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		p.t.Fatal(err)
	}
}

// Thaw resumes a frozen process (SIGCONT). It fails the test if the
// process was reaped.
func (p *Proc) Thaw() {
	p.t.Helper()
	if err := p.Signal(syscall.SIGCONT); err != nil {
		p.t.Fatal(err)
	}
}
