package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/schemagate/schemagate/internal/image"
)

// buildImage builds the manager image (the manager and the schema reporter) for every arch,
// writes it as an OCI archive, schemagate-manager-<version>.oci.tar, with images.txt naming the
// index's and each platform's digest, and returns the pinned reference repo:version@digest.
func buildImage(ctx context.Context, o Options, meta image.Metadata, dir string) (string, error) {
	res, err := image.Build(ctx, image.Options{ModuleDir: o.ModuleDir, Arches: o.Arches, Meta: meta})
	if err != nil {
		return "", err
	}
	tag := o.ImageRepo + ":" + o.Version
	layoutDir, err := os.MkdirTemp("", "schemagate-release-oci-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(layoutDir)
	if _, err := image.WriteLayout(layoutDir, res.Index, tag); err != nil {
		return "", err
	}
	if err := image.WriteOCIArchive(layoutDir, filepath.Join(dir, "schemagate-manager-"+o.Version+".oci.tar"), meta.Created); err != nil {
		return "", err
	}
	digest, err := res.Index.Digest()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s@%s\n", tag, digest)
	for _, arch := range arches(o.Arches) {
		d, err := res.Images[arch].Digest()
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "%s@%s linux/%s\n", o.ImageRepo, d, arch)
	}
	if err := os.WriteFile(filepath.Join(dir, "images.txt"), []byte(b.String()), 0o644); err != nil {
		return "", err
	}
	return tag + "@" + digest.String(), nil
}
