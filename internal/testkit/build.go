package testkit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// builds holds the binaries built by this test process: one temporary
// directory, one binary per package, each built once.
var builds struct {
	mainRan atomic.Bool // Main is running the tests: it removes dir after them
	mu      sync.Mutex
	dir     string
	pkgs    map[string]func() (string, error)
}

// Main runs the package's tests, removes the binaries Build made, and
// exits with the tests' code. A package that builds binaries calls it
// from its TestMain (after deciding whether this process is a child it
// re-executed, which never reaches Main):
//
//	func TestMain(m *testing.M) {
//		if os.Getenv("MY_CHILD") != "" {
//			os.Exit(runChild())
//		}
//		testkit.Main(m)
//	}
//
// after, if given, run once the tests ran, before the exit (another kit's
// own end: testkit.Main(m, pgtest.Done)).
func Main(m *testing.M, after ...func()) {
	builds.mainRan.Store(true)
	code := m.Run()
	builds.mu.Lock()
	if builds.dir != "" {
		_ = os.RemoveAll(builds.dir)
	}
	builds.mu.Unlock()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}

// Cairn returns the path of the cairn binary (./cmd/cairn of this module),
// built once per test process.
func Cairn(t testing.TB) string {
	t.Helper()
	return Build(t, "./cmd/cairn")
}

// Build builds the main package pkg, a path inside this module such as
// "./examples/hello", once per test process, and returns the binary's
// path. It fails the test when the package's TestMain does not call Main
// (nothing would remove the binary) or when the build fails.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	if !builds.mainRan.Load() {
		t.Fatalf("testkit.Build(%q): the package's TestMain must call testkit.Main(m), which removes the binaries it builds", pkg)
	}
	bin, err := buildOnce(pkg)()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// buildOnce returns the function that builds pkg the first time it is
// called and returns that build's outcome every time.
func buildOnce(pkg string) func() (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.pkgs == nil {
		builds.pkgs = map[string]func() (string, error){}
	}
	f, ok := builds.pkgs[pkg]
	if !ok {
		f = sync.OnceValues(func() (string, error) { return build(pkg) })
		builds.pkgs[pkg] = f
	}
	return f
}

// build runs `go build` for pkg from the module's root into the build
// directory.
func build(pkg string) (string, error) {
	if !strings.HasPrefix(pkg, "./") || strings.Contains(pkg, "..") {
		return "", fmt.Errorf("testkit: build %q: want a path inside the module, such as ./cmd/cairn", pkg)
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	dir, err := buildDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(pkg, "./"), "/", "_"), path.Base(pkg))
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testkit: go build %s: %w\n%s", pkg, err, msg)
	}
	return out, nil
}

// buildDir returns the temporary directory the binaries go to, made on
// first use.
func buildDir() (string, error) {
	builds.mu.Lock()
	defer builds.mu.Unlock()
	if builds.dir == "" {
		dir, err := os.MkdirTemp("", "cairn-testkit-bin-")
		if err != nil {
			return "", fmt.Errorf("testkit: %w", err)
		}
		builds.dir = dir
	}
	return builds.dir, nil
}

// moduleRoot is the module's root directory, found once.
var moduleRoot = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("testkit: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("testkit: the test does not run inside a module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
})

// ModuleRoot returns the directory of the go.mod of the module the test
// runs in (the test's working directory is its package's directory).
func ModuleRoot() (string, error) { return moduleRoot() }
