// Package docs checks that the documentation names every Event and condition reason schemagate
// can write, so that a reason added to the code without a line in the docs fails the build.
package docs

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// module is the import path of the repository's Go module.
const module = "github.com/schemagate/schemagate"

// sources are the packages whose Event* and Reason* string constants are the reasons schemagate
// writes: pkg/rollout/events.go and controllers (Events) and api/v1alpha1 (condition reasons, in
// routingservice_types.go and any other file of the package). Whole packages are read, so a
// reason declared in a new file is not missed.
var sources = []string{"api/v1alpha1", "pkg/rollout", "controllers"}

// docs must each name every reason, as a code span (`Reason`): the status page, where the API
// manual lists them, and the GitOps page.
var docs = []string{"docs/status.md", "docs/gitops.md"}

// TestDocsNameEveryReason fails for each Event or condition reason that docs/status.md or
// docs/gitops.md does not name.
func TestDocsNameEveryReason(t *testing.T) {
	root := filepath.Join("..", "..")
	reasons, err := collectReasons(root, sources)
	if err != nil {
		t.Fatal(err)
	}
	// A parse that finds nothing would pass vacuously.
	var events, conditions int
	for _, r := range reasons {
		if strings.HasPrefix(r.Name, "Event") {
			events++
		} else {
			conditions++
		}
	}
	if events == 0 || conditions == 0 {
		t.Fatalf("found %d Event* and %d Reason* constants in %v; expected both kinds", events, conditions, sources)
	}

	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		missing := map[string][]string{} // value → constants with it
		for _, r := range reasons {
			if !strings.Contains(text, "`"+r.Value+"`") {
				missing[r.Value] = append(missing[r.Value], r.Name+" ("+r.File+")")
			}
		}
		values := make([]string, 0, len(missing))
		for v := range missing {
			values = append(values, v)
		}
		sort.Strings(values)
		for _, v := range values {
			t.Errorf("%s does not document reason `%s` (%s)", doc, v, strings.Join(missing[v], ", "))
		}
	}
}

// TestReasonTablesAgree fails when the reason tables of docs/status.md and docs/gitops.md (between
// the reasons:begin and reasons:end comments) differ: one list, with the same meanings.
func TestReasonTablesAgree(t *testing.T) {
	tables := make([]string, len(docs))
	for i, doc := range docs {
		b, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		begin := strings.Index(text, "<!-- reasons:begin")
		end := strings.Index(text, "<!-- reasons:end -->")
		if begin < 0 || end < begin {
			t.Fatalf("%s has no reason table between <!-- reasons:begin ... --> and <!-- reasons:end -->", doc)
		}
		tables[i] = text[begin:end]
	}
	for i := 1; i < len(docs); i++ {
		if tables[i] != tables[0] {
			a, b := strings.Split(tables[0], "\n"), strings.Split(tables[i], "\n")
			for j := 0; j < len(a) || j < len(b); j++ {
				var la, lb string
				if j < len(a) {
					la = a[j]
				}
				if j < len(b) {
					lb = b[j]
				}
				if la != lb {
					t.Errorf("the reason tables differ at their line %d:\n%s: %s\n%s: %s", j+1, docs[0], la, docs[i], lb)
					break
				}
			}
		}
	}
}

