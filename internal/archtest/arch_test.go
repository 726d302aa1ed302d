package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// graph lists the module's packages with their imports, paths of ours made
// relative to the module.
func graph(t *testing.T) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}\t{{join .TestImports \" \"}} {{join .XTestImports \" \"}}\t{{join .Deps \" \"}}", Module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) string { return strings.TrimPrefix(strings.TrimPrefix(p, Module), "/") }
	var pkgs []Package
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		p := Package{Path: rel(f[0])}
		if strings.HasPrefix(p.Path, "third_party/") {
			continue
		}
		for _, imp := range strings.Fields(f[1]) {
			p.Imports = append(p.Imports, rel(imp))
		}
		for _, imp := range strings.Fields(f[2]) {
			p.TestImports = append(p.TestImports, rel(imp))
		}
		for _, imp := range strings.Fields(f[3]) {
			p.Deps = append(p.Deps, rel(imp))
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages: %s", len(pkgs), out)
	}
	return pkgs
}

// TestImportRules: no package of the module imports across a rule.
func TestImportRules(t *testing.T) {
	for _, v := range Check(graph(t), Rules) {
		t.Error(v)
	}
}

// TestRulesCatchBreaks breaks each rule on purpose, on a copy of the real
// graph with one import added, and checks that the rule catches it: a rule
// that cannot fail checks nothing.
func TestRulesCatchBreaks(t *testing.T) {
	breaks := map[string][2]string{ // rule → (importer, import)
		Rules[0].Name:  {"history", "engine/api"},
		Rules[1].Name:  {"sdk", "engine"},
		Rules[2].Name:  {"activities/llm", "sdk"},
		Rules[3].Name:  {"internal/clock", "history"},
		Rules[4].Name:  {"converter", "engine/api"},
		Rules[5].Name:  {"engine", "cmd/cairn/internal/view"},
		Rules[6].Name:  {"engine", "internal/testkit"},
		Rules[7].Name:  {"worker", "github.com/spf13/cobra"},
		Rules[8].Name:  {"worker", "history/badgerstore"},
		Rules[9].Name:  {"engine/machine", "os"},
		Rules[10].Name: {"history/storecopy", "history/badgerstore"},
		Rules[11].Name: {"worker", "go.opentelemetry.io/otel/sdk/trace"},
	}
	if len(breaks) != len(Rules) {
		t.Fatalf("%d rules, %d deliberate breaks: give every rule one", len(Rules), len(breaks))
	}
	base := graph(t)
	for _, r := range Rules {
		br := breaks[r.Name]
		pkgs := append([]Package(nil), base...)
		pkgs = append(pkgs, Package{Path: br[0], Imports: []string{br[1]}, Deps: []string{br[1]}})
		found := false
		for _, v := range Check(pkgs, []Rule{r}) {
			if v.Pkg == br[0] && v.Import == br[1] {
				found = true
			}
		}
		if !found {
			t.Errorf("rule %q does not catch %s importing %s", r.Name, br[0], br[1])
		}
	}
}
