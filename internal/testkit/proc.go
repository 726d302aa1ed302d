package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitTimeout bounds a wait whose context has no deadline.
const WaitTimeout = time.Minute

// ErrExited is the error of a wait for a line or for readiness whose
// process exited first.
var ErrExited = errors.New("the process exited")

// Limits on what a Proc holds of its output: the lines a wait can see
// (the oldest go first), and the end of stderr when stderr's lines are
// not among them.
const (
	maxHeld     = 32 << 20
	maxStderr   = 1 << 20
	failureTail = 8 << 10 // how much of the output a failure message shows
)

// Cmd is a program for Start (or Run) to run.
type Cmd struct {
	Path string   // the program
	Args []string // its arguments
	Env  []string // added to the test process's environment ("K=V")
	Name string   // what failure messages call it (default: Path's base name)
	// StdoutOnly: the waits see stdout's lines only (a protocol the test
	// reads); stderr is kept, its end, for failure messages. By default
	// the waits see the lines of both, in the order they arrived.
	StdoutOnly bool
}

func (c Cmd) name() string {
	if c.Name != "" {
		return c.Name
	}
	return filepath.Base(c.Path)
}

// command is c as an exec.Cmd killed when ctx ends.
func (c Cmd) command(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.WaitDelay = 10 * time.Second // a grandchild holding the pipes does not hold the test
	return cmd
}

// Proc is a child process and the lines it printed. Its methods that
// fail the test must be called from the test's goroutine.
type Proc struct {
	t      testing.TB
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	exited chan struct{} // closed once the process is reaped
	err    error         // cmd.Wait's, once exited is closed

	mu      sync.Mutex
	lines   []string // the lines waits see, from line number dropped on
	dropped int      // lines let go of, to hold at most maxHeld bytes
	held    int      // bytes in lines
	next    int      // the number of the first line the next wait looks at
	partial [2][]byte
	stderr  []byte        // the end of stderr, with StdoutOnly
	changed chan struct{} // closed (and replaced) when a line arrives or the process exits
}

// Start starts c with a pipe to its stdin (Send writes to it; a child can
// read it to notice the test process is gone) and captures its output
// lines. The process is killed (SIGKILL) and reaped when the test ends;
// its output is logged if the test failed.
func Start(t testing.TB, c Cmd) *Proc {
	t.Helper()
	p := &Proc{t: t, name: c.name(), cmd: c.command(context.Background()), exited: make(chan struct{}), changed: make(chan struct{})}
	p.cmd.Stdout = streamWriter{p, 0, true}
	p.cmd.Stderr = streamWriter{p, 1, !c.StdoutOnly}
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	p.stdin = stdin
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", p.name, err)
	}
	go p.reap()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("%s (pid %d), the end of its output:\n%s", p.name, p.Pid(), p.Tail(failureTail))
		}
	})
	return p
}

// reap waits for the process, keeps an unterminated last line, and tells
// the waits.
func (p *Proc) reap() {
	err := p.cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.partial {
		if len(b) > 0 {
			p.addLine(b)
		}
	}
	p.err = err
	close(p.exited)
	p.notify()
}

// streamWriter splits one of the process's streams into lines.
type streamWriter struct {
	p       *Proc
	stream  int  // 0 stdout, 1 stderr
	visible bool // its lines are the waits'; otherwise stderr's end is kept
}

func (w streamWriter) Write(b []byte) (int, error) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if !w.visible {
		p.stderr = append(p.stderr, b...)
		if len(p.stderr) > maxStderr {
			p.stderr = append([]byte(nil), p.stderr[len(p.stderr)-maxStderr/2:]...)
		}
		return len(b), nil
	}
	buf := append(p.partial[w.stream], b...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		p.addLine(buf[:i])
		buf = buf[i+1:]
	}
	p.partial[w.stream] = append(p.partial[w.stream][:0], buf...)
	p.notify()
	return len(b), nil
}

// addLine appends a line, letting go of the oldest beyond maxHeld bytes.
// The caller holds p.mu.
func (p *Proc) addLine(b []byte) {
	line := string(bytes.TrimSuffix(b, []byte("\r")))
	p.lines = append(p.lines, line)
	p.held += len(line)
	for p.held > maxHeld && len(p.lines) > 1 {
		p.held -= len(p.lines[0])
		p.lines[0] = ""
		p.lines = p.lines[1:]
		p.dropped++
	}
}

// notify wakes the waits. The caller holds p.mu.
func (p *Proc) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Next waits for the next line, after those earlier waits returned, for
// which match holds, and returns it. Its error wraps ErrExited when the
// process exited first, or the context's error. match runs with the
// Proc's lock held: it must not call the Proc. Next does not fail the
// test, and may be called from any goroutine.
func (p *Proc) Next(ctx context.Context, match func(line string) bool) (string, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	p.mu.Lock()
	from := p.next // the lines before it were looked at
	p.mu.Unlock()
	for {
		p.mu.Lock()
		from = max(from, p.dropped)
		for ; from-p.dropped < len(p.lines); from++ {
			if line := p.lines[from-p.dropped]; match(line) {
				p.next = from + 1
				p.mu.Unlock()
				return line, nil
			}
		}
		changed := p.changed
		var exited bool
		select {
		case <-p.exited:
			exited = true
		default:
		}
		p.mu.Unlock()
		if exited {
			return "", fmt.Errorf("%s: %w (%v)", p.name, ErrExited, p.err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return "", fmt.Errorf("%s: %w", p.name, ctx.Err())
		}
	}
}

// bounded gives a context without a deadline one of WaitTimeout.
func bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, WaitTimeout)
}

