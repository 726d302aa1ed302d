package ui

import (
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// staticImport matches the module specifier of a static import or
// re-export ("import … from "./x.js"", "import "./x.js"", "export … from").
var staticImport = regexp.MustCompile(`(?m)^\s*(?:import|export)\s+(?:[^"';]*?\s+from\s+)?["']([^"']+)["']`)

// moduleImports returns the embedded modules each module imports,
// by their paths under static/.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	graph := map[string][]string{}
	err := fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, err := staticFiles.ReadFile(p)
		if err != nil {
			return err
		}
		graph[p] = []string{}
		for _, m := range staticImport.FindAllStringSubmatch(string(b), -1) {
			spec := m[1]
			switch {
			case strings.HasPrefix(spec, "/static/"):
				graph[p] = append(graph[p], "static/"+strings.TrimPrefix(spec, "/static/"))
			case strings.HasPrefix(spec, "."):
				graph[p] = append(graph[p], path.Join(path.Dir(p), spec))
			default:
				t.Errorf("%s imports %q: the UI has no build step, so only its own modules", p, spec)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

// The UI's modules import each other without a cycle: a page never
// imports the module that imports it (app.js, the router), only what it
// needs (lib.js). A cycle works until a module uses an import while the
// cycle is still being evaluated, and then fails in the browser alone.
func TestModulesImportWithoutACycle(t *testing.T) {
	graph := moduleImports(t)
	if len(graph["static/app.js"]) == 0 {
		t.Fatalf("no imports found in static/app.js: %v", graph)
	}
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(m string)
	visit = func(m string) {
		switch state[m] {
		case open:
			i := slices.Index(stack, m)
			t.Errorf("modules import each other in a circle: %s", strings.Join(append(slices.Clone(stack[i:]), m), " → "))
			return
		case done:
			return
		}
		if _, ok := graph[m]; !ok {
			t.Errorf("%s imports %s, which is not embedded", stack[len(stack)-1], m)
			return
		}
		state[m] = open
		stack = append(stack, m)
		for _, dep := range graph[m] {
			visit(dep)
		}
		stack = stack[:len(stack)-1]
		state[m] = done
	}
	mods := make([]string, 0, len(graph))
	for m := range graph {
		mods = append(mods, m)
	}
	slices.Sort(mods)
	for _, m := range mods {
		visit(m)
	}
}
