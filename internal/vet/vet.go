// Package vet holds workflowcheck, the analyzer behind `cairn vet` and
// cmd/cairn-vet (go vet -vettool): it flags what makes workflow code
// nondeterministic on replay, each finding with the SDK call to use
// instead.
//
// Workflow code is every function whose first parameter is sdk.Context
// (the named type Context of package github.com/cairnflow/cairn/sdk,
// by type identity), function literals of that shape included, and every
// function of the same package such code calls, transitively. A call to
// a function of another package of the same module is flagged when the
// function's Nondeterministic fact says what it, or what it calls, does.
// Functions whose first parameter is context.Context (activities), and functions
// given to sdk.SideEffect or sdk.MutableSideEffect, are not workflow code.
//
// A finding is suppressed by the directive //cairn:nondeterministic-ok on
// its line or on the line above.
package vet

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/types/typeutil"
)

// SDKPath is the import path of the package whose Context marks workflow
// code.
const SDKPath = "github.com/cairnflow/cairn/sdk"

// Directive, in a comment on a finding's line or the line above it,
// suppresses that finding.
const Directive = "//cairn:nondeterministic-ok"

// Analyzer is workflowcheck: the determinism checker for workflow code.
var Analyzer = &analysis.Analyzer{
	Name: "workflowcheck",
	Doc: `check Cairn workflow code for nondeterminism

Workflow functions (first parameter sdk.Context) and the functions of their
module they call must replay deterministically: no time.Now or time.Sleep,
no go statements, channels, select, mutexes or WaitGroups, no iteration over maps, no math/rand
or crypto/rand, no writes to package-level variables, no I/O. Each finding
names the SDK call to use instead. ` + Directive + ` on the line (or the
line above) suppresses a finding.`,
	URL:       "https://github.com/cairnflow/cairn/blob/main/docs/sdk.md#checking-workflow-code-cairn-vet",
	Run:       run,
	FactTypes: []analysis.Fact{new(Nondeterministic)},
}

// checker is the state of one pass.
type checker struct {
	pass     *analysis.Pass
	decls    map[*types.Func]*ast.FuncDecl // the package's functions with bodies
	exempt   map[ast.Node]bool             // function literals that are not workflow code
	exemptFn map[*types.Func]bool          // functions given to SideEffect
	ok       map[string]map[int]bool       // file name → lines the directive covers
	reported map[token.Pos]bool
	seen     map[*types.Func]bool
	module   string // the package's module path, "" outside a module

	summaries   map[*types.Func]*Nondeterministic // nil: deterministic
	summarizing map[*types.Func]bool
}

// work is a function body to check and why it is workflow code.
type work struct {
	body *ast.BlockStmt
	name string // the function's name
	root string // the workflow function it was reached from, "" for a root
}

func run(pass *analysis.Pass) (any, error) {
	workflows, helpers := importsSDK(pass.Pkg), exportsFacts(pass)
	if !workflows && !helpers {
		return nil, nil
	}
	c := &checker{pass: pass, decls: map[*types.Func]*ast.FuncDecl{}, exempt: map[ast.Node]bool{},
		exemptFn: map[*types.Func]bool{}, ok: map[string]map[int]bool{}, reported: map[token.Pos]bool{}, seen: map[*types.Func]bool{},
		summaries: map[*types.Func]*Nondeterministic{}, summarizing: map[*types.Func]bool{}}
	if pass.Module != nil {
		c.module = pass.Module.Path
	}
	for _, f := range pass.Files {
		c.directives(f)
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				if fn, ok := pass.TypesInfo.Defs[fd.Name].(*types.Func); ok {
					c.decls[fn] = fd
				}
			}
		}
		c.markExempt(f)
	}
	if helpers {
		c.exportFacts()
	}
	if !workflows {
		return nil, nil
	}
	var queue []work
	for _, f := range pass.Files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				fn, _ := pass.TypesInfo.Defs[n.Name].(*types.Func)
				if n.Body != nil && fn != nil && !c.exemptFn[fn] && c.firstParamIsSDKContext(n.Type) {
					c.seen[fn] = true
					queue = append(queue, work{body: n.Body, name: n.Name.Name})
				}
			case *ast.FuncLit:
				if c.exempt[n] {
					return false
				}
				if c.firstParamIsSDKContext(n.Type) {
					queue = append(queue, work{body: n.Body, name: "func literal"})
				}
			}
			return true
		})
	}
	for len(queue) > 0 {
		w := queue[0]
		queue = queue[1:]
		queue = append(queue, c.check(w)...)
	}
	return nil, nil
}

