package release

import (
	"bytes"
	"debug/buildinfo"
	"fmt"
	"slices"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// SBOMFile is the release's software bill of materials: CycloneDX 1.6 JSON.
const SBOMFile = "sbom.cdx.json"

// shippedBinary is one executable a release ships, with the Go build information linked into it.
type shippedBinary struct {
	// Name says where it ships: "/manager in the image, linux/amd64",
	// "kubectl-schemagate_darwin_arm64.tar.gz".
	Name string
	Info *buildinfo.BuildInfo
}

// readBinary reads the Go build information of an executable's bytes (debug/buildinfo). Errors:
// not a Go executable, or one built without module information.
func readBinary(name string, data []byte) (shippedBinary, error) {
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return shippedBinary{}, fmt.Errorf("%s: build information: %w", name, err)
	}
	return shippedBinary{Name: name, Info: info}, nil
}

// goPURL is the package URL of a Go module version (github.com/package-url/purl-spec, type golang).
func goPURL(path, version string) string {
	return "pkg:golang/" + path + "@" + version
}

// sbom writes the CycloneDX document of a release: the release itself as the described
// component; one component per shipped binary (application) and one per Go module or toolchain
// linked into any of them (library, deduplicated by package URL); and a dependency from each
// binary to what it links. The bytes depend only on the arguments: no serial number, and the
// timestamp is created (the commit's time).
func sbom(version string, created time.Time, bins []shippedBinary) ([]byte, error) {
	modules := map[string]cdx.Component{}
	var components []cdx.Component
	var deps []cdx.Dependency
	for _, b := range bins {
		ref := "binary:" + b.Name
		components = append(components, cdx.Component{BOMRef: ref, Type: cdx.ComponentTypeApplication, Name: b.Name, Version: version})
		var links []string
		add := func(path, version, sum string) {
			purl := goPURL(path, version)
			if _, ok := modules[purl]; !ok {
				c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: path, Version: version, PackageURL: purl}
				if sum != "" {
					// The go.sum hash (h1:, a SHA-256 over the module's files); CycloneDX has no
					// algorithm for it, so it is a property.
					c.Properties = &[]cdx.Property{{Name: "go:sum", Value: sum}}
				}
				modules[purl] = c
			}
			if !slices.Contains(links, purl) {
				links = append(links, purl)
			}
		}
		add("std", b.Info.GoVersion, "")
		for _, m := range b.Info.Deps {
			if m.Replace != nil {
				m = m.Replace
			}
			add(m.Path, m.Version, m.Sum)
		}
		slices.Sort(links)
		deps = append(deps, cdx.Dependency{Ref: ref, Dependencies: &links})
	}
	for _, purl := range sortedKeys(modules) {
		components = append(components, modules[purl])
	}
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &cdx.Component{BOMRef: "schemagate", Type: cdx.ComponentTypeApplication, Name: "schemagate", Version: version,
			Licenses: &cdx.Licenses{{License: &cdx.License{ID: "Apache-2.0"}}}},
	}
	bom.Components = &components
	bom.Dependencies = &deps
	var b strings.Builder
	enc := cdx.NewBOMEncoder(&b, cdx.BOMFileFormatJSON).SetPretty(true).SetEscapeHTML(false)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("sbom: %w", err)
	}
	return []byte(b.String()), nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
