package badgerstore

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// moduleRoot returns the directory of Cairn's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", dir, err)
	}
	return dir
}

// TestNoReplaceDirective: Go ignores a dependency's replace directives, so
// a replace in Cairn's go.mod would give programs that import Cairn other
// code than Cairn's tests run. The Badger Cairn uses lives inside this
// module (third_party/badger) instead.
func TestNoReplaceDirective(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "replace") {
			t.Errorf("go.mod:%d: %q: importers of Cairn would not get it", n, line)
		}
		if strings.Contains(line, "dgraph-io/badger") {
			t.Errorf("go.mod:%d: %q: Cairn's Badger is third_party/badger, inside this module", n, line)
		}
	}
}

// TestImporterBuildsThisBadger builds the package list of a program in its
// own module that imports the Badger store, exactly as a user's program
// would (its go.mod points at this tree; Cairn's own go.mod is then only a
// dependency's), and checks that the Badger it links is this module's
// third_party/badger and no other.
//
// The importer's go.mod requires what Cairn's requires, as `go mod tidy`
// would write it, so the go command loads the module graph lazily and
// needs nothing that building Cairn did not already put in the module
// cache: the test passes on a fresh machine whose cache holds only that.
// Nothing is downloaded (GOPROXY=off): a module the importer would need
// and Cairn did not (an upstream Badger a replace in Cairn's go.mod would
// hide from importers) fails the test instead of being fetched.
func TestImporterBuildsThisBadger(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	root := moduleRoot(t)
	user := t.TempDir()
	cairnMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goMod := "module example.com/user\n\ngo 1.26.0\n\nrequire github.com/cairnflow/cairn v0.0.0\n\n" +
		"replace github.com/cairnflow/cairn => " + root + "\n\n" + requireBlocks(string(cairnMod))
	mainGo := "package main\n\nimport _ \"github.com/cairnflow/cairn/history/badgerstore\"\n\nfunc main() {}\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(goMod), "main.go": []byte(mainGo), "go.sum": sum} {
		if err := os.WriteFile(filepath.Join(user, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(gobin, "list", "-mod=readonly", "-deps", "-f", "{{.ImportPath}}\t{{.Dir}}", ".")
	cmd.Dir = user
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=-mod=readonly", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list in an importing module: %v\n%s", err, out)
	}
	var found bool
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		path, dir, _ := strings.Cut(line, "\t")
		if strings.Contains(path, "dgraph-io/badger") {
			t.Errorf("the importer links %s (%s), not Cairn's Badger", path, dir)
		}
		if path == "github.com/cairnflow/cairn/third_party/badger" {
			found = true
			if want := filepath.Join(root, "third_party", "badger"); dir != want {
				t.Errorf("Badger built from %s, want %s", dir, want)
			}
		}
	}
	if !found {
		t.Errorf("the importer does not link github.com/cairnflow/cairn/third_party/badger:\n%s", out)
	}
}

// requireBlocks returns the require directives of a go.mod, as written.
func requireBlocks(goMod string) string {
	var b strings.Builder
	in := false
	for line := range strings.SplitSeq(goMod, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case in:
			b.WriteString(line + "\n")
			in = trimmed != ")"
		case strings.HasPrefix(trimmed, "require ("):
			b.WriteString(line + "\n")
			in = true
		case strings.HasPrefix(trimmed, "require "):
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}