// Nondeterministic is the fact of a function that is not itself workflow
// code (its first parameter is not sdk.Context) but would make workflow
// code calling it nondeterministic: the first finding in it, or in what it
// calls. Workflow code of another package of the same module that calls
// the function is flagged at the call.
type Nondeterministic struct {
	What    string // the finding: "time.Now"
	Instead string // what to use instead
	At      string // where: "util.go:12"
	Via     string // the functions the call goes through to reach it, "" when direct
	Module  string // the module path of the function's package
}

// AFact marks Nondeterministic as an analysis fact.
func (*Nondeterministic) AFact() {}

func (f *Nondeterministic) String() string {
	if f.Via != "" {
		return f.What + " at " + f.At + ", through " + f.Via
	}
	return f.What + " at " + f.At
}

// exportsFacts reports whether the functions of the pass's package get
// Nondeterministic facts: packages outside the standard library (whose
// first path element has a dot) other than the SDK, and not of a
// dependency module (one with a version: its facts would never be used,
// as only workflow code of the same module uses them).
func exportsFacts(pass *analysis.Pass) bool {
	first, _, _ := strings.Cut(pass.Pkg.Path(), "/")
	return strings.Contains(first, ".") && pass.Pkg.Path() != SDKPath && (pass.Module == nil || pass.Module.Version == "")
}

// exportFacts gives every function of the package that is neither
// workflow code nor an activity, and is nondeterministic, its fact.
func (c *checker) exportFacts() {
	for fn, d := range c.decls {
		if c.exemptFn[fn] || c.firstParamIsSDKContext(d.Type) || c.firstParamIs(d.Type, "context", "Context") {
			continue
		}
		if f := c.summary(fn); f != nil {
			c.pass.ExportObjectFact(fn, f)
		}
	}
}

// summary returns fn's first finding, in its body or in what it calls,
// nil if it has none.
func (c *checker) summary(fn *types.Func) *Nondeterministic {
	if f, done := c.summaries[fn]; done || c.summarizing[fn] {
		return f
	}
	c.summarizing[fn] = true
	var found *Nondeterministic
	callees := c.walk(c.decls[fn].Body, func(pos token.Pos, what, instead string) {
		p := c.pass.Fset.Position(pos)
		if found == nil && !c.ok[p.Filename][p.Line] {
			found = &Nondeterministic{What: what, Instead: instead, At: fmt.Sprintf("%s:%d", filepath.Base(p.Filename), p.Line), Module: c.module}
		}
	})
	for _, g := range callees {
		if found != nil {
			break
		}
		if f := c.summary(g); f != nil {
			via := g.Name()
			if f.Via != "" {
				via += " → " + f.Via
			}
			found = &Nondeterministic{What: f.What, Instead: f.Instead, At: f.At, Via: via, Module: c.module}
		}
	}
	c.summaries[fn] = found
	return found
}

func importsSDK(pkg *types.Package) bool {
	if pkg.Path() == SDKPath {
		return false // the SDK itself implements the replacements
	}
	for _, imp := range pkg.Imports() {
		if imp.Path() == SDKPath {
			return true
		}
	}
	return false
}

// directives records the lines each //cairn:nondeterministic-ok covers.
func (c *checker) directives(f *ast.File) {
	for _, cg := range f.Comments {
		for _, cm := range cg.List {
			if !strings.HasPrefix(cm.Text, Directive) {
				continue
			}
			p := c.pass.Fset.Position(cm.Slash)
			if c.ok[p.Filename] == nil {
				c.ok[p.Filename] = map[int]bool{}
			}
			c.ok[p.Filename][p.Line] = true
			c.ok[p.Filename][p.Line+1] = true
		}
	}
}

