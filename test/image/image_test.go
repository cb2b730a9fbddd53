package image

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/schemagate/schemagate/internal/image"
)

// allArchesEnv set to anything makes TestImage build every arch of image.DefaultArches; by default
// it builds the host's only, since cross-compiling the manager for a second arch takes minutes on
// a cold build cache (docs/image.md).
const allArchesEnv = "SCHEMAGATE_IMAGE_ALL_ARCHES"

// testTag is the reference the test tags its outputs with: make's default IMG.
const testTag = "schemagate/manager:dev"

// TestImage builds the image with internal/image, writes it as `make image` does, reads it back
// from the OCI layout and checks each platform's config and files; runs the host's /manager and
// /schemagate-schema from it; checks the docker-load tarball and the OCI archive; and builds it
// a second time to check that the digests repeat.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the manager binary: not in -short")
	}
	if runtime.GOOS != "linux" || !slices.Contains(image.DefaultArches, runtime.GOARCH) {
		t.Skipf("host %s/%s is not one of the image's platforms", runtime.GOOS, runtime.GOARCH)
	}
	arches := []string{runtime.GOARCH}
	if os.Getenv(allArchesEnv) != "" {
		arches = image.DefaultArches
	} else {
		t.Logf("building linux/%s only; %s=1 builds %v", runtime.GOARCH, allArchesEnv, image.DefaultArches)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	root, tmp := moduleRoot(t), t.TempDir()
	meta := image.Metadata{
		Revision: "0123456789abcdef0123456789abcdef01234567",
		Version:  "v0.0.0-test",
		Created:  time.Date(2026, 12, 1, 10, 20, 30, 0, time.UTC),
	}

	start := time.Now()
	res, err := image.Build(ctx, image.Options{ModuleDir: root, Arches: arches, Meta: meta, WorkDir: filepath.Join(tmp, "build1")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("first build of %v: %s", arches, time.Since(start).Round(time.Millisecond))
	layoutDir := filepath.Join(tmp, "oci")
	if _, err := image.WriteLayout(layoutDir, res.Index, testTag); err != nil {
		t.Fatal(err)
	}
	dockerTar := filepath.Join(tmp, "manager-"+runtime.GOARCH+".tar")
	if err := image.WriteTarball(dockerTar, res.Images[runtime.GOARCH], testTag); err != nil {
		t.Fatal(err)
	}
	ociTar := filepath.Join(tmp, "manager.oci.tar")
	if err := image.WriteOCIArchive(layoutDir, ociTar, meta.Created); err != nil {
		t.Fatal(err)
	}

	idx := readLayout(t, layoutDir)
	manifest, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", manifest.MediaType, types.OCIImageIndex)
	}
	var got []string
	for _, desc := range manifest.Manifests {
		if desc.Platform == nil || desc.Platform.OS != "linux" {
			t.Fatalf("manifest %s: platform %v, want linux/...", desc.Digest, desc.Platform)
		}
		arch := desc.Platform.Architecture
		got = append(got, arch)
		img, err := idx.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		t.Run("linux-"+arch, func(t *testing.T) {
			fsys := checkImage(t, img, arch, meta)
			sizes, err := image.ImageSizes(img)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("linux/%s %s: %d bytes compressed (%.1f MiB), %d uncompressed (%.1f MiB)", arch, desc.Digest,
				sizes.Compressed, float64(sizes.Compressed)/(1<<20), sizes.Uncompressed, float64(sizes.Uncompressed)/(1<<20))
			if arch == runtime.GOARCH {
				runBinaries(t, fsys)
			}
		})
	}
	if !slices.Equal(got, arches) {
		t.Errorf("index platforms %v, want %v in that order", got, arches)
	}

	t.Run("docker-tarball", func(t *testing.T) { checkDockerTarball(t, dockerTar, res.Images[runtime.GOARCH]) })
	t.Run("oci-archive", func(t *testing.T) { checkOCIArchive(t, ociTar, layoutDir) })
	t.Run("reproducible", func(t *testing.T) {
		start := time.Now()
		again, err := image.Build(ctx, image.Options{ModuleDir: root, Arches: arches, Meta: meta, WorkDir: filepath.Join(tmp, "build2")})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("second build of %v: %s", arches, time.Since(start).Round(time.Millisecond))
		checkSameDigests(t, res, again, layoutDir, filepath.Join(tmp, "oci2"))
	})
}

// readLayout opens the OCI layout at dir and returns the one image index its index.json names,
// after checking the names `ctr images import` and skopeo read.
func readLayout(t *testing.T, dir string) v1.ImageIndex {
	t.Helper()
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 || !m.Manifests[0].MediaType.IsIndex() {
		t.Fatalf("index.json: want one image index, got %+v", m.Manifests)
	}
	ann := m.Manifests[0].Annotations
	if ann[image.AnnotationRefName] != "dev" || ann[image.AnnotationContainerdName] != "docker.io/schemagate/manager:dev" {
		t.Errorf("index.json annotations %v, want ref name dev and containerd name docker.io/schemagate/manager:dev", ann)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// moduleRoot returns the folder of go.mod above the test's working folder.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's folder")
		}
		dir = parent
	}
}