// TestCollectResolvesConstants checks the resolver on a small module: literals, constants of
// the same package, constants of another package through its import name, concatenation, and
// constants that are not reasons or not strings.
func TestCollectResolvesConstants(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("api/v1alpha1/types.go", `package v1alpha1
const (
	ReasonA = "A"
	ReasonB = ReasonA + "B"
	ConditionReady = "Ready"
)
const ReasonCount = 3
`)
	write("api/v1alpha1/more.go", "package v1alpha1\n\nconst ReasonLater = `Later`\n")
	write("api/v1alpha1/types_test.go", "package v1alpha1\n\nconst ReasonOnlyInTests = \"NotAReason\"\n")
	write("pkg/rollout/events.go", `package rollout

import api "`+module+`/api/v1alpha1"

const (
	EventA     = api.ReasonA
	EventB     = (api.ReasonB)
	EventOwn   = "Own"
	EventAlias = EventOwn
	eventHidden = "Hidden"
)
`)
	reasons, err := collectReasons(root, []string{"api/v1alpha1", "pkg/rollout"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range reasons {
		got[r.Name] = r.Value
	}
	want := map[string]string{
		"ReasonA": "A", "ReasonB": "AB", "ReasonLater": "Later",
		"EventA": "A", "EventB": "AB", "EventOwn": "Own", "EventAlias": "Own",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("collectReasons = %v, want %v", got, want)
	}

	write("pkg/rollout/bad.go", "package rollout\n\nconst EventUnknown = somewhere.Else\n")
	if _, err := collectReasons(root, []string{"api/v1alpha1", "pkg/rollout"}); err == nil {
		t.Error("a reason constant that cannot be resolved must be an error, not skipped")
	}
}

// reason is an exported Event* or Reason* string constant.
type reason struct {
	Name, Value, File string
}

// constant is a constant declaration waiting to be resolved.
type constant struct {
	pkg, name, file string
	expr            ast.Expr
	imports         map[string]string // import name → import path, of its file
}

// collectReasons parses the non-test Go files of dirs (relative to root, inside module) and
// returns their exported Event* and Reason* constants whose value is a string, each resolved to
// its value through constants of the same package or of another of dirs.
func collectReasons(root string, dirs []string) ([]reason, error) {
	consts := map[string]*constant{} // "pkgpath.Name" → constant
	var order []string
	fset := token.NewFileSet()
	for _, dir := range dirs {
		pkgPath := module + "/" + filepath.ToSlash(dir)
		files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
		if err != nil {
			return nil, err
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("no Go files in %s", dir)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, err
			}
			imports := map[string]string{}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				name := p[strings.LastIndex(p, "/")+1:]
				if imp.Name != nil {
					name = imp.Name.Name
				}
				imports[name] = p
			}
			rel, _ := filepath.Rel(root, path)
			for _, decl := range f.Decls {
				gd, ok := decl.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				var last []ast.Expr // a spec without values repeats the previous one's
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					if len(vs.Values) > 0 {
						last = vs.Values
					}
					for i, n := range vs.Names {
						var e ast.Expr
						if i < len(last) {
							e = last[i]
						}
						key := pkgPath + "." + n.Name
						consts[key] = &constant{pkg: pkgPath, name: n.Name, file: filepath.ToSlash(rel), expr: e, imports: imports}
						order = append(order, key)
					}
				}
			}
		}
	}

	var resolve func(key string, seen map[string]bool) (string, bool, error)
	resolve = func(key string, seen map[string]bool) (string, bool, error) {
		c, ok := consts[key]
		if !ok {
			return "", false, fmt.Errorf("constant %s is not declared in %v", key, dirs)
		}
		if seen[key] {
			return "", false, fmt.Errorf("constant %s refers to itself", key)
		}
		seen[key] = true
		defer delete(seen, key)
		var eval func(e ast.Expr) (string, bool, error)
		eval = func(e ast.Expr) (string, bool, error) {
			switch e := e.(type) {
			case *ast.BasicLit:
				if e.Kind != token.STRING {
					return "", false, nil // a number: not a reason
				}
				s, err := strconv.Unquote(e.Value)
				return s, true, err
			case *ast.ParenExpr:
				return eval(e.X)
			case *ast.Ident:
				return resolve(c.pkg+"."+e.Name, seen)
			case *ast.SelectorExpr:
				x, ok := e.X.(*ast.Ident)
				if !ok || c.imports[x.Name] == "" {
					return "", false, fmt.Errorf("%s: %s: cannot resolve %s", c.file, c.name, exprKind(e))
				}
				return resolve(c.imports[x.Name]+"."+e.Sel.Name, seen)
			case *ast.BinaryExpr:
				if e.Op != token.ADD {
					return "", false, nil
				}
				a, okA, err := eval(e.X)
				if err != nil {
					return "", false, err
				}
				b, okB, err := eval(e.Y)
				if err != nil {
					return "", false, err
				}
				return a + b, okA && okB, nil
			case nil:
				return "", false, fmt.Errorf("%s: %s has no value", c.file, c.name)
			}
			return "", false, fmt.Errorf("%s: %s: cannot resolve %s", c.file, c.name, exprKind(e))
		}
		return eval(c.expr)
	}

	var out []reason
	for _, key := range order {
		c := consts[key]
		if !ast.IsExported(c.name) || !(strings.HasPrefix(c.name, "Event") || strings.HasPrefix(c.name, "Reason")) {
			continue
		}
		v, isString, err := resolve(key, map[string]bool{})
		if err != nil {
			return nil, err
		}
		if isString {
			out = append(out, reason{Name: c.name, Value: v, File: c.file})
		}
	}
	return out, nil
}

// exprKind names an expression's syntax type, for error messages.
func exprKind(e ast.Expr) string { return fmt.Sprintf("%T", e) }
