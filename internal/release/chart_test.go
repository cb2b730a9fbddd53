package release

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	repo "helm.sh/helm/v4/pkg/repo/v1"
)

func TestPackagedChartIsReproducibleAndCarriesTheVersion(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	var archives, indexes [][]byte
	for i := 0; i < 2; i++ {
		dir := t.TempDir()
		path, err := packageChart("../../charts/schemagate", dir, "v0.3.1", "registry.example/schemagate/manager", "sha256:"+strings.Repeat("cd", 32), at)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(path) != "schemagate-0.3.1.tgz" {
			t.Errorf("archive %s, want schemagate-0.3.1.tgz", path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		index, err := chartIndex(path, "http://127.0.0.1:9/charts/", at)
		if err != nil {
			t.Fatal(err)
		}
		archives, indexes = append(archives, data), append(indexes, index)
		if i == 0 {
			time.Sleep(1100 * time.Millisecond) // a clock in the bytes would now differ
		}
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two packagings of the same chart gave different archives")
	}
	if !bytes.Equal(indexes[0], indexes[1]) {
		t.Errorf("two indexes differ:\n%s\n%s", indexes[0], indexes[1])
	}

	c, err := loader.LoadArchive(bytes.NewReader(archives[0]))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Version != "0.3.1" || c.Metadata.AppVersion != "v0.3.1" {
		t.Errorf("version %q appVersion %q", c.Metadata.Version, c.Metadata.AppVersion)
	}
	img, _ := c.Values["image"].(map[string]any)
	if img["repository"] != "registry.example/schemagate/manager" || img["tag"] != "v0.3.1" || img["digest"] != "sha256:"+strings.Repeat("cd", 32) {
		t.Errorf("values image %v", img)
	}
	crds := 0
	for _, f := range c.Files {
		if strings.HasPrefix(f.Name, "crds/") {
			crds++
		}
	}
	if crds == 0 {
		t.Error("the packaged chart has no crds/: Helm would not install the CRD")
	}

	f := filepath.Join(t.TempDir(), "index.yaml")
	if err := os.WriteFile(f, indexes[0], 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := repo.LoadIndexFile(f)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := idx.Get("schemagate", "0.3.1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cv.URLs) != 1 || cv.URLs[0] != "http://127.0.0.1:9/charts/schemagate-0.3.1.tgz" || cv.Digest != sha256Hex(archives[0]) {
		t.Errorf("index entry: urls %v digest %s", cv.URLs, cv.Digest)
	}
}

func TestSetImageKeepsTheRestOfTheValues(t *testing.T) {
	in := "# top\nimage:\n  # the repository\n  repository: \"\"\n  tag: \"\"\n  digest: \"\"\n  pullPolicy: IfNotPresent\n\nother:\n  tag: keep\n"
	out, err := setImage([]byte(in), "r.example/m", "v1.0.0", "sha256:ab")
	if err != nil {
		t.Fatal(err)
	}
	want := "# top\nimage:\n  # the repository\n  repository: r.example/m\n  tag: v1.0.0\n  digest: sha256:ab\n  pullPolicy: IfNotPresent\n\nother:\n  tag: keep\n"
	if string(out) != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
	if _, err := setImage([]byte("other: 1\n"), "r", "t", "d"); err == nil {
		t.Error("values without an image block: no error")
	}
}
