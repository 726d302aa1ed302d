package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestVet runs cairn vet on a package with a nondeterministic workflow
// (findings, exit 1), on one without, and on the repository's examples
// and demo, which must stay clean.
func TestVet(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		exit := cli(append([]string{"vet"}, args...), strings.NewReader(""), &out, &errb)
		return exit, out.String(), errb.String()
	}
	exit, out, errs := run("./testdata/vet/bad")
	want := []string{
		"testdata/vet/bad/bad.go:14:2: time.Sleep in workflow Remind: use sdk.Sleep(ctx, d)",
		"testdata/vet/bad/bad.go:14:13: time.Until in workflow Remind: use t.Sub(sdk.Now(ctx))",
	}
	if exit != 1 || out != strings.Join(want, "\n")+"\n" || errs != "" {
		t.Errorf("cairn vet ./testdata/vet/bad: exit %d, stdout\n%s\nstderr %q; want exit 1 and\n%s", exit, out, errs, strings.Join(want, "\n"))
	}

	exit, out, errs = run("./testdata/vet/bad", "--json")
	var v struct {
		Findings []vetFinding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(out), &v); exit != 1 || err != nil || errs != "" || len(v.Findings) != 2 || v.Findings[0].Line != 14 {
		t.Errorf("cairn vet --json ./testdata/vet/bad: exit %d, %v, stdout\n%s\nstderr %q", exit, err, out, errs)
	}

	if exit, out, errs = run("./testdata/vet/good"); exit != 0 || out != "" || errs != "" {
		t.Errorf("cairn vet ./testdata/vet/good: exit %d, stdout %q, stderr %q", exit, out, errs)
	}
	if exit, out, errs = run("-C", "../..", "./examples/...", "./demo/..."); exit != 0 || out != "" || errs != "" {
		t.Errorf("cairn vet ./examples/... ./demo/...: exit %d, stdout\n%s\nstderr %q", exit, out, errs)
	}
	if exit, _, errs = run("./testdata/vet/no-such-package"); exit != 1 || errs == "" {
		t.Errorf("cairn vet on a missing package: exit %d, stderr %q; want exit 1 and an error", exit, errs)
	}
}
