// Command image builds the manager's container image without a container engine (`make image`):
// an OCI layout of the multi-arch index at OUT/oci, the same as one tar file at
// OUT/schemagate-manager.oci.tar, and a `docker load` tarball of the host's arch at
// OUT/schemagate-manager-ARCH.tar. It prints each image's digest and sizes. internal/image does
// the work; docs/image.md explains the outputs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/schemagate/schemagate/internal/image"
)

func main() {
	out := flag.String("out", "dist/image", "Folder of the outputs (replaced files only; the rest is left).")
	tag := flag.String("tag", "schemagate/manager:dev", "Image reference the outputs are tagged with.")
	arches := flag.String("arches", strings.Join(image.DefaultArches, ","), "GOARCH values to build, comma-separated, all linux.")
	version := flag.String("version", "", "Version label (default: git describe --tags --always --dirty).")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, *tag, strings.Split(*arches, ","), *version); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run builds the image from the module in the current folder and writes the outputs under out.
func run(ctx context.Context, out, tag string, arches []string, version string) error {
	meta, err := image.MetadataFromGit(ctx, ".", os.Getenv("SOURCE_DATE_EPOCH"))
	if err != nil {
		return err
	}
	if version != "" {
		meta.Version = version
	}
	res, err := image.Build(ctx, image.Options{ModuleDir: ".", Arches: arches, Meta: meta})
	if err != nil {
		return err
	}
	layoutDir := filepath.Join(out, "oci")
	if _, err := image.WriteLayout(layoutDir, res.Index, tag); err != nil {
		return err
	}
	if err := image.WriteOCIArchive(layoutDir, filepath.Join(out, "schemagate-manager.oci.tar"), meta.Created); err != nil {
		return err
	}
	digest, err := res.Index.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s  index %s  revision %s  version %s  created %s\n", tag, digest, meta.Revision, meta.Version, meta.Created.Format("2006-01-02T15:04:05Z"))
	for _, arch := range arches {
		img := res.Images[arch]
		d, err := img.Digest()
		if err != nil {
			return err
		}
		s, err := image.ImageSizes(img)
		if err != nil {
			return err
		}
		fmt.Printf("  linux/%-6s %s  %.1f MiB compressed, %.1f MiB uncompressed\n", arch, d, mib(s.Compressed), mib(s.Uncompressed))
	}
	fmt.Printf("  OCI layout    %s\n  OCI archive   %s\n", layoutDir, filepath.Join(out, "schemagate-manager.oci.tar"))
	if img, ok := res.Images[runtime.GOARCH]; ok {
		file := filepath.Join(out, "schemagate-manager-"+runtime.GOARCH+".tar")
		if err := image.WriteTarball(file, img, tag); err != nil {
			return err
		}
		fmt.Printf("  docker load   %s\n", file)
	}
	return nil
}

// mib converts bytes to MiB.
func mib(n int64) float64 { return float64(n) / (1 << 20) }
