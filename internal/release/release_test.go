package release

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestBuildRefusesBadInputBeforeBuildingAnything(t *testing.T) {
	repo := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		cmd.Dir = repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if err := os.WriteFile(filepath.Join(repo, "CHANGELOG.md"), []byte("## [0.1.0]\n\nx\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", ".")
	git("commit", "-q", "-m", "one")
	if err := os.WriteFile(filepath.Join(repo, "CHANGELOG.md"), []byte("## [0.1.0]\n\nchanged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	for _, c := range []struct {
		name string
		o    Options
		want string
	}{
		{"not a version", Options{Version: "0.1.0"}, "want v<major>"},
		{"pre-release with spaces", Options{Version: "v0.1.0 rc"}, "want v<major>"},
		{"an empty arch", Options{Version: "v0.1.0", Arches: []string{""}}, "GOARCH"},
		{"uncommitted changes", Options{Version: "v0.1.0"}, "uncommitted changes"},
	} {
		c.o.ModuleDir, c.o.OutDir = repo, out
		_, err := Build(context.Background(), c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if entries, _ := os.ReadDir(out); len(entries) != 0 {
		t.Errorf("a refused release left %d entries in the output folder", len(entries))
	}
}
