package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A command run without its positional argument names it ("missing
// WORKFLOW_ID"; cobra said "accepts 1 arg(s), received 0"), and one given
// too many says which is extra — for every command of the tree that takes
// one.
func TestMissingArgumentsAreNamed(t *testing.T) {
	root := newRoot(&globals{})
	checked := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		names := argNames(c.Use)
		if !c.Runnable() || len(names) == 0 {
			return
		}
		checked++
		path := strings.Fields(c.CommandPath())[1:]
		var out, errb bytes.Buffer
		code := cli(path, strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), "missing "+names[0]) {
			t.Errorf("cairn %s: exit %d: %s", strings.Join(path, " "), code, errb.String())
		}
		errb.Reset()
		code = cli(append(path, "one", "two", "three"), strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), `"two" is one too many`) {
			t.Errorf("cairn %s one two three: exit %d: %s", strings.Join(path, " "), code, errb.String())
		}
	}
	walk(root)
	if checked < 12 {
		t.Fatalf("only %d commands take a positional argument", checked)
	}
}
