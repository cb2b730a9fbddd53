//go:build e2e

package e2e

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/schemagate/schemagate/internal/release"
)

// The release the upgrade starts from, and the one this checkout makes.
const (
	// previousVersion is previousCommit: the last commit whose CHANGELOG.md had an empty
	// [Unreleased] section under the finished [0.1.0] one. No tag is published from this
	// repository yet, so the test names the commit.
	previousVersion = "v0.1.0"
	previousCommit  = "0918b5339921f7d7015d60c3da0fda0f665e671d"
	// currentVersion is this checkout released as a candidate: its notes are CHANGELOG.md's
	// [Unreleased] section.
	currentVersion = "v0.2.0-rc.1"
)

// releaseServers are what a forge would host, on loopback: an OCI registry (go-containerregistry's
// in-memory one) and the release files over plain HTTP, each version under /<version>/.
type releaseServers struct {
	// repo is the image repository releases are pushed to, "127.0.0.1:<port>/schemagate/manager".
	repo string
	// files is the folder served; filesURL its URL, without a trailing "/".
	files, filesURL string
}

func startReleaseServers(t *testing.T) *releaseServers {
	t.Helper()
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	files := t.TempDir()
	fs := httptest.NewServer(http.FileServer(http.Dir(files)))
	t.Cleanup(fs.Close)
	return &releaseServers{repo: strings.TrimPrefix(reg.URL, "http://") + "/schemagate/manager", files: files, filesURL: fs.URL}
}

// downloadBase is where version's files are served, ending in "/".
func (s *releaseServers) downloadBase(version string) string {
	return s.filesURL + "/" + version + "/"
}

// buildPreviousRelease builds previousVersion from its own sources: a clone of this repository
// at previousCommit, built by this checkout's release code for the host only. Returns its
// folder.
func (s *releaseServers) buildPreviousRelease(t *testing.T, ctx context.Context) string {
	t.Helper()
	if out, err := exec.Command("git", "-C", rootDir, "rev-parse", "--is-shallow-repository").Output(); err == nil && strings.TrimSpace(string(out)) == "true" {
		t.Skipf("this clone is shallow: %s (the commit %s is released) is not in it; `git fetch --unshallow` to run this test", previousVersion, previousCommit)
	}
	src := filepath.Join(t.TempDir(), "src")
	for _, args := range [][]string{
		{"clone", "--quiet", "--shared", "--no-checkout", rootDir, src},
		{"-C", src, "-c", "advice.detachedHead=false", "checkout", "--quiet", previousCommit},
	} {
		if out, err := exec.CommandContext(ctx, "git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return s.build(t, ctx, src, previousVersion)
}

// buildCurrentRelease builds currentVersion from this checkout (uncommitted changes allowed: a
// test's release is never published), for the host only.
func (s *releaseServers) buildCurrentRelease(t *testing.T, ctx context.Context) string {
	t.Helper()
	return s.build(t, ctx, rootDir, currentVersion)
}

// build runs `make release`'s code on the sources at moduleDir for the host only: the image for
// its arch, the plugin for its platform, so no krew manifest (make release-check builds them
// all). Cross-compiling for three more platforms would cost minutes on a fresh machine and test
// nothing an install uses.
func (s *releaseServers) build(t *testing.T, ctx context.Context, moduleDir, version string) string {
	t.Helper()
	dir, err := release.Build(ctx, release.Options{ModuleDir: moduleDir, Version: version, OutDir: s.files,
		ImageRepo: s.repo, DownloadBase: s.downloadBase(version), Arches: []string{runtime.GOARCH},
		PluginPlatforms: []release.Platform{{OS: runtime.GOOS, Arch: runtime.GOARCH}}, AllowDirty: true})
	if err != nil {
		t.Fatalf("release %s from %s: %v", version, moduleDir, err)
	}
	return dir
}

// checkChecksums does what `sha256sum -c checksums.txt` does in dir: every line's file has that
// sha256, and every file but checksums.txt has a line.
func checkChecksums(t *testing.T, dir string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, release.ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listed := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, file, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("%s: line %q is not <sha256>  <file>", release.ChecksumsFile, sc.Text())
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: sha256 %x, checksums.txt says %s", file, got, sum)
		}
		listed[file] = true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != release.ChecksumsFile && e.Name() != release.SignatureFile && !listed[e.Name()] {
			t.Errorf("%s is not in checksums.txt", e.Name())
		}
	}
}

