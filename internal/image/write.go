package image

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Annotations of an OCI layout's index.json that name an image: the OCI image-spec's reference
// name (the tag alone, as skopeo's oci:DIR:TAG reads it) and containerd's full image name, which
// `ctr images import` uses for the image it creates.
const (
	AnnotationRefName        = "org.opencontainers.image.ref.name"
	AnnotationContainerdName = "io.containerd.image.name"
)

// WriteLayout writes idx as an OCI image layout at dir (replacing whatever was there): blobs/,
// oci-layout, and an index.json with one entry, idx itself, annotated with tag's names. So
// `crane push DIR REF` pushes the whole multi-arch index. tag is a reference such as
// "schemagate/manager:dev".
func WriteLayout(dir string, idx v1.ImageIndex, tag string) (layout.Path, error) {
	t, err := name.NewTag(tag)
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{
		Add: idx,
		Descriptor: v1.Descriptor{Annotations: map[string]string{
			AnnotationRefName:        t.TagStr(),
			AnnotationContainerdName: containerdName(t),
		}},
	})
	return layout.Write(dir, top)
}

// WriteTarball writes img as a `docker load` tarball (docker save's format: manifest.json with
// RepoTags [tag], the config and the gzip layers) at file. containerd's `ctr images import`
// reads it too.
func WriteTarball(file string, img v1.Image, tag string) error {
	t, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return tarball.WriteToFile(file, t, img)
}

// Sizes are one image's sizes in bytes: Compressed adds up its gzip layers (what a pull
// downloads, besides the config and manifest of a few hundred bytes), Uncompressed its layers'
// tar streams (the files plus their 512-byte headers).
type Sizes struct {
	Compressed, Uncompressed int64
}

// ImageSizes returns img's Sizes.
func ImageSizes(img v1.Image) (Sizes, error) {
	var s Sizes
	layers, err := img.Layers()
	if err != nil {
		return s, err
	}
	for _, l := range layers {
		c, err := l.Size()
		if err != nil {
			return s, err
		}
		rc, err := l.Uncompressed()
		if err != nil {
			return s, err
		}
		n, err := countBytes(rc)
		if err != nil {
			return s, fmt.Errorf("reading a layer: %w", err)
		}
		s.Compressed += c
		s.Uncompressed += n
	}
	return s, nil
}

// countBytes reads rc to its end, closes it and returns how many bytes it held.
func countBytes(rc io.ReadCloser) (int64, error) {
	defer rc.Close()
	return io.Copy(io.Discard, rc)
}

// containerdName is tag as containerd normalizes it, which is what the kubelet asks containerd
// for: Docker Hub is "docker.io" (go-containerregistry says "index.docker.io"), so
// "schemagate/manager:dev" is "docker.io/schemagate/manager:dev".
func containerdName(t name.Tag) string {
	reg := t.RegistryStr()
	if reg == name.DefaultRegistry {
		reg = "docker.io"
	}
	return reg + "/" + t.RepositoryStr() + ":" + t.TagStr()
}
