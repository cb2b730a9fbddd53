package docs

import (
	"errors"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// ignoreClaim matches what a page says about git and the path before it: "which git ignores",
// "(git-ignored)" (the path is ignored) or "which git does not ignore" (it is not); group 1 is set
// for the negative form.
var ignoreClaim = regexp.MustCompile(`(?i)which git (does not|doesn't) ignore|which git ignores|git-ignored`)

// sentenceEnd matches the end of a sentence or of a list item.
var sentenceEnd = regexp.MustCompile(`\.\s|;\s|\n\s*[-*]\s`)

// TestDocsIgnoreClaimsHold fails when README.md or docs/*.md says git ignores a path that
// .gitignore does not ignore, or the other way round. The path is the last one named in code
// before the claim, in the same sentence ("It writes to `dist/image/` (`IMAGE_DIR`), which git
// ignores").
func TestDocsIgnoreClaimsHold(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	claims := 0
	for _, page := range pages(t) {
		for _, para := range strings.Split(readPage(t, page), "\n\n") {
			for _, loc := range ignoreClaim.FindAllStringSubmatchIndex(para, -1) {
				before := para[:loc[0]]
				if ends := sentenceEnd.FindAllStringIndex(before, -1); len(ends) > 0 {
					before = before[ends[len(ends)-1][1]:]
				}
				before = strings.ReplaceAll(before, "\n", " ")
				paths := repoPath.FindAllStringSubmatch(strings.Join(codeText(before), " "), -1)
				if len(paths) == 0 {
					continue
				}
				path := paths[len(paths)-1][1]
				negative := loc[2] >= 0
				claims++
				ignored, err := gitIgnores(path)
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case negative && ignored:
					t.Errorf("%s says git does not ignore %s, but .gitignore does: %q", page, path, para[max(0, loc[0]-120):loc[1]])
				case !negative && !ignored:
					t.Errorf("%s says git ignores %s, but .gitignore does not: %q", page, path, para[max(0, loc[0]-120):loc[1]])
				}
			}
		}
	}
	if claims == 0 {
		t.Fatal("no page says what git ignores: the docs moved, or the parse is wrong")
	}
}

// gitIgnores reports whether the repository's ignore rules ignore path (which need not exist).
func gitIgnores(path string) (bool, error) {
	cmd := exec.Command("git", "check-ignore", "-q", "--no-index", path)
	cmd.Dir = repoRoot
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1:
		return false, nil
	}
	return false, err
}