// markExempt finds the function literals that are not workflow code:
// activities (first parameter context.Context) and what sdk.SideEffect
// and sdk.MutableSideEffect run.
func (c *checker) markExempt(f *ast.File) {
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			if c.firstParamIs(n.Type, "context", "Context") {
				c.exempt[n] = true
			}
		case *ast.CallExpr:
			fn := typeutil.StaticCallee(c.pass.TypesInfo, n)
			if fn == nil || fn.Pkg() == nil || fn.Pkg().Path() != SDKPath || (fn.Name() != "SideEffect" && fn.Name() != "MutableSideEffect") {
				return true
			}
			for _, a := range n.Args {
				switch a := ast.Unparen(a).(type) {
				case *ast.FuncLit:
					c.exempt[a] = true
				case *ast.Ident, *ast.SelectorExpr:
					if g, ok := c.pass.TypesInfo.Uses[identOf(a)].(*types.Func); ok {
						c.exemptFn[g.Origin()] = true
					}
				}
			}
		}
		return true
	})
}

func identOf(e ast.Expr) *ast.Ident {
	switch e := e.(type) {
	case *ast.Ident:
		return e
	case *ast.SelectorExpr:
		return e.Sel
	}
	return nil
}

func (c *checker) firstParamIsSDKContext(ft *ast.FuncType) bool {
	return c.firstParamIs(ft, SDKPath, "Context")
}

// firstParamIs reports whether the function type's first parameter is the
// named type pkg.name.
func (c *checker) firstParamIs(ft *ast.FuncType, pkg, name string) bool {
	if ft.Params == nil || len(ft.Params.List) == 0 {
		return false
	}
	t := c.pass.TypesInfo.TypeOf(ft.Params.List[0].Type)
	if t == nil {
		return false
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

// check reports the findings of one function body and returns the
// functions of the package it calls that are not checked yet.
func (c *checker) check(w work) []work {
	root := w.root
	if root == "" {
		root = w.name
	}
	report := func(pos token.Pos, what, instead string) {
		p := c.pass.Fset.Position(pos)
		if c.reported[pos] || c.ok[p.Filename][p.Line] {
			return
		}
		c.reported[pos] = true
		where := "workflow " + w.name
		if w.root != "" {
			where = w.name + ", called from workflow " + w.root
		}
		c.pass.Reportf(pos, "%s in %s: %s", what, where, instead)
	}
	var next []work
	for _, fn := range c.walk(w.body, report) {
		if !c.seen[fn] {
			c.seen[fn] = true
			d := c.decls[fn]
			next = append(next, work{body: d.Body, name: d.Name.Name, root: root})
		}
	}
	return next
}

// walk calls report for each finding of body (the directive not yet
// applied) and returns the functions of the package with bodies that it
// calls (workflow code when body is), activities and functions given to
// sdk.SideEffect left out.
func (c *checker) walk(body *ast.BlockStmt, report func(token.Pos, string, string)) []*types.Func {
	var next []*types.Func
	info := c.pass.TypesInfo
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			return !c.exempt[n]
		case *ast.GoStmt:
			report(n.Pos(), "go statement", "use sdk.Go(ctx, fn)")
		case *ast.SelectStmt:
			report(n.Pos(), "select statement", "use sdk.NewSelector(ctx)")
		case *ast.SendStmt:
			report(n.Pos(), "channel send", "use an sdk.Channel (sdk.NewChannel) and its Send(ctx, v)")
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				report(n.Pos(), "channel receive", "use an sdk.Channel's Receive(ctx) (sdk.NewChannel, sdk.GetSignalChannel) or sdk.NewSelector")
			}
		case *ast.RangeStmt:
			c.checkRange(n, body, report)
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE {
				for _, l := range n.Lhs {
					c.checkWrite(l, report)
				}
			}
		case *ast.IncDecStmt:
			c.checkWrite(n.X, report)
		case *ast.CallExpr:
			if tv, ok := info.Types[n.Fun]; ok && tv.IsBuiltin() {
				if id, ok := ast.Unparen(n.Fun).(*ast.Ident); ok && id.Name == "make" && len(n.Args) > 0 {
					if _, ok := info.TypeOf(n.Args[0]).Underlying().(*types.Chan); ok {
						report(n.Pos(), "make(chan)", "use sdk.NewChannel[T](ctx) or sdk.NewBufferedChannel[T](ctx, n)")
					}
				}
				return true
			}
			if called, ok := typeutil.Callee(info, n).(*types.Func); ok { // interface methods too: net.Conn's Write
				if what, instead := forbidden(called); what != "" {
					report(n.Pos(), what, instead)
					return true
				}
				if std := c.stdStream(called, n); std != "" {
					report(n.Pos(), "fmt."+called.Name()+" to os."+std, "log with sdk.GetLogger(ctx) (it is quiet on replay)")
					return true
				}
			}
			fn := typeutil.StaticCallee(info, n)
			if fn == nil {
				return true
			}
			fn = fn.Origin()
			if fn.Pkg() != c.pass.Pkg {
				var f Nondeterministic
				if fn.Pkg() != nil && c.pass.ImportObjectFact(fn, &f) && f.Module == c.module {
					report(n.Pos(), "call to "+fn.Pkg().Name()+"."+recvName(fn)+fn.Name()+" ("+f.String()+")", f.Instead)
				}
				return true
			}
			if d := c.decls[fn]; d != nil && !c.exemptFn[fn] && !c.firstParamIs(d.Type, "context", "Context") {
				next = append(next, fn)
			}
		}
		return true
	})
	return next
}