// WaitFunc waits for the next line for which match holds (see Next) and
// returns it; it fails the test, saying it waited for what, when the
// process exits first or ctx ends.
func (p *Proc) WaitFunc(ctx context.Context, what string, match func(line string) bool) string {
	p.t.Helper()
	line, err := p.Next(ctx, match)
	if err != nil {
		p.t.Fatalf("waiting for %s: %v; the end of its output:\n%s", what, err, p.Tail(failureTail))
	}
	return line
}

// WaitLine waits for the next line that starts with prefix and returns it
// (see WaitFunc).
func (p *Proc) WaitLine(ctx context.Context, prefix string) string {
	p.t.Helper()
	return p.WaitFunc(ctx, fmt.Sprintf("%s to print %q", p.name, prefix), func(l string) bool { return strings.HasPrefix(l, prefix) })
}

// WaitFields is WaitLine split into its fields (strings.Fields): the
// words of a line protocol, the first of them the prefix.
func (p *Proc) WaitFields(ctx context.Context, prefix string) []string {
	p.t.Helper()
	return strings.Fields(p.WaitLine(ctx, prefix))
}

// WaitLog waits for the next JSON log line (zerolog's, as Cairn's
// servers and workers write) whose message is msg, and returns its
// fields.
func (p *Proc) WaitLog(ctx context.Context, msg string) map[string]any {
	p.t.Helper()
	var fields map[string]any
	p.WaitFunc(ctx, fmt.Sprintf("%s to log %q", p.name, msg), func(l string) bool {
		fields = logLine(l, msg)
		return fields != nil
	})
	return fields
}

// logLine decodes a JSON log line whose message is msg; nil otherwise.
func logLine(line, msg string) map[string]any {
	if !strings.HasPrefix(line, "{") || !strings.Contains(line, msg) {
		return nil
	}
	var fields map[string]any
	if json.Unmarshal([]byte(line), &fields) != nil || fields["message"] != msg {
		return nil
	}
	return fields
}

// Lines returns the lines held so far (all but the oldest of a very long
// output) that start with prefix, whether or not a wait returned them.
func (p *Proc) Lines(prefix string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// Output returns the lines held so far, and then, with StdoutOnly, the end
// of stderr.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, l := range p.lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	for _, part := range p.partial {
		b.Write(part)
	}
	if len(p.stderr) > 0 {
		b.WriteString("(stderr:)\n")
		b.Write(p.stderr)
	}
	return b.String()
}

// Tail returns the last n bytes of Output.
func (p *Proc) Tail(n int) string {
	s := p.Output()
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Send writes line and a newline to the process's stdin.
func (p *Proc) Send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		p.t.Fatalf("write to %s: %v", p.name, err)
	}
}

// Pid is the process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Signal sends sig to the process; its error says why it could not (the
// process was reaped).
func (p *Proc) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("%v to %s: %w", sig, p.name, err)
	}
	return nil
}

// Kill kills the process with SIGKILL, if it still runs, and returns once
// it is reaped.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
	_ = p.stdin.Close()
}

// Terminate sends SIGTERM and waits for the process to exit, for grace at
// most, then kills it; it returns once the process is reaped.
func (p *Proc) Terminate(grace time.Duration) {
	_ = p.cmd.Process.Signal(terminate)
	select {
	case <-p.exited:
	case <-time.After(grace):
	}
	p.Kill()
}

// Exited is closed once the process has exited and was reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the process's exit (an *exec.ExitError, or nil for status 0)
// once Exited is closed.
func (p *Proc) Err() error {
	<-p.exited
	return p.err
}

// State is the exited process's state, once Exited is closed.
func (p *Proc) State() *os.ProcessState {
	<-p.exited
	return p.cmd.ProcessState
}

// Wait waits for the process to exit and returns its exit (see Err); it
// fails the test when ctx ends first.
func (p *Proc) Wait(ctx context.Context) error {
	p.t.Helper()
	ctx, cancel := bounded(ctx)
	defer cancel()
	select {
	case <-p.exited:
		return p.err
	case <-ctx.Done():
		p.t.Fatalf("waiting for %s to exit: %v; the end of its output:\n%s", p.name, ctx.Err(), p.Tail(failureTail))
		return nil
	}
}

// Running fails the test if the process has exited.
func (p *Proc) Running() {
	p.t.Helper()
	select {
	case <-p.exited:
		p.t.Fatalf("%s exited: %v; the end of its output:\n%s", p.name, p.err, p.Tail(failureTail))
	default:
	}
}
