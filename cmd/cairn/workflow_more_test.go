package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is an output the test reads while a command writes it; each
// write is announced on written.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{written: make(chan struct{}, 1)} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	select {
	case s.written <- struct{}{}:
	default:
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits (a minute at most) until the output holds want.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for !strings.Contains(s.String(), want) {
		select {
		case <-s.written:
		case <-deadline.C:
			t.Fatalf("no %q within a minute in:\n%s", want, s.String())
		}
	}
}

// runCLI runs the CLI in the background; done receives its exit code.
func runCLI(args []string, stdout, stderr *syncBuffer) (done chan int) {
	done = make(chan int, 1)
	go func() { done <- cli(args, strings.NewReader(""), stdout, stderr) }()
	return done
}

// workflow execute starts a run and prints its result, as start and
// result would.
func TestExecute(t *testing.T) {
	s := newTestServer(t, true)
	if out := s.must(t, "workflow", "execute", "--type", "Size", "--id", "size-x", "--task-queue", testQueue, "--input", `"abcd"`); strings.TrimSpace(out) != "4" {
		t.Fatalf("execute: %q", out)
	}
	out := s.must(t, "workflow", "execute", "--type", "Size", "--id", "size-y", "--task-queue", testQueue, "--input", `"ab"`, "--json")
	var r struct {
		Status string
		Result struct{ JSON int }
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Status != "completed" || r.Result.JSON != 2 {
		t.Fatalf("execute --json: %s (%v)", out, err)
	}
	if _, errs, code := s.run(t, "", "workflow", "execute", "--type", "Refuse", "--id", "refuse-x", "--task-queue", testQueue, "--input", `"no"`); code != 1 || !strings.Contains(errs, "refused: no") {
		t.Fatalf("execute of a failing run: exit %d, %s", code, errs)
	}
}

// workflow show --follow prints the history, then its events as they are
// recorded, and returns when the run closes.
func TestShowFollow(t *testing.T) {
	s := newTestServer(t, true)
	s.must(t, "workflow", "start", "--type", "Hold", "--id", "hold-f", "--task-queue", testQueue, "--input", `"box"`)
	for _, asJSON := range []bool{false, true} {
		args := []string{"workflow", "show", "hold-f", "--follow", "--address", s.addr}
		if asJSON {
			args = append(args, "--json")
		}
		out, errb := newSyncBuffer(), newSyncBuffer()
		done := runCLI(args, out, errb)
		if !asJSON {
			out.waitFor(t, "WorkflowTaskCompleted")
			s.must(t, "workflow", "signal", "hold-f", "--name", "go", "--input", `"ann"`)
		}
		select {
		case code := <-done:
			if code != 0 {
				t.Fatalf("show --follow: exit %d\n%s%s", code, out, errb)
			}
		case <-time.After(time.Minute):
			t.Fatalf("show --follow did not return when the run closed:\n%s", out)
		}
		got := out.String()
		if !asJSON {
			for _, want := range []string{"WorkflowStarted", "SignalReceived", "WorkflowCompleted"} {
				if !strings.Contains(got, want) {
					t.Fatalf("show --follow lacks %s:\n%s", want, got)
				}
			}
			continue
		}
		lines := strings.Split(strings.TrimSpace(got), "\n")
		var last map[string]any
		if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil || last["type"] != "WorkflowCompleted" || len(lines) < 5 {
			t.Fatalf("show --follow --json: %d lines, last %v (%v):\n%s", len(lines), last, err, got)
		}
	}
}

// workflow budget's help says what it does: the limits given replace
// those, the ones omitted are kept (it said the new ones replace the old).
func TestBudgetHelpSaysOmittedLimitsAreKept(t *testing.T) {
	var out, errb bytes.Buffer
	if code := cli([]string{"workflow", "budget", "--help"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	help := strings.Join(strings.Fields(out.String()), " ")
	if !strings.Contains(help, "the limits you omit are kept") || strings.Contains(help, "replace the old ones") {
		t.Fatalf("budget --help:\n%s", out.String())
	}
}

// --timeout bounds execute's and result's wait, and says the run goes on.
func TestWaitTimeout(t *testing.T) {
	s := newTestServer(t, true)
	_, errs, code := s.run(t, "", "workflow", "execute", "--type", "Hold", "--id", "hold-t", "--task-queue", testQueue, "--input", `"x"`, "--timeout", "100ms")
	if code != 1 || !strings.Contains(errs, "did not close within --timeout 100ms; it goes on") {
		t.Fatalf("execute --timeout: exit %d: %s", code, errs)
	}
	_, errs, code = s.run(t, "", "workflow", "result", "hold-t", "--timeout", "100ms", "--json")
	var body map[string]string
	if code != 1 || json.Unmarshal([]byte(errs), &body) != nil || body["code"] != "deadline_exceeded" {
		t.Fatalf("result --timeout --json: exit %d: %s", code, errs)
	}
}
