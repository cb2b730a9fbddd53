package image

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// BuildFlags are the `go build` flags of every binary in the image, after `go build`: no file
// system paths in the binary (-trimpath), no VCS stamp (the revision is a label instead, and the
// Dockerfile's build context has no .git, so both ways give the same bytes), no symbol table or
// DWARF (-s -w). With CGO_ENABLED=0 the result is statically linked.
var BuildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags", "-s -w"}

// BuildBinaries cross-compiles Binaries for linux/arch from the module at moduleDir into outDir
// and returns each binary's host path keyed by its path in the image ("/manager"). One `go build`
// builds them all; its output is returned in the error when it fails.
func BuildBinaries(ctx context.Context, moduleDir, arch, outDir string) (map[string]string, error) {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	args := append([]string{"build"}, BuildFlags...)
	args = append(args, "-o", outDir+string(filepath.Separator))
	for _, b := range Binaries {
		args = append(args, b.Package)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+OS, "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("GOARCH=%s go %s: %w\n%s", arch, strings.Join(args, " "), err, out)
	}
	// `go build -o dir/` names each binary after the last element of its package path.
	paths := make(map[string]string, len(Binaries))
	for _, b := range Binaries {
		p := filepath.Join(outDir, path.Base(b.Package))
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("go build of %s for %s: %w", b.Package, arch, err)
		}
		paths[b.Path] = p
	}
	return paths, nil
}
