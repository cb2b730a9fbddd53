package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// usesLine matches a step's `uses:` and what follows it.
var usesLine = regexp.MustCompile(`(?m)^\s*-?\s*uses:\s*(\S+)\s*(#.*)?$`)

// pinned is an action at a full commit SHA: a tag can be moved to other code, a commit cannot.
var pinned = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$`)

// Every action a workflow uses is pinned to a commit, with the release it is as a comment, so
// that a moved tag cannot change what the release job runs.
func TestWorkflowActionsArePinned(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows: %v", err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range usesLine.FindAllStringSubmatch(string(b), -1) {
			n++
			if !pinned.MatchString(m[1]) || m[2] == "" {
				t.Errorf("%s: uses %s %s: pin it to a commit SHA, with its release as a comment (# vX.Y.Z)", filepath.Base(f), m[1], m[2])
			}
		}
	}
	if n == 0 {
		t.Fatal("no uses: lines found; the pattern is wrong")
	}
}
