package rollout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// Each condition type is set by one function (conditions.go): every setCondition call naming a
// condition, and every meta.SetStatusCondition or RemoveStatusCondition, is found in the
// planner's source, and no condition type is written from two functions.
func TestEachConditionHasOneWriter(t *testing.T) {
	writers := map[string]map[string]bool{} // condition constant → functions that write it
	fset, files := plannerSource(t)
	for _, f := range files {
		name := fset.Position(f.Pos()).Filename
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				arg := 0
				switch sel.Sel.Name {
				case "setCondition":
				case "SetStatusCondition":
					if fn.Name.Name != "setCondition" {
						t.Errorf("%s: %s calls meta.SetStatusCondition; conditions are set through setCondition", name, fn.Name.Name)
					}
					return true
				case "RemoveStatusCondition":
					arg = 1
				default:
					return true
				}
				if len(call.Args) <= arg {
					return true
				}
				cond, ok := call.Args[arg].(*ast.SelectorExpr)
				if !ok {
					t.Errorf("%s: %s writes a condition named by an expression, not a constant", name, fn.Name.Name)
					return true
				}
				if writers[cond.Sel.Name] == nil {
					writers[cond.Sel.Name] = map[string]bool{}
				}
				writers[cond.Sel.Name][fn.Name.Name] = true
				return true
			})
		}
	}
	if len(writers) < 8 {
		t.Fatalf("found writers of %d condition types, want the 8 schemagate sets: %v", len(writers), writers)
	}
	for cond, fns := range writers {
		if len(fns) > 1 {
			names := make([]string, 0, len(fns))
			for n := range fns {
				names = append(names, n)
			}
			sort.Strings(names)
			t.Errorf("%s is written by %d functions: %s", cond, len(fns), strings.Join(names, ", "))
		}
	}
}

// plannerSource parses the planner's own Go files (not its tests), for the tests that check its
// shape.
func plannerSource(t *testing.T) (*token.FileSet, []*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return fset, files
}