// checkRange flags a range over a map, or over maps.Keys, maps.Values or
// maps.All of one, and over a channel.
func (c *checker) checkRange(n *ast.RangeStmt, body *ast.BlockStmt, report func(token.Pos, string, string)) {
	t := c.pass.TypesInfo.TypeOf(n.X)
	if t == nil {
		return
	}
	switch t.Underlying().(type) {
	case *types.Map:
		if c.orderFree(n, body) {
			return
		}
		report(n.Pos(), "range over a map (its order changes from run to run)", "range over the sorted keys: for _, k := range slices.Sorted(maps.Keys(m))")
		return
	case *types.Chan:
		report(n.Pos(), "range over a channel", "use an sdk.Channel and its Receive(ctx) or ReceiveOK(ctx)")
		return
	}
	if call, ok := ast.Unparen(n.X).(*ast.CallExpr); ok {
		if fn := typeutil.StaticCallee(c.pass.TypesInfo, call); fn != nil && fn.Pkg() != nil && fn.Pkg().Path() == "maps" &&
			(fn.Name() == "Keys" || fn.Name() == "Values" || fn.Name() == "All") {
			report(n.Pos(), "range over maps."+fn.Name()+" (its order changes from run to run)", "range over the sorted keys: for _, k := range slices.Sorted(maps.Keys(m))")
		}
	}
}

// orderFree reports whether a range over a map is one whose order does
// not matter: its body only copies into other maps (m2[k] = v, delete),
// or only appends to a slice that the function then sorts (the
// collect-the-keys-and-sort idiom).
func (c *checker) orderFree(n *ast.RangeStmt, body *ast.BlockStmt) bool {
	info := c.pass.TypesInfo
	if len(n.Body.List) == 1 {
		if as, ok := n.Body.List[0].(*ast.AssignStmt); ok && as.Tok == token.ASSIGN && len(as.Lhs) == 1 && len(as.Rhs) == 1 {
			if id, ok := as.Lhs[0].(*ast.Ident); ok {
				if call, ok := as.Rhs[0].(*ast.CallExpr); ok {
					if fn, ok := ast.Unparen(call.Fun).(*ast.Ident); ok && fn.Name == "append" && len(call.Args) > 0 {
						if arg, ok := ast.Unparen(call.Args[0]).(*ast.Ident); ok && info.Uses[arg] == info.Uses[id] && info.Uses[id] != nil {
							return c.sortedAfter(info.Uses[id], n.End(), body)
						}
					}
				}
			}
		}
	}
	for _, st := range n.Body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if st.Tok != token.ASSIGN {
				return false
			}
			for _, l := range st.Lhs {
				ix, ok := l.(*ast.IndexExpr)
				if !ok {
					return false
				}
				if _, ok := info.TypeOf(ix.X).Underlying().(*types.Map); !ok {
					return false
				}
			}
		case *ast.ExprStmt:
			call, ok := st.X.(*ast.CallExpr)
			if !ok {
				return false
			}
			if fn, ok := ast.Unparen(call.Fun).(*ast.Ident); !ok || fn.Name != "delete" {
				return false
			}
		default:
			return false
		}
	}
	return len(n.Body.List) > 0
}

