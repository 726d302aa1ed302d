package archtest

import (
	"fmt"
	"slices"
	"strings"
)

// Module is Cairn's module path.
const Module = "github.com/cairnflow/cairn"

// Package is one package of the module and what it imports (paths relative
// to the module, "" prefix stripped; others as they are).
type Package struct {
	Path string
	// Imports are the non-test imports; TestImports those of its _test.go
	// files (in-package and external).
	Imports, TestImports []string
	// Deps are every package it links (its imports, transitively).
	Deps []string
}

// Rule forbids some imports. Applies selects the importing packages;
// Forbidden reports whether an import (of ours, relative, or a standard or
// third-party path) is not allowed for them. Tests says whether the rule
// also covers the package's _test.go files; Linked that it covers every
// package linked in, not only direct imports.
type Rule struct {
	Name      string
	Applies   func(pkg string) bool
	Forbidden func(imp string) bool
	Tests     bool
	Linked    bool
}

// Violation is one import that breaks a rule.
type Violation struct {
	Rule, Pkg, Import string
	Test              bool
}

func (v Violation) String() string {
	where := v.Pkg
	if v.Test {
		where += " (tests)"
	}
	return fmt.Sprintf("%s imports %s: %s", where, v.Import, v.Rule)
}

// ours reports whether imp is a package of this module (relative path).
func ours(imp string) bool {
	return !strings.Contains(strings.SplitN(imp, "/", 2)[0], ".") && !isStd(imp)
}

// isStd reports whether imp is in the standard library; relative paths of
// ours are given a sentinel prefix by Graph, so anything without a dot in
// its first element and not one of our top-level directories is standard.
func isStd(imp string) bool {
	first := strings.SplitN(imp, "/", 2)[0]
	return !strings.Contains(first, ".") && !slices.Contains(topLevel, first)
}

// topLevel are the module's top-level directories holding packages.
var topLevel = []string{"activities", "cmd", "converter", "demo", "engine", "examples", "history", "internal", "sdk", "test", "third_party", "worker"}

func under(prefixes ...string) func(string) bool {
	return func(p string) bool {
		for _, pre := range prefixes {
			if p == pre || strings.HasPrefix(p, pre+"/") {
				return true
			}
		}
		return false
	}
}

func is(paths ...string) func(string) bool {
	return func(p string) bool { return slices.Contains(paths, p) }
}

// groundFloor are the low-level helpers below everything.
var groundFloor = is("internal/clock", "internal/wire", "internal/runpool", "internal/gctune", "internal/crashpoint",
	"internal/tracing", "internal/tracing/otlpenv")

// testOnly are packages only tests may import: the suite's kits, and the
// SDK's test environment (it embeds an engine, so a worker binary must not
// link it).
var testOnly = is("internal/testkit", "internal/pgtest", "internal/storetest", "sdk/testenv")

// workerSide are the packages a worker binary links.
func workerSide(p string) bool {
	return under("sdk", "worker", "activities", "converter")(p) && !testOnly(p)
}

// apps are what the binary and the examples are made of: no library may
// import them.
var apps = under("cmd", "examples", "test")

// Rules are the import rules of docs/architecture.md.
var Rules = []Rule{
	{Name: "history imports nothing of ours", Applies: is("history"),
		Forbidden: ours},
	{Name: "sdk, worker and activities never import the engine (only engine/api)",
		Applies:   workerSide,
		Forbidden: func(imp string) bool { return under("engine")(imp) && imp != "engine/api" }},
	{Name: "activities never import the workflow runtime (sdk) or the worker",
		Applies: under("activities"), Forbidden: under("sdk", "worker")},
	{Name: "the ground floor imports nothing above it",
		Applies:   groundFloor,
		Forbidden: func(imp string) bool { return ours(imp) && !groundFloor(imp) }},
	{Name: "the converters import only history",
		Applies:   is("converter"),
		Forbidden: func(imp string) bool { return ours(imp) && imp != "history" }},
	{Name: "no library imports an app (cmd/, examples/, test/)",
		Applies:   func(p string) bool { return !apps(p) },
		Forbidden: apps, Tests: true},
	{Name: "only tests import the test kits",
		Applies: func(p string) bool { return !testOnly(p) }, Forbidden: testOnly},
	{Name: "the worker library links no CLI framework",
		Applies:   is("worker", "sdk", "sdk/client", "activities"),
		Forbidden: under("github.com/spf13/cobra"), Linked: true},
	{Name: "the worker side links no store",
		Applies:   workerSide,
		Forbidden: under("history/badgerstore", "history/pgstore", "third_party/badger", "github.com/jackc/pgx/v5"), Linked: true},
	{Name: "the run state machine does no I/O: no store, no network, no files, no clock of its own",
		Applies: under("engine/machine"),
		Forbidden: func(imp string) bool {
			return under("history/badgerstore", "history/pgstore", "history/faultstore", "internal/clock", "internal/crashpoint",
				"engine/internal", "os", "net", "syscall", "io/fs", "database", "github.com/jackc")(imp) ||
				(ours(imp) && !is("history", "engine/api", "converter")(imp) && !under("engine/machine")(imp))
		}},
	{Name: "the store copy is written against history.Store only (it links no store)",
		Applies:   is("history/storecopy"),
		Forbidden: func(imp string) bool { return ours(imp) && imp != "history" }}, {Name: "the libraries trace with the OpenTelemetry API only: no SDK, no exporter, no gRPC (internal/tracing/otlpenv is for binaries)",
		Applies:   is("worker", "sdk", "sdk/client", "sdk/agent", "activities", "activities/llm", "internal/tracing", "engine"),
		Forbidden: under("go.opentelemetry.io/otel/sdk", "go.opentelemetry.io/otel/exporters", "google.golang.org/grpc", "internal/tracing/otlpenv"), Linked: true},
}

// Check returns every import of pkgs that breaks a rule.
func Check(pkgs []Package, rules []Rule) []Violation {
	var out []Violation
	for _, p := range pkgs {
		for _, r := range rules {
			if !r.Applies(p.Path) {
				continue
			}
			imports := p.Imports
			if r.Linked {
				imports = p.Deps
			}
			for _, imp := range imports {
				if r.Forbidden(imp) {
					out = append(out, Violation{Rule: r.Name, Pkg: p.Path, Import: imp})
				}
			}
			if !r.Tests {
				continue
			}
			for _, imp := range p.TestImports {
				if imp != p.Path && r.Forbidden(imp) {
					out = append(out, Violation{Rule: r.Name, Pkg: p.Path, Import: imp, Test: true})
				}
			}
		}
	}
	return out
}
