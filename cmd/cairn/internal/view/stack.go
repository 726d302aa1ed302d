package view

import (
	"fmt"
	"path"
	"strings"
)

// Coroutine is one workflow coroutine's stack as people read it: the
// workflow code's frames, innermost first, and the SDK call it waits in.
type Coroutine struct {
	Name string
	// WaitingIn is the SDK call the coroutine is blocked in, e.g.
	// "sdk.(*Future).Get"; empty when it is not in one.
	WaitingIn string
	Frames    []Frame
}

// Frame is one call of workflow code.
type Frame struct {
	Function string // package-qualified, with the package path shortened: "main.Greeting"
	File     string // the last three elements of the path
	Line     int
}

// sdkPrefix marks the frames of the SDK's runtime (and runtime.* the Go
// runtime's), which the readable form leaves out.
const sdkPrefix = "github.com/cairnflow/cairn/sdk."

// Stacks parses the answer of the built-in __stack_trace query (every live
// coroutine's Go stack, each under a "coroutine NAME:" line) into the
// workflow code's frames per coroutine.
func Stacks(raw string) []Coroutine {
	var out []Coroutine
	var cur *Coroutine
	lines := strings.Split(raw, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.HasPrefix(l, "coroutine ") && strings.HasSuffix(l, ":"):
			out = append(out, Coroutine{Name: strings.TrimSuffix(strings.TrimPrefix(l, "coroutine "), ":")})
			cur = &out[len(out)-1]
			continue
		case cur == nil, strings.TrimSpace(l) == "", strings.HasPrefix(l, "\t"), strings.HasPrefix(l, "goroutine "):
			continue
		}
		fn := l
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j]
		}
		created := strings.HasPrefix(fn, "created by ")
		fn = strings.TrimPrefix(fn, "created by ")
		file, line := "", 0
		if i+1 < len(lines) && strings.HasPrefix(lines[i+1], "\t") {
			file, line = fileLine(lines[i+1])
			i++
		}
		if created {
			continue // the SDK's coroutine start, not workflow code
		}
		if strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "reflect.") || strings.HasPrefix(fn, "github.com/cairnflow/cairn/internal/") {
			continue
		}
		if strings.HasPrefix(fn, sdkPrefix) {
			if len(cur.Frames) == 0 {
				cur.WaitingIn = shortFunc(fn) // the outermost SDK frame above the workflow code
			}
			continue
		}
		cur.Frames = append(cur.Frames, Frame{Function: shortFunc(fn), File: file, Line: line})
	}
	return out
}

// StacksText renders Stacks for a terminal.
func StacksText(cs []Coroutine) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "coroutine %s", c.Name)
		if c.WaitingIn != "" {
			fmt.Fprintf(&b, ", waiting in %s", c.WaitingIn)
		}
		b.WriteString(":\n")
		if len(c.Frames) == 0 {
			b.WriteString("    (no workflow code on its stack)\n")
		}
		for _, f := range c.Frames {
			fmt.Fprintf(&b, "    %s\n        %s:%d\n", f.Function, f.File, f.Line)
		}
	}
	return b.String()
}

// fileLine parses "\t/path/to/file.go:40 +0x1d".
func fileLine(l string) (string, int) {
	l = strings.TrimSpace(l)
	if j := strings.LastIndex(l, " +0x"); j > 0 {
		l = l[:j]
	}
	j := strings.LastIndex(l, ":")
	if j < 0 {
		return shortPath(l), 0
	}
	n := 0
	fmt.Sscanf(l[j+1:], "%d", &n)
	return shortPath(l[:j]), n
}

func shortPath(p string) string {
	parts := strings.Split(path.Clean(p), "/")
	if len(parts) > 3 {
		parts = parts[len(parts)-3:]
	}
	return strings.Join(parts, "/")
}

// shortFunc drops a function's package path but its last element:
// "github.com/acme/agents.(*Agent).Run" → "agents.(*Agent).Run".
func shortFunc(fn string) string {
	slash := strings.LastIndex(fn, "/")
	if slash < 0 {
		return fn
	}
	return fn[slash+1:]
}