// sortedAfter reports whether body sorts the slice v after pos, with a
// function of package sort or slices whose name starts with Sort or
// names a sort.Interface conversion (sort.Strings, sort.Slice,
// slices.Sort, slices.SortFunc, sort.Sort(byName(v)) …).
func (c *checker) sortedAfter(v types.Object, pos token.Pos, body *ast.BlockStmt) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if found || !ok || call.Pos() < pos || len(call.Args) == 0 {
			return !found
		}
		fn := typeutil.StaticCallee(c.pass.TypesInfo, call)
		if fn == nil || fn.Pkg() == nil || (fn.Pkg().Path() != "sort" && fn.Pkg().Path() != "slices") {
			return true
		}
		switch fn.Name() {
		case "Strings", "Ints", "Float64s", "Slice", "SliceStable", "Sort", "Stable", "SortFunc", "SortStableFunc":
		default:
			return true
		}
		arg := ast.Unparen(call.Args[0])
		if conv, ok := arg.(*ast.CallExpr); ok && len(conv.Args) == 1 { // sort.Sort(byName(v))
			arg = ast.Unparen(conv.Args[0])
		}
		if id, ok := arg.(*ast.Ident); ok && c.pass.TypesInfo.Uses[id] == v {
			found = true
		}
		return !found
	})
	return found
}

// checkWrite flags an assignment to a package-level variable, or to a
// field or element of one.
func (c *checker) checkWrite(lhs ast.Expr, report func(token.Pos, string, string)) {
	e := lhs
	for {
		switch x := ast.Unparen(e).(type) {
		case *ast.SelectorExpr:
			if v, ok := c.pass.TypesInfo.Uses[x.Sel].(*types.Var); ok && isGlobal(v) {
				report(lhs.Pos(), "write to package-level variable "+v.Name(), "keep workflow state in local variables (replay starts from nothing); read configuration with sdk.SideEffect or pass it in the input")
				return
			}
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.Ident:
			if v, ok := c.pass.TypesInfo.Uses[x].(*types.Var); ok && isGlobal(v) {
				report(lhs.Pos(), "write to package-level variable "+v.Name(), "keep workflow state in local variables (replay starts from nothing); read configuration with sdk.SideEffect or pass it in the input")
			}
			return
		default:
			return
		}
	}
}

func isGlobal(v *types.Var) bool {
	return !v.IsField() && v.Pkg() != nil && v.Parent() == v.Pkg().Scope()
}

