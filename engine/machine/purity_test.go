package machine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// pureImports are the packages the machine may import: computation only,
// and the event and API types. Anything else (a store, the file system,
// the network, a clock, goroutine helpers) belongs to the service.
var pureImports = map[string]bool{
	"crypto/sha256": true, "encoding/hex": true, "errors": true, "fmt": true, "maps": true, "math": true, "slices": true,
	"sort": true, "strconv": true, "strings": true, "time": true,
	"github.com/cairnflow/cairn/engine/api": true, "github.com/cairnflow/cairn/history": true,
}

// clockReads are the functions of package time that read the clock or
// start timers: the machine takes the time as an argument.
var clockReads = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
	"NewTimer": true, "NewTicker": true, "Tick": true}

// TestMachineIsPure: the package imports no store and does no I/O, reads
// no clock and starts no goroutine — what its package doc promises, kept
// so by this test rather than by review.
func TestMachineIsPure(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if path, _ := strconv.Unquote(imp.Path.Value); !pureImports[path] {
				t.Errorf("%s imports %s", fset.Position(imp.Pos()), path)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s starts a goroutine", fset.Position(n.Pos()))
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "time" && clockReads[n.Sel.Name] {
					t.Errorf("%s reads the clock (time.%s)", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
}
