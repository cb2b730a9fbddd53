package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// The SBOM of a real Go binary (testdata/sbomprobe, built as a release builds) names every
// module linked into it with its package URL and go.sum hash, the toolchain as std, a dependency
// from the binary to each, and the same bytes every time.
func TestSBOMListsWhatIsLinked(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "sbomprobe")
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-o", exe, "./testdata/sbomprobe")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin, err := readBinary("release.test", data)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readBinary("not Go", []byte("#!/bin/sh\n")); err == nil {
		t.Error("a shell script was read as a Go binary")
	}
	created := time.Date(2026, 12, 5, 12, 14, 28, 0, time.UTC)
	doc, err := sbom("v0.1.0", created, []shippedBinary{bin, bin})
	if err != nil {
		t.Fatal(err)
	}
	again, err := sbom("v0.1.0", created, []shippedBinary{bin, bin})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, again) {
		t.Error("two SBOMs of the same binaries differ")
	}
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(bytes.NewReader(doc), cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		t.Fatal(err)
	}
	if bom.SpecVersion != cdx.SpecVersion1_6 || bom.SerialNumber != "" || bom.Metadata.Timestamp != "2026-12-05T12:14:28Z" ||
		bom.Metadata.Component.Name != "schemagate" || bom.Metadata.Component.Version != "v0.1.0" {
		t.Errorf("header: spec %s, serial %q, metadata %+v", bom.SpecVersion, bom.SerialNumber, bom.Metadata)
	}
	byRef := map[string]cdx.Component{}
	for _, c := range *bom.Components {
		if _, dup := byRef[c.BOMRef]; dup && c.Type == cdx.ComponentTypeLibrary {
			t.Errorf("%s listed twice", c.BOMRef)
		}
		byRef[c.BOMRef] = c
	}
	std, ok := byRef["pkg:golang/std@"+runtime.Version()]
	if !ok || std.Type != cdx.ComponentTypeLibrary {
		t.Errorf("no std@%s component: %+v", runtime.Version(), std)
	}
	lib, ok := byRef["pkg:golang/github.com/CycloneDX/cyclonedx-go@v0.9.3"]
	if !ok || lib.PackageURL != lib.BOMRef || lib.Properties == nil || (*lib.Properties)[0].Name != "go:sum" || len((*lib.Properties)[0].Value) < 10 {
		t.Errorf("cyclonedx-go, linked into this test: %+v", lib)
	}
	if len(bin.Info.Deps) < 1 {
		t.Fatalf("the test binary links %d modules", len(bin.Info.Deps))
	}
	for _, d := range *bom.Dependencies {
		if _, ok := byRef[d.Ref]; !ok {
			t.Errorf("dependency of unknown %s", d.Ref)
		}
		if len(*d.Dependencies) != len(bin.Info.Deps)+1 {
			t.Errorf("%s depends on %d components, want its %d modules and std", d.Ref, len(*d.Dependencies), len(bin.Info.Deps))
		}
		for _, r := range *d.Dependencies {
			if _, ok := byRef[r]; !ok {
				t.Errorf("%s depends on %s, which is not a component", d.Ref, r)
			}
		}
	}
}
