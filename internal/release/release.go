// Package release builds a versioned schemagate release into one folder, dist/release/<version>/
// (`make release VERSION=vX.Y.Z`): the manager image as an OCI archive with its digests, the CRD
// on its own (crds.yaml) and the rest of the installer pinned by digest (install.yaml), the Helm
// chart packaged with a chart repository index, the kubectl plugin's archives with the krew
// manifest that names their sha256, a CycloneDX SBOM of every Go module linked into what ships,
// release notes from CHANGELOG.md and checksums.txt over every file. Every file's bytes depend only on the commit, the Options (version, image repository,
// download URL, arches) and the Go toolchain: times come from the commit (or SOURCE_DATE_EPOCH),
// never from the clock, so two runs give byte-identical folders. A tree with uncommitted changes
// is refused.
// docs/install.md says how a cluster owner uses each file.
package release

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/schemagate/schemagate/internal/image"
)

// Options say what Build releases.
type Options struct {
	// ModuleDir is the root of the schemagate module (the folder of go.mod).
	ModuleDir string
	// Version is the release's version, "v" and a semantic version: v0.1.0, v1.2.3-rc.1.
	Version string
	// OutDir receives the release folder, OutDir/<Version> (replaced if it exists).
	OutDir string
	// ImageRepo is where the manager image will be published, e.g. ghcr.io/schemagate/manager;
	// install.yaml and the chart name it with the version's tag and its digest.
	ImageRepo string
	// DownloadBase is the URL the release's files will be served under, ending in "/"
	// (the forge's release download URL); the krew manifest and index.yaml name files under it.
	DownloadBase string
	// SourceDateEpoch is $SOURCE_DATE_EPOCH, or "" for the commit time of HEAD.
	SourceDateEpoch string
	// Arches are the image's GOARCH values (image.DefaultArches when empty).
	Arches []string
	// PluginPlatforms are the plugin archives to build (all of PluginPlatforms when empty). A
	// release to publish builds all of them; with fewer, as a test's release that only installs
	// needs, no krew manifest is written, since it must name an archive for every platform.
	PluginPlatforms []Platform
	// AllowDirty builds from a tree with uncommitted changes (a test's; never a release to
	// publish, whose files would not be those of the commit they name).
	AllowDirty bool
	// Log receives one line per step (nil: none).
	Log func(format string, args ...any)
}

// semver is the version form a release takes (semver.org, with the "v" Go modules use).
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

// Build writes the release folder and returns its path. Errors name the step that failed; the
// half-written folder is removed.
func Build(ctx context.Context, o Options) (dir string, err error) {
	if !semver.MatchString(o.Version) {
		return "", fmt.Errorf("version %q: want v<major>.<minor>.<patch>[-<pre-release>], e.g. v0.1.0", o.Version)
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if len(arches(o.Arches)) == 0 || slices.Contains(arches(o.Arches), "") {
		return "", fmt.Errorf("arches %q: want GOARCH values such as amd64,arm64", o.Arches)
	}
	meta, err := image.MetadataFromGit(ctx, o.ModuleDir, o.SourceDateEpoch)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(meta.Version, "-dirty") && !o.AllowDirty {
		return "", fmt.Errorf("the checkout has uncommitted changes (git describe says %s): commit them, or release from a clean clone", meta.Version)
	}
	meta.Version = o.Version
	dir = filepath.Join(o.OutDir, o.Version)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(dir)
		}
	}()
	write := func(name string, data []byte) error { return os.WriteFile(filepath.Join(dir, name), data, 0o644) }

	notes, err := readNotes(o.ModuleDir, o.Version)
	if err != nil {
		return "", err
	}
	if err := write("release-notes.md", notes); err != nil {
		return "", err
	}

	o.Log("image: building linux/%s", strings.Join(arches(o.Arches), ", linux/"))
	ref, bins, err := buildImage(ctx, o, meta, dir)
	if err != nil {
		return "", fmt.Errorf("image: %w", err)
	}
	o.Log("image: %s", ref)

	crds, rest, err := installers(o.ModuleDir, ref)
	if err != nil {
		return "", fmt.Errorf("install.yaml: %w", err)
	}
	if err := write("crds.yaml", crds); err != nil {
		return "", err
	}
	if err := write("install.yaml", rest); err != nil {
		return "", err
	}

	_, digest, _ := strings.Cut(ref, "@")
	chart, err := packageChart(filepath.Join(o.ModuleDir, "charts", "schemagate"), dir, o.Version, o.ImageRepo, digest, meta.Created)
	if err != nil {
		return "", err
	}
	index, err := chartIndex(chart, o.DownloadBase, meta.Created)
	if err != nil {
		return "", fmt.Errorf("index.yaml: %w", err)
	}
	if err := write("index.yaml", index); err != nil {
		return "", err
	}
	o.Log("chart: %s", filepath.Base(chart))

	digests, pluginBins, err := buildPlugin(ctx, o, meta.Created, dir)
	if err != nil {
		return "", fmt.Errorf("kubectl plugin: %w", err)
	}
	if len(o.PluginPlatforms) == 0 {
		template, err := os.ReadFile(filepath.Join(o.ModuleDir, "plugins", "schemagate.yaml"))
		if err != nil {
			return "", err
		}
		krew, err := krewManifest(template, o.Version, o.DownloadBase, digests)
		if err != nil {
			return "", err
		}
		if err := write("schemagate.yaml", krew); err != nil {
			return "", err
		}
	}
	o.Log("plugin: %d archives (krew manifest: %t)", len(digests), len(o.PluginPlatforms) == 0)

	doc, err := sbom(o.Version, meta.Created, append(bins, pluginBins...))
	if err != nil {
		return "", err
	}
	if err := write(SBOMFile, doc); err != nil {
		return "", err
	}

	sums, err := checksums(dir)
	if err != nil {
		return "", err
	}
	if err := write(ChecksumsFile, sums); err != nil {
		return "", err
	}
	return dir, nil
}

func arches(a []string) []string {
	if len(a) == 0 {
		return image.DefaultArches
	}
	return a
}

// readNotes reads CHANGELOG.md's section for version.
func readNotes(moduleDir, version string) ([]byte, error) {
	changelog, err := os.ReadFile(filepath.Join(moduleDir, "CHANGELOG.md"))
	if err != nil {
		return nil, err
	}
	return Notes(changelog, version)
}
