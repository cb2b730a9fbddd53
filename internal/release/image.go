package release

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/schemagate/schemagate/internal/image"
)

// buildImage builds the manager image (the manager and the schema reporter) for every arch,
// writes it as an OCI archive, schemagate-manager-<version>.oci.tar, with images.txt naming the
// index's and each platform's digest, and returns the pinned reference repo:version@digest and
// the binaries in the image, for the SBOM.
func buildImage(ctx context.Context, o Options, meta image.Metadata, dir string) (string, []shippedBinary, error) {
	res, err := image.Build(ctx, image.Options{ModuleDir: o.ModuleDir, Arches: o.Arches, Meta: meta})
	if err != nil {
		return "", nil, err
	}
	var bins []shippedBinary
	for _, arch := range arches(o.Arches) {
		b, err := imageBinaries(res.Images[arch], arch)
		if err != nil {
			return "", nil, err
		}
		bins = append(bins, b...)
	}
	tag := o.ImageRepo + ":" + o.Version
	layoutDir, err := os.MkdirTemp("", "schemagate-release-oci-")
	if err != nil {
		return "", nil, err
	}
	defer os.RemoveAll(layoutDir)
	if _, err := image.WriteLayout(layoutDir, res.Index, tag); err != nil {
		return "", nil, err
	}
	if err := image.WriteOCIArchive(layoutDir, filepath.Join(dir, "schemagate-manager-"+o.Version+".oci.tar"), meta.Created); err != nil {
		return "", nil, err
	}
	digest, err := res.Index.Digest()
	if err != nil {
		return "", nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s\n", tag, digest)
	for _, arch := range arches(o.Arches) {
		d, err := res.Images[arch].Digest()
		if err != nil {
			return "", nil, err
		}
		fmt.Fprintf(&b, "%s@%s linux/%s\n", o.ImageRepo, d, arch)
	}
	if err := os.WriteFile(filepath.Join(dir, "images.txt"), []byte(b.String()), 0o644); err != nil {
		return "", nil, err
	}
	return tag + "@" + digest.String(), bins, nil
}

// imageBinaries reads the Go build information of every binary in img (image.Binaries).
func imageBinaries(img v1.Image, arch string) ([]shippedBinary, error) {
	want := map[string]bool{}
	for _, b := range image.Binaries {
		want[strings.TrimPrefix(b.Path, "/")] = true
	}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var out []shippedBinary
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if !want[name] || h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		b, err := readBinary(fmt.Sprintf("/%s in the image, linux/%s", name, arch), data)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	if len(out) != len(want) {
		return nil, fmt.Errorf("linux/%s: %d of the image's %d binaries found", arch, len(out), len(want))
	}
	return out, nil
}
