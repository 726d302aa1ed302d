package main

import (
	"strings"
	"testing"
)

// `workflow watch` prints a streamed tool call as a call: its name, its
// arguments, and the closing parenthesis (it left it open).
func TestWatchClosesToolCalls(t *testing.T) {
	s := newTestServer(t, false)
	runAssistant(t, s, "assistant-INV-5", "Can we pay INV-5?")
	out := s.must(t, "workflow", "watch", "assistant-INV-5")
	if !strings.Contains(out, `→ lookup_invoice({"invoice":"INV-5"})`) || strings.Count(out, "(") != strings.Count(out, ")") {
		t.Fatalf("watch:\n%s", out)
	}
}
