package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"testing"
	"time"
)

func TestTarGzIsReproducible(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	a := []archiveFile{{Name: "kubectl-schemagate", Mode: 0o755, Data: []byte("binary")}, {Name: "LICENSE", Mode: 0o644, Data: []byte("license")}}
	b := []archiveFile{a[1], a[0]}
	one, err := tarGz(a, at)
	if err != nil {
		t.Fatal(err)
	}
	two, err := tarGz(b, at.Add(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(one, two) {
		t.Fatal("the same files in another order (and a time within the same second) gave other bytes")
	}
	later, _ := tarGz(a, at.Add(time.Second))
	if bytes.Equal(one, later) {
		t.Fatal("another modification time gave the same bytes: the time is not in the archive")
	}
	zr, err := gzip.NewReader(bytes.NewReader(one))
	if err != nil {
		t.Fatal(err)
	}
	if !zr.ModTime.IsZero() || zr.Name != "" {
		t.Errorf("gzip header carries a time %v or a name %q", zr.ModTime, zr.Name)
	}
	tr := tar.NewReader(zr)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(at) {
			t.Errorf("%s: owner %d:%d %q:%q, time %v", h.Name, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime)
		}
		if h.Name == "kubectl-schemagate" && h.Mode != 0o755 {
			t.Errorf("the plugin's mode is %o, want 755", h.Mode)
		}
	}
	if len(names) != 2 || names[0] != "LICENSE" || names[1] != "kubectl-schemagate" {
		t.Errorf("entries %v, want LICENSE, kubectl-schemagate", names)
	}
}
