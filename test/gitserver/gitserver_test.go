package gitserver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A client clones each commit over smart HTTP and finds exactly the files committed: a file left
// out of the next commit is gone from it.
func TestCommitsAreServedOverHTTP(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	r, err := s.NewRepo(ctx, "fleet")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.URL, "http://127.0.0.1:") {
		t.Fatalf("URL %s is not on loopback", r.URL)
	}
	clone := func(want map[string]string, sha string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "c")
		if out, err := exec.Command("git", "clone", "--quiet", "--branch", Branch, r.URL, dir).CombinedOutput(); err != nil {
			t.Fatalf("git clone: %v: %s", err, out)
		}
		head, err := exec.Command("git", "-C", dir, "rev-parse", "HEAD").Output()
		if err != nil || strings.TrimSpace(string(head)) != sha {
			t.Fatalf("HEAD %q (%v), want %s", head, err, sha)
		}
		var got []string
		_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			if !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				got = append(got, rel)
				b, _ := os.ReadFile(p)
				if string(b) != want[filepath.ToSlash(rel)] {
					t.Errorf("%s = %q, want %q", rel, b, want[rel])
				}
			}
			return nil
		})
		if len(got) != len(want) {
			t.Errorf("files %v, want %d files", got, len(want))
		}
	}
	v1, err := r.Commit(ctx, "v1", map[string][]byte{"app/a.yaml": []byte("a: 1\n"), "kustomization.yaml": []byte("resources: [app/a.yaml]\n")})
	if err != nil {
		t.Fatal(err)
	}
	clone(map[string]string{"app/a.yaml": "a: 1\n", "kustomization.yaml": "resources: [app/a.yaml]\n"}, v1)
	v2, err := r.Commit(ctx, "v2", map[string][]byte{"kustomization.yaml": []byte("resources: []\n")})
	if err != nil {
		t.Fatal(err)
	}
	if v2 == v1 || len(v2) != 40 {
		t.Fatalf("second commit %q", v2)
	}
	clone(map[string]string{"kustomization.yaml": "resources: []\n"}, v2)
	if _, err := r.Commit(ctx, "escape", map[string][]byte{"../x": nil}); err == nil {
		t.Error("a path leaving the repository was written")
	}
}