// forbidden names a call that is not allowed in workflow code, and what to
// use instead; "" if it is allowed.
func forbidden(fn *types.Func) (what, instead string) {
	if fn.Pkg() == nil {
		return "", ""
	}
	path, name := fn.Pkg().Path(), fn.Name()
	io := "do I/O in an activity (sdk.ExecuteActivity); log with sdk.GetLogger(ctx)"
	switch path {
	case "time":
		switch name {
		case "Now":
			return "time.Now", "use sdk.Now(ctx)"
		case "Since":
			return "time.Since", "use sdk.Now(ctx).Sub(t)"
		case "Until":
			return "time.Until", "use t.Sub(sdk.Now(ctx))"
		case "Sleep":
			return "time.Sleep", "use sdk.Sleep(ctx, d)"
		case "After", "Tick", "NewTimer", "NewTicker", "AfterFunc":
			return "time." + name, "use sdk.NewTimer(ctx, d) (with sdk.NewSelector to wait on several things)"
		}
	case "math/rand", "math/rand/v2", "crypto/rand":
		return path + " (" + name + ")", "get random values and ids through sdk.SideEffect(ctx, fn)"
	case "os", "os/exec", "net", "net/http", "io/ioutil", "syscall":
		if pureIO(fn) {
			return "", ""
		}
		return "I/O (" + path + "." + recvName(fn) + name + ")", io
	case "sync":
		if recv := fn.Signature().Recv(); recv != nil {
			switch name {
			case "Lock", "RLock", "Wait", "Go":
				return "sync." + strings.TrimPrefix(types.TypeString(recv.Type(), (*types.Package).Name), "*sync.") + "." + name + " (it blocks outside the SDK)",
					"wait with sdk.Await(ctx, cond), an sdk.Channel or an sdk.Future; coroutines (sdk.Go) run one at a time and need no locks"
			}
		}
	case "fmt":
		if strings.HasPrefix(name, "Print") {
			return "fmt." + name, "log with sdk.GetLogger(ctx) (it is quiet on replay)"
		}
	case "log":
		if fn.Signature().Recv() == nil && (strings.HasPrefix(name, "Print") || strings.HasPrefix(name, "Fatal") || strings.HasPrefix(name, "Panic")) {
			return "log." + name, "log with sdk.GetLogger(ctx) (it is quiet on replay)"
		}
	}
	return "", ""
}

// pure are the functions of the I/O packages that compute and do no I/O.
var pure = map[string]bool{
	"os.IsNotExist": true, "os.IsExist": true, "os.IsPermission": true, "os.IsTimeout": true, "os.NewSyscallError": true,
	"net.ParseIP": true, "net.ParseCIDR": true, "net.ParseMAC": true, "net.JoinHostPort": true, "net.SplitHostPort": true,
	"net.IPv4": true, "net.IPv4Mask": true, "net.CIDRMask": true,
	"net/http.StatusText": true, "net/http.CanonicalHeaderKey": true, "net/http.NewRequest": true,
	"net/http.NewRequestWithContext": true, "net/http.DetectContentType": true, "net/http.ParseHTTPVersion": true,
	"net/http.ParseTime": true,
}

// pureIO reports whether fn, of an I/O package, does no I/O: a function
// of pure, or a method of a value type (net.IP, http.Header,
// http.Request …) rather than of a file, connection, listener, client,
// transport, server, dialer, resolver or process.
func pureIO(fn *types.Func) bool {
	recv := fn.Signature().Recv()
	if recv == nil {
		return pure[fn.Pkg().Path()+"."+fn.Name()]
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false // an interface's method: net.Conn, net.Listener
	}
	switch name := n.Obj().Name(); {
	case name == "File" || name == "Process" || name == "Cmd" || name == "Client" || name == "Transport" || name == "Server" ||
		name == "Dialer" || name == "Resolver" || name == "ListenConfig" || strings.HasSuffix(name, "Conn") || strings.HasSuffix(name, "Listener"):
		return false
	}
	return true
}

// recvName is "T." for a method of T (or *T), "" for a function.
func recvName(fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return ""
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok {
		return n.Obj().Name() + "."
	}
	return ""
}

// stdStream names the standard stream (Stdout, Stderr) a call of
// fmt.Fprint, Fprintf or Fprintln writes to, "" if it is not one of them.
func (c *checker) stdStream(fn *types.Func, call *ast.CallExpr) string {
	if fn.Pkg() == nil || fn.Pkg().Path() != "fmt" || !strings.HasPrefix(fn.Name(), "Fprint") || len(call.Args) == 0 {
		return ""
	}
	sel, ok := ast.Unparen(call.Args[0]).(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	v, ok := c.pass.TypesInfo.Uses[sel.Sel].(*types.Var)
	if ok && v.Pkg() != nil && v.Pkg().Path() == "os" && (v.Name() == "Stdout" || v.Name() == "Stderr") {
		return v.Name()
	}
	return ""
}