// pushImage publishes the release's image archive to the registry as a release job would
// (`crane push` of the extracted OCI layout): the image index, tagged with the version. It
// returns the pinned reference images.txt names first, and fails unless the registry now serves
// that digest under the tag.
func pushImage(t *testing.T, dir, version string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	pinned, _, _ := strings.Cut(string(b), "\n")
	tagged, digest, ok := strings.Cut(pinned, "@")
	if !ok {
		t.Fatalf("images.txt: first line %q names no digest", pinned)
	}
	layoutDir := filepath.Join(t.TempDir(), "oci")
	untar(t, filepath.Join(dir, "schemagate-manager-"+version+".oci.tar"), layoutDir)
	p, err := layout.FromPath(layoutDir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("the OCI archive holds %d manifests, want the one image index", len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(tagged)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx); err != nil {
		t.Fatalf("push %s: %v", tag, err)
	}
	got, err := remote.Head(tag)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest.String() != digest {
		t.Fatalf("the registry serves %s as %s, images.txt says %s", tag, got.Digest, digest)
	}
	return pinned
}

// untar extracts the tar file into dir (regular files and folders only).
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(path.Clean("/"+h.Name)))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(target, 0o755)
		case tar.TypeReg:
			err = writeFrom(target, tr, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func writeFrom(file string, r io.Reader, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// pullEntrypoint pulls ref (repo:tag@digest) from the registry for linux and the host's arch,
// as a kubelet on this machine would, and writes the file its entrypoint names into dir.
// Returns that file's path: the binary the manager's container would run.
func pullEntrypoint(t *testing.T, ref, dir string) string {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}))
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(cf.Config.Entrypoint) != 1 {
		t.Fatalf("%s: entrypoint %q, want one binary", ref, cf.Config.Entrypoint)
	}
	want := strings.TrimPrefix(cf.Config.Entrypoint[0], "/")
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s: no %s in the image", ref, want)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(path.Clean("/"+h.Name), "/") != want || h.Typeflag != tar.TypeReg {
			continue
		}
		out := filepath.Join(dir, path.Base(want))
		if err := writeFrom(out, tr, 0o755); err != nil {
			t.Fatal(err)
		}
		return out
	}
}

// describeRelease lists the files of a release folder with their sizes, one per line.
func describeRelease(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "\n  %-44s %9.1f KiB", e.Name(), float64(info.Size())/1024)
	}
	return b.String()
}

// signAndVerify signs dir's checksums.txt with a fresh P-256 key, as `make release SIGN_KEY=`
// does, and checks that the release verifies with the public key (release.Verify, which `go run
// ./hack/release --verify` runs) and no longer does once a file of it changes.
func signAndVerify(t *testing.T, dir string) {
	t.Helper()
	private, public, err := release.NewKeyPair()
	if err != nil {
		t.Fatal(err)
	}
	if err := release.Sign(dir, private); err != nil {
		t.Fatal(err)
	}
	if err := release.Verify(dir, public); err != nil {
		t.Fatalf("the signed release does not verify: %v", err)
	}
	notes := filepath.Join(dir, "release-notes.md")
	b, err := os.ReadFile(notes)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(notes, append(b, []byte("\nedited\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := release.Verify(dir, public); err == nil || !strings.Contains(err.Error(), "release-notes.md") {
		t.Errorf("a changed release-notes.md: Verify = %v", err)
	}
	if err := os.WriteFile(notes, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
