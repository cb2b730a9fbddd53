package rollout

import (
	"go/ast"
	"testing"
)

// viewBuilders are the only functions that may write the view (observedView and trust): newPlanner
// and what it calls to build the view. Each is called only from newPlanner or another builder.
var viewBuilders = map[string]bool{
	"newPlanner": true, "readRecords": true, "matchTemplates": true, "trustAdopted": true, "conflict": true,
	"holdRefusedBudgets": true, "readClusters": true, "schemaPlaceReturned": true, "recoverControls": true,
}

// viewRoot is the field of the planner that e writes through (p.<field>, p.<field>[k], p.<field>.x),
// or "".
func viewRoot(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.IndexExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.ParenExpr:
			e = x.X
		case *ast.SelectorExpr:
			if id, ok := x.X.(*ast.Ident); ok && id.Name == "p" {
				return x.Sel.Name
			}
			e = x.X
		default:
			return ""
		}
	}
}

// The view is built once and read-only after: no stage writes a field of observedView or trust
// outside the builders, and the builders run only while newPlanner builds the view. A stage that
// needs to remember something in this reconcile gets a field of its own state, never the view's.
func TestViewIsReadOnly(t *testing.T) {
	fset, parsed := plannerSource(t)
	fields := map[string]bool{}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok || (ts.Name.Name != "observedView" && ts.Name.Name != "trust") {
				return true
			}
			for _, fl := range ts.Type.(*ast.StructType).Fields.List {
				for _, id := range fl.Names {
					fields[id.Name] = true
				}
			}
			return false
		})
	}
	if len(fields) < 10 || !fields["shards"] || !fields["untrusted"] {
		t.Fatalf("view fields %v: the test no longer finds the view", fields)
	}
	writes := 0
	for _, f := range parsed {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			where := fset.Position(fn.Pos()).Filename + ": " + fn.Name.Name
			wrote := func(e ast.Expr) {
				if field := viewRoot(e); fields[field] {
					writes++
					if !viewBuilders[fn.Name.Name] {
						t.Errorf("%s writes the view's %s; only the builders may (%v)", where, field, viewBuilders)
					}
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.AssignStmt:
					for _, l := range x.Lhs {
						wrote(l)
					}
				case *ast.IncDecStmt:
					wrote(x.X)
				case *ast.CallExpr:
					if id, ok := x.Fun.(*ast.Ident); ok && (id.Name == "delete" || id.Name == "clear") && len(x.Args) > 0 {
						wrote(x.Args[0])
					}
					if sel, ok := x.Fun.(*ast.SelectorExpr); ok && viewBuilders[sel.Sel.Name] && !viewBuilders[fn.Name.Name] {
						if id, ok := sel.X.(*ast.Ident); ok && id.Name == "p" {
							t.Errorf("%s calls the view builder %s after the view is built", where, sel.Sel.Name)
						}
					}
				}
				return true
			})
		}
	}
	if writes == 0 {
		t.Fatal("no write to the view found at all: the test no longer sees the builders")
	}
}
