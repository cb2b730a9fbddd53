// Package release builds a versioned schemagate release into one folder, dist/release/<version>/
// (`make release VERSION=vX.Y.Z`): the manager image as an OCI archive with its digests, the CRD
// on its own (crds.yaml) and the rest of the installer pinned by digest (install.yaml), the Helm
// chart packaged with a chart repository index, the kubectl plugin's archives with the krew
// manifest that names their sha256, release notes from CHANGELOG.md and checksums.txt over every
// file. Every file's bytes depend only on the commit, the Options (version, image repository,
// download URL, arches) and the Go toolchain: times come from the commit (or SOURCE_DATE_EPOCH),
// never from the clock, so two runs give byte-identical folders. A tree with uncommitted changes
// is refused.
// docs/install.md says how a cluster owner uses each file.
package release

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/schemagate/schemagate/hack/render-installer/installer"
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
	ref, err := buildImage(ctx, o, meta, dir)
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

	digests, err := buildPlugin(ctx, o, meta.Created, dir)
	if err != nil {
		return "", fmt.Errorf("kubectl plugin: %w", err)
	}
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
	o.Log("plugin: %d archives and the krew manifest", len(digests))

	sums, err := checksums(dir)
	if err != nil {
		return "", err
	}
	if err := write(ChecksumsFile, sums); err != nil {
		return "", err
	}
	return dir, nil
}

// ChecksumsFile lists the sha256 of every other file of the release, as `sha256sum` prints them
// (`sha256sum -c checksums.txt` checks a download).
const ChecksumsFile = "checksums.txt"

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

// installers renders config/default with the image ref and splits it in two: the CRD alone
// (crds.yaml) and everything else (install.yaml), so that deleting what install.yaml created
// never deletes the CRD and with it every RoutingService.
func installers(moduleDir, ref string) (crds, rest []byte, err error) {
	all, err := installer.Render(filepath.Join(moduleDir, "config"), ref)
	if err != nil {
		return nil, nil, err
	}
	var c, r []string
	for _, doc := range strings.Split(string(all), "\n---\n") {
		if strings.Contains("\n"+doc, "\nkind: CustomResourceDefinition\n") {
			c = append(c, strings.TrimSpace(stripComments(doc)))
		} else if s := strings.TrimSpace(stripComments(doc)); s != "" {
			r = append(r, s)
		}
	}
	if len(c) == 0 {
		return nil, nil, fmt.Errorf("config/default rendered no CustomResourceDefinition")
	}
	crdHeader := "# schemagate's CRD (routingservices.routing.schemagate.io), apart from the manager: apply it first.\n" +
		"# Deleting it deletes every RoutingService and, through them, their ReplicaSets and pods.\n"
	restHeader := "# schemagate " + "manager: namespace, RBAC, the Deployment (image " + ref + ")\n" +
		"# and its metrics Service; the CRD is in crds.yaml. kubectl apply --server-side -f crds.yaml -f install.yaml\n"
	return []byte(crdHeader + strings.Join(c, "\n---\n") + "\n"), []byte(restHeader + strings.Join(r, "\n---\n") + "\n"), nil
}

// stripComments drops the leading comment lines of a YAML document (the installer's header).
func stripComments(doc string) string {
	lines := strings.Split(doc, "\n")
	i := 0
	for i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == "") {
		i++
	}
	return strings.Join(lines[i:], "\n")
}

// buildPlugin cross-compiles kubectl-schemagate for each of PluginPlatforms (CGO off, the image's
// build flags) and packs each binary alone at the root of PluginArchive(p); it returns each
// archive's sha256 (hex) by name.
func buildPlugin(ctx context.Context, o Options, created time.Time, dir string) (map[string]string, error) {
	work, err := os.MkdirTemp("", "schemagate-release-plugin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(work)
	digests := map[string]string{}
	for _, p := range PluginPlatforms {
		bin := filepath.Join(work, p.OS+"_"+p.Arch, "kubectl-schemagate")
		args := append([]string{"build"}, image.BuildFlags...)
		args = append(args, "-o", bin, "./cmd/kubectl-schemagate")
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = o.ModuleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s/%s: go %s: %w\n%s", p.OS, p.Arch, strings.Join(args, " "), err, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		license, err := os.ReadFile(filepath.Join(o.ModuleDir, "LICENSE"))
		if err != nil {
			return nil, err
		}
		tgz, err := tarGz([]archiveFile{{Name: "kubectl-schemagate", Mode: 0o755, Data: data}, {Name: "LICENSE", Mode: 0o644, Data: license}},
			created)
		if err != nil {
			return nil, err
		}
		name := PluginArchive(p)
		if err := os.WriteFile(filepath.Join(dir, name), tgz, 0o644); err != nil {
			return nil, err
		}
		digests[name] = sha256Hex(tgz)
	}
	return digests, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checksums lists the sha256 of every file in dir but ChecksumsFile, sorted by name, in
// sha256sum's format ("<hex>  <name>").
func checksums(dir string) ([]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != ChecksumsFile {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "%s  %s\n", sha256Hex(data), n)
	}
	return b.Bytes(), nil
}
