package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"sort"
	"time"
)

// archiveFile is one regular file of a release archive.
type archiveFile struct {
	// Name is the path inside the archive, slash-separated, no leading slash.
	Name string
	Mode int64
	Data []byte
}

// tarGz packs files into a gzip-compressed tar whose bytes depend on nothing but its arguments:
// entries sorted by name, each owned by 0:0 with no user or group names, modTime (whole seconds,
// UTC) as every file's time, PAX-free USTAR headers, and a gzip header with no name and no time.
// Two calls with the same files and modTime return the same bytes (reproducible-builds.org).
func tarGz(files []archiveFile, modTime time.Time) ([]byte, error) {
	sorted := append([]archiveFile(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, f := range sorted {
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     f.Name,
			Mode:     f.Mode,
			Size:     int64(len(f.Data)),
			ModTime:  modTime.UTC().Truncate(time.Second),
			Format:   tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
