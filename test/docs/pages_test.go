package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// repoRoot is the repository's top folder, from this package's folder.
var repoRoot = filepath.Join("..", "..")

// pages returns README.md and every docs/*.md, relative to repoRoot, sorted.
func pages(t *testing.T) []string {
	t.Helper()
	found, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, p := range found {
		rel, err := filepath.Rel(repoRoot, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	sort.Strings(out[1:])
	if len(out) < 5 {
		t.Fatalf("found only %v: the docs folder moved?", out)
	}
	return out
}

func readPage(t *testing.T, page string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// codeText returns the code of a Markdown page: the lines of its fenced blocks and its inline
// code spans, one string each, in order.
func codeText(text string) []string {
	var out []string
	fenced := false
	var prose strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			out = append(out, line)
			continue
		}
		prose.WriteString(line)
		prose.WriteString("\n")
	}
	for _, m := range inlineCode.FindAllStringSubmatch(prose.String(), -1) {
		out = append(out, m[1])
	}
	return out
}

// inlineCode matches a single-backtick code span, which may wrap onto the next line.
var inlineCode = regexp.MustCompile("`([^`]+)`")

// makeTarget matches `make <target>` as a command in code (also after `KEEP=1 ` or `&& `);
// the target is group 1.
var makeTarget = regexp.MustCompile(`(?:^|[\s;&|(])make\s+([a-z][a-z0-9-]*)`)

// makefileTargets returns the targets the Makefile declares (`name:` at the start of a line,
// not a variable assignment).
func makefileTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	rule := regexp.MustCompile(`^([a-zA-Z0-9_-]+):([^=]|$)`)
	for _, line := range strings.Split(string(b), "\n") {
		if m := rule.FindStringSubmatch(line); m != nil {
			targets[m[1]] = true
		}
	}
	if len(targets) < 5 {
		t.Fatalf("read only %d targets from the Makefile", len(targets))
	}
	return targets
}

// TestReadmeNamesEveryCITarget fails when README.md does not name, as `make <target>`, a make
// target that .ci/run calls: a newcomer reads there what CI runs.
func TestReadmeNamesEveryCITarget(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var called []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range makeTarget.FindAllStringSubmatch(line, -1) {
			called = append(called, m[1])
		}
	}
	if len(called) == 0 {
		t.Fatal(".ci/run calls no make target: the parse is wrong")
	}
	readme := readPage(t, "README.md")
	for _, target := range called {
		named := regexp.MustCompile("`make " + regexp.QuoteMeta(target) + "[` ]")
		if !named.MatchString(readme) {
			t.Errorf("README.md does not name `make %s`, which .ci/run calls", target)
		}
	}
}

// TestDocsMakeTargetsExist fails for a `make <target>` in the code of README.md or docs/*.md
// that the Makefile does not declare (a renamed or removed target).
func TestDocsMakeTargetsExist(t *testing.T) {
	targets := makefileTargets(t)
	for _, page := range pages(t) {
		for _, code := range codeText(readPage(t, page)) {
			for _, m := range makeTarget.FindAllStringSubmatch(code, -1) {
				if !targets[m[1]] {
					t.Errorf("%s: `make %s` is not a target of the Makefile (in %q)", page, m[1], code)
				}
			}
		}
	}
}

// mdLink matches an inline Markdown link or image; group 1 is its destination.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestDocsLinksResolve fails for a relative link in README.md or docs/*.md whose file does not
// exist, or whose #fragment names no heading of the page it points to (GitHub's anchors).
func TestDocsLinksResolve(t *testing.T) {
	anchors := map[string]map[string]bool{}
	for _, page := range pages(t) {
		text := readPage(t, page)
		var prose strings.Builder // links inside code are not links
		fenced := false
		for _, line := range strings.Split(text, "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				fenced = !fenced
				continue
			}
			if !fenced {
				prose.WriteString(inlineCode.ReplaceAllString(line, "") + "\n")
			}
		}
		for _, m := range mdLink.FindAllStringSubmatch(prose.String(), -1) {
			dest := m[1]
			if strings.Contains(dest, "://") || strings.HasPrefix(dest, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(dest, "#")
			target := page
			if file != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(page), file))
				if _, err := os.Stat(filepath.Join(repoRoot, target)); err != nil {
					t.Errorf("%s: link %q: %s does not exist", page, dest, target)
					continue
				}
			}
			if frag == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if anchors[target] == nil {
				anchors[target] = headingAnchors(readPage(t, target))
			}
			if !anchors[target][frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", page, dest, target, frag)
			}
		}
	}
}

// headingAnchors returns the anchors GitHub gives the headings of a Markdown page: lower case,
// punctuation other than '-' and '_' dropped, spaces as '-', and "-1", "-2", … for repeats.
func headingAnchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127 && isLetter(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func isLetter(r rune) bool { return strings.ToLower(string(r)) != strings.ToUpper(string(r)) }

func itoa(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// repoPath matches, in code, a path inside one of the repository's top folders (group 1),
// stopping before anything that cannot be part of a path.
var repoPath = regexp.MustCompile(`(?:^|[\s(='"\x60])\.?/?((?:api|cmd|controllers|pkg|internal|hack|test|config|charts|docs|examples|plugins|dist)/[A-Za-z0-9_./*-]*)`)

// goIdent matches a Go identifier after a package path (`pkg/schemareport.Parse`), dropped.
var goIdent = regexp.MustCompile(`\.[A-Z][A-Za-z0-9_]*$`)

// TestDocsPathsExist fails for a repository path named in the code of README.md or docs/*.md
// (`cmd/manager/`, `pkg/rollout/revision_test.go`, `./cmd/schemagate-schema`) that does not
// exist: a file moved or renamed without its docs. A path with '*' is a glob that must match; a
// path git ignores (what a build writes, `dist/image/`) need not exist.
func TestDocsPathsExist(t *testing.T) {
	for _, page := range pages(t) {
		for _, code := range codeText(readPage(t, page)) {
			for _, m := range repoPath.FindAllStringSubmatch(code, -1) {
				p := strings.TrimRight(goIdent.ReplaceAllString(m[1], ""), ".")
				if p == "" || strings.Contains(p, "...") || generated(t, p) {
					continue
				}
				if strings.Contains(p, "*") {
					if found, _ := filepath.Glob(filepath.Join(repoRoot, p)); len(found) == 0 {
						t.Errorf("%s: %s matches nothing (in %q)", page, p, code)
					}
					continue
				}
				if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
					t.Errorf("%s: %s does not exist (in %q)", page, p, code)
				}
			}
		}
	}
}

// generated reports whether git ignores p: a build's output, which a fresh clone lacks.
func generated(t *testing.T, p string) bool {
	t.Helper()
	ignored, err := gitIgnores(p)
	if err != nil {
		t.Fatalf("git check-ignore %s: %v", p, err)
	}
	return ignored
}
