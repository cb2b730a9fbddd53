package release

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/schemagate/schemagate/internal/image"
)

// buildPlugin cross-compiles kubectl-schemagate for each of o.PluginPlatforms (CGO off, the image's
// build flags) and packs each binary with the LICENSE at the root of PluginArchive(p); it returns
// each archive's sha256 (hex) by name, and the binaries, for the SBOM.
func buildPlugin(ctx context.Context, o Options, created time.Time, dir string) (map[string]string, []shippedBinary, error) {
	work, err := os.MkdirTemp("", "schemagate-release-plugin-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(work)
	license, err := os.ReadFile(filepath.Join(o.ModuleDir, "LICENSE"))
	if err != nil {
		return nil, nil, err
	}
	digests := map[string]string{}
	var bins []shippedBinary
	platforms := o.PluginPlatforms
	if len(platforms) == 0 {
		platforms = PluginPlatforms
	}
	for _, p := range platforms {
		bin := filepath.Join(work, p.OS+"_"+p.Arch, "kubectl-schemagate")
		args := append([]string{"build"}, image.BuildFlags...)
		args = append(args, "-o", bin, "./cmd/kubectl-schemagate")
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = o.ModuleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("%s/%s: go %s: %w\n%s", p.OS, p.Arch, strings.Join(args, " "), err, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, nil, err
		}
		tgz, err := tarGz([]archiveFile{{Name: "kubectl-schemagate", Mode: 0o755, Data: data}, {Name: "LICENSE", Mode: 0o644, Data: license}},
			created)
		if err != nil {
			return nil, nil, err
		}
		name := PluginArchive(p)
		b, err := readBinary("kubectl-schemagate in "+name, data)
		if err != nil {
			return nil, nil, err
		}
		bins = append(bins, b)
		if err := os.WriteFile(filepath.Join(dir, name), tgz, 0o644); err != nil {
			return nil, nil, err
		}
		digests[name] = sha256Hex(tgz)
	}
	return digests, bins, nil
}
