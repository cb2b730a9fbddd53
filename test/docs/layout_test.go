package docs

import (
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/schemagate/schemagate/internal/image"
)

// goBuildOut matches `go build -o $(BIN)/<binary> <package>` in the Makefile: group 1 is the
// binary's name, group 2 the package.
var goBuildOut = regexp.MustCompile(`go build -o \$\(BIN\)/(\S+) (\./\S+)`)

// TestCommandsLayout holds the binaries to one layout: each lives in its own cmd/<binary>/
// folder (no Go files in cmd/ itself), is built by the Makefile into bin/<binary> from
// ./cmd/<binary>, is named in docs/development.md's layout, and the image's binaries are named
// after their folders, as `go build -o dir/` names them (no rename in the Dockerfile).
func TestCommandsLayout(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join(repoRoot, "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var mains []string
	for _, e := range entries {
		if !e.IsDir() {
			if strings.HasSuffix(e.Name(), ".go") {
				t.Errorf("cmd/%s: a binary's files belong in cmd/<binary>/, one folder per binary", e.Name())
			}
			continue
		}
		if isMainPackage(t, filepath.Join(repoRoot, "cmd", e.Name())) {
			mains = append(mains, e.Name())
		}
	}
	if len(mains) == 0 {
		t.Fatal("no main package under cmd/")
	}

	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	built := map[string]bool{}
	for _, m := range goBuildOut.FindAllStringSubmatch(string(b), -1) {
		name, pkg := m[1], m[2]
		if !strings.HasPrefix(pkg, "./cmd") {
			continue
		}
		if pkg != "./cmd/"+name {
			t.Errorf("Makefile: go build -o $(BIN)/%s %s: a binary is built from ./cmd/%s", name, pkg, name)
			continue
		}
		built[name] = true
	}
	layout := readPage(t, "docs/development.md")
	for _, name := range mains {
		if !built[name] {
			t.Errorf("Makefile: no `go build -o $(BIN)/%s ./cmd/%s`", name, name)
		}
		if !strings.Contains(layout, "`cmd/"+name+"/`") {
			t.Errorf("docs/development.md: the layout does not name `cmd/%s/`", name)
		}
	}

	for _, bin := range image.Binaries {
		if path.Dir(path.Clean(bin.Package)) != "cmd" {
			t.Errorf("internal/image: %s is built from %s, want ./cmd/<binary>", bin.Path, bin.Package)
		}
		if path.Base(bin.Package) != path.Base(bin.Path) {
			t.Errorf("internal/image: %s is built from %s, whose binary go build names %s", bin.Path, bin.Package, path.Base(bin.Package))
		}
	}
}

// isMainPackage reports whether the folder's non-test Go files are package main.
func isMainPackage(t *testing.T, dir string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.PackageClauseOnly)
		if err != nil {
			t.Fatal(err)
		}
		return pf.Name.Name == "main"
	}
	return false
}
