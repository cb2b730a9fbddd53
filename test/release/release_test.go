//go:build release

// Package release builds the same release twice from this checkout and compares the two folders
// byte for byte (`make release-check`): what `make release` writes depends on the commit and the
// version only. It is not part of `make test-e2e`: cold, it cross-compiles the manager for two
// arches and the plugin for four.
package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schemagate/schemagate/internal/release"
)

func TestReleaseIsReproducible(t *testing.T) {
	ctx := context.Background()
	var dirs []string
	for i := 0; i < 2; i++ {
		start := time.Now()
		dir, err := release.Build(ctx, release.Options{
			ModuleDir: "../..", Version: "v0.1.0", OutDir: t.TempDir(), ImageRepo: "127.0.0.1:5000/schemagate/manager",
			DownloadBase: "http://127.0.0.1:8080/v0.1.0/", Arches: []string{"amd64", "arm64"}, AllowDirty: true,
			Log: func(format string, args ...any) { t.Logf(format, args...) },
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("build %d: %.1fs", i+1, time.Since(start).Seconds())
		dirs = append(dirs, dir)
	}
	names := func(dir string) []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			out = append(out, e.Name())
		}
		return out
	}
	a, b := names(dirs[0]), names(dirs[1])
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatalf("the two releases hold different files: %v and %v", a, b)
	}
	want := []string{"checksums.txt", "crds.yaml", "images.txt", "index.yaml", "install.yaml", "release-notes.md",
		"schemagate-0.1.0.tgz", "schemagate-manager-v0.1.0.oci.tar", "schemagate.yaml", "sbom.cdx.json",
		"kubectl-schemagate_darwin_amd64.tar.gz", "kubectl-schemagate_darwin_arm64.tar.gz",
		"kubectl-schemagate_linux_amd64.tar.gz", "kubectl-schemagate_linux_arm64.tar.gz"}
	for _, w := range want {
		if !contains(a, w) {
			t.Errorf("the release has no %s (it holds %v)", w, a)
		}
	}
	if len(a) != len(want) {
		t.Errorf("the release holds %d files, want %d: %v", len(a), len(want), a)
	}
	for _, n := range a {
		x, err := os.ReadFile(filepath.Join(dirs[0], n))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(dirs[1], n))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two builds of the same commit and version", n)
		}
		t.Logf("%-42s %10.1f KiB", n, float64(len(x))/1024)
	}
	// checksums.txt is right about every other file.
	sums, err := os.ReadFile(filepath.Join(dirs[0], release.ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, l := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		sum, name, _ := strings.Cut(l, "  ")
		data, err := os.ReadFile(filepath.Join(dirs[0], name))
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(data)
		if hex.EncodeToString(s[:]) != sum {
			t.Errorf("checksums.txt is wrong about %s", name)
		}
		listed++
	}
	if listed != len(a)-1 {
		t.Errorf("checksums.txt lists %d files, want %d", listed, len(a)-1)
	}
	// install.yaml runs the image images.txt names, pinned by digest.
	images, _ := os.ReadFile(filepath.Join(dirs[0], "images.txt"))
	ref := strings.SplitN(string(images), "\n", 2)[0]
	install, _ := os.ReadFile(filepath.Join(dirs[0], "install.yaml"))
	if !strings.Contains(ref, "@sha256:") || !strings.Contains(string(install), "image: "+ref+"\n") {
		t.Errorf("install.yaml does not run %q", ref)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
