package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"

	"github.com/cairnflow/cairn/internal/vet"
)

// vetFinding is one finding of cairn vet.
type vetFinding struct {
	Pos     string `json:"pos"` // file:line:col
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// vetOutput is what cairn vet found.
type vetOutput struct {
	Packages []string     `json:"packages"`
	Findings []vetFinding `json:"findings"`
}

func vetCommand(g *globals) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "vet [PACKAGES]",
		Short: "Check workflow code for nondeterminism (time, goroutines, channels, maps, randomness, globals, I/O)",
		Long: `Check the workflow code of Go packages (patterns as go build takes them;
default ".") for what breaks deterministic replay: time.Now and time.Sleep,
go statements, channels and select, ranges over maps, math/rand and
crypto/rand, writes to package-level variables, and I/O. Workflow code is
every function whose first parameter is sdk.Context, and the functions of
its module it calls. Each finding is printed as file:line:col: message,
naming the SDK call to use instead. A //cairn:nondeterministic-ok comment
on the line (or the line above) suppresses a finding.

Exit code 0: nothing found; 1: findings (listed), or the packages did not
load. The same analyzer runs under go vet: go vet -vettool=$(which cairn-vet).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := runVet(dir, args)
			if err != nil {
				return err
			}
			if err := g.emit(out, func(w io.Writer) { out.print(w) }); err != nil {
				return err
			}
			if len(out.Findings) > 0 {
				return silentError{fmt.Errorf("%d findings", len(out.Findings))}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&dir, "dir", "C", "", "run in this directory (as go -C), the packages' patterns relative to it")
	return cmd
}

// runVet loads the packages of patterns (in dir) and runs workflowcheck
// on them.
func runVet(dir string, patterns []string) (*vetOutput, error) {
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax | packages.NeedTypes | packages.NeedTypesInfo |
			packages.NeedTypesSizes | packages.NeedImports | packages.NeedModule | packages.NeedDeps,
		Dir: dir,
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("vet: loading %s: %w", strings.Join(patterns, " "), err)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("vet: no packages match %s", strings.Join(patterns, " "))
	}
	var loadErrs []error
	packages.Visit(pkgs, nil, func(p *packages.Package) {
		for _, e := range p.Errors {
			loadErrs = append(loadErrs, errors.New(e.Error()))
		}
	})
	if len(loadErrs) > 0 {
		return nil, fmt.Errorf("vet: the packages do not load: %w", errors.Join(loadErrs...))
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{vet.Analyzer}, pkgs, nil)
	if err != nil {
		return nil, fmt.Errorf("vet: %w", err)
	}
	out := &vetOutput{Findings: []vetFinding{}}
	for _, p := range pkgs {
		out.Packages = append(out.Packages, p.PkgPath)
	}
	base := dir
	if base == "" {
		base = "."
	}
	base, _ = filepath.Abs(base)
	for _, act := range graph.Roots {
		if act.Err != nil {
			return nil, fmt.Errorf("vet: %s: %w", act.Package.PkgPath, act.Err)
		}
		for _, d := range act.Diagnostics {
			p := act.Package.Fset.Position(d.Pos)
			file := p.Filename
			if rel, err := filepath.Rel(base, file); err == nil && !strings.HasPrefix(rel, "..") {
				file = rel
			}
			out.Findings = append(out.Findings, vetFinding{Pos: fmt.Sprintf("%s:%d:%d", file, p.Line, p.Column),
				File: file, Line: p.Line, Column: p.Column, Message: d.Message})
		}
	}
	sort.Slice(out.Findings, func(i, j int) bool {
		a, b := out.Findings[i], out.Findings[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return out, nil
}

func (o *vetOutput) print(w io.Writer) {
	for _, f := range o.Findings {
		fmt.Fprintf(w, "%s: %s\n", f.Pos, f.Message)
	}
}
