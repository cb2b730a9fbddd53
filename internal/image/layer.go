package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// layerFile is one regular file of a layer: its absolute path in the image, its permission
// bits and its content.
type layerFile struct {
	path string
	mode int64
	data []byte
}

// tarLayer returns the files as one gzip-compressed OCI layer. The tar stream depends only on its
// arguments: entries in the given order, each file's missing parent directories first (mode
// 0755), owner 0:0 with no user or group names, mtime modTime (whole seconds), USTAR headers.
// The gzip stream has no name or time in its header, so equal inputs give equal digests.
func tarLayer(files []layerFile, modTime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	seen := map[string]bool{}
	header := func(name string, typ byte, mode, size int64) *tar.Header {
		return &tar.Header{
			Typeflag: typ, Name: name, Mode: mode, Size: size,
			ModTime: modTime.UTC().Truncate(time.Second), Format: tar.FormatUSTAR,
		}
	}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean(f.path), "/")
		var dirs []string
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			dirs = append([]string{d}, dirs...)
		}
		for _, d := range dirs {
			if seen[d] {
				continue
			}
			seen[d] = true
			if err := tw.WriteHeader(header(d+"/", tar.TypeDir, 0o755, 0)); err != nil {
				return nil, err
			}
		}
		if err := tw.WriteHeader(header(rel, tar.TypeReg, f.mode, int64(len(f.data)))); err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(
		func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer),
		tarball.WithCompressionLevel(gzip.BestCompression),
		tarball.WithCompressedCaching,
	)
}
