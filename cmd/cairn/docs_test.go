package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The README says, beside `go run ./cmd/cairn demo`, that the first run
// compiles for minutes in silence, and how to see progress (it said
// nothing: a fresh machine looked stuck for two minutes).
func TestReadmeSaysTheFirstRunCompiles(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	check(t, err)
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "go run ./cmd/cairn demo ") {
			continue
		}
		near := strings.Join(lines[i:min(i+5, len(lines))], "\n")
		if !strings.Contains(near, "compiles") || !strings.Contains(near, "minutes") || !strings.Contains(near, "go run -v") {
			t.Fatalf("the README does not say, beside the demo's command, that it compiles first:\n%s", near)
		}
		return
	}
	t.Fatal("the README has no `go run ./cmd/cairn demo`")
}

// The quickstart builds and writes outside the clone: every binary, data
// directory and exported history goes to $QS (it built into bin/ and
// exported into the clone's root, leaving the tree dirty).
func TestQuickstartWritesOutsideTheTree(t *testing.T) {
	b, err := os.ReadFile("../../docs/quickstart.md")
	check(t, err)
	doc := string(b)
	if strings.Contains(doc, "bin/") {
		t.Error("the quickstart still uses bin/")
	}
	writes := regexp.MustCompile(`(?:go build -o|--data|history export \S+ -o)\s+(\S+)`)
	found := writes.FindAllStringSubmatch(doc, -1)
	if len(found) < 4 {
		t.Fatalf("only %d writes found in the quickstart", len(found))
	}
	for _, m := range found {
		if !strings.HasPrefix(m[1], "$QS/") && !strings.HasPrefix(m[1], "DIR") {
			t.Errorf("the quickstart writes %s inside the clone: %s", m[1], m[0])
		}
	}
}
