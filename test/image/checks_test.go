package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/x509"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/schemagate/schemagate/internal/image"
)

// entry is one file or folder of an image's flattened filesystem.
type entry struct {
	hdr  *tar.Header
	data []byte
}

// shells are program names that must not be anywhere in the image.
var shells = []string{"sh", "bash", "dash", "ash", "ksh", "mksh", "zsh", "csh", "tcsh", "busybox"}

// elfMachines is the ELF machine of each GOARCH the image is built for.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkImage checks img, the linux/arch image, against internal/image's spec and meta, and
// returns its flattened filesystem keyed by path without the leading "/".
func checkImage(t *testing.T, img v1.Image, arch string, meta image.Metadata) map[string]entry {
	t.Helper()
	if mt, err := img.MediaType(); err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s (%v), want %s", mt, err, types.OCIManifestSchema1)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != arch {
		t.Errorf("config platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, arch)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", cfg.Config.User)
	}
	if !slices.Equal(cfg.Config.Entrypoint, []string{"/manager"}) || len(cfg.Config.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [/manager] and no cmd", cfg.Config.Entrypoint, cfg.Config.Cmd)
	}
	if cfg.Config.WorkingDir != "/" {
		t.Errorf("working dir %q, want /", cfg.Config.WorkingDir)
	}
	if !cfg.Created.Time.Equal(meta.Created) {
		t.Errorf("created %s, want %s", cfg.Created.Time, meta.Created)
	}
	wantLabels := map[string]string{
		"org.opencontainers.image.source":   "https://github.com/schemagate/schemagate",
		"org.opencontainers.image.licenses": "Apache-2.0",
		"org.opencontainers.image.revision": meta.Revision,
		"org.opencontainers.image.version":  meta.Version,
	}
	if !maps.Equal(cfg.Config.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", cfg.Config.Labels, wantLabels)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range layers {
		if mt, _ := l.MediaType(); mt != types.OCILayer {
			t.Errorf("layer media type %s, want %s", mt, types.OCILayer)
		}
	}

	fsys := flatten(t, img)
	checkFiles(t, fsys, meta.Created)
	for _, b := range image.Binaries {
		checkELF(t, b.Path, fsys[strings.TrimPrefix(b.Path, "/")].data, arch)
	}
	passwd, group := string(fsys["etc/passwd"].data), string(fsys["etc/group"].data)
	if !strings.Contains(passwd, "\nnonroot:x:65532:65532:") || !strings.Contains(group, "\nnonroot:x:65532:") {
		t.Errorf("user 65532 is not nonroot:\n/etc/passwd:\n%s/etc/group:\n%s", passwd, group)
	}
	host, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatal(err)
	}
	ca := fsys["etc/ssl/certs/ca-certificates.crt"].data
	if !bytes.Equal(ca, host) || !x509.NewCertPool().AppendCertsFromPEM(ca) {
		t.Errorf("CA bundle: %d bytes, equal to the host's: %v, want the host's %d bytes of PEM certificates", len(ca), bytes.Equal(ca, host), len(host))
	}
	return fsys
}

// flatten reads img's filesystem, all layers applied.
func flatten(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	fsys := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return fsys
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fsys[strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "/"), "/")] = entry{hdr: hdr, data: data}
	}
}

// checkFiles checks that fsys holds exactly image.Files() and their parent folders, with their
// modes, owned by 0:0, modified at created, and no shell anywhere.
func checkFiles(t *testing.T, fsys map[string]entry, created time.Time) {
	t.Helper()
	type spec struct {
		mode  int64
		isDir bool
	}
	want := map[string]spec{}
	for _, f := range image.Files() {
		p := strings.TrimPrefix(f.Path, "/")
		want[p] = spec{mode: int64(f.Mode)}
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			want[d] = spec{mode: 0o755, isDir: true}
		}
	}
	for _, p := range slices.Sorted(maps.Keys(fsys)) {
		e := fsys[p]
		if slices.Contains(shells, path.Base(p)) {
			t.Errorf("shell in the image: /%s", p)
		}
		w, ok := want[p]
		if !ok {
			t.Errorf("unexpected /%s in the image", p)
			continue
		}
		delete(want, p)
		wantType := map[bool]byte{true: tar.TypeDir, false: tar.TypeReg}[w.isDir]
		if e.hdr.Typeflag != wantType {
			t.Errorf("/%s: tar type %c, want %c", p, e.hdr.Typeflag, wantType)
		}
		if e.hdr.Mode != w.mode {
			t.Errorf("/%s: mode %o, want %o", p, e.hdr.Mode, w.mode)
		}
		if e.hdr.Uid != 0 || e.hdr.Gid != 0 {
			t.Errorf("/%s: owner %d:%d, want 0:0", p, e.hdr.Uid, e.hdr.Gid)
		}
		if !e.hdr.ModTime.Equal(created) {
			t.Errorf("/%s: mtime %s, want the created time %s", p, e.hdr.ModTime, created)
		}
	}
	for p := range want {
		t.Errorf("/%s missing from the image", p)
	}
}

// checkELF checks that data is a stripped, statically linked ELF executable for arch.
func checkELF(t *testing.T, name string, data []byte, arch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	defer f.Close()
	if f.Machine != elfMachines[arch] || f.Type != elf.ET_EXEC {
		t.Errorf("%s: ELF %s %s, want %s ET_EXEC", name, f.Machine, f.Type, elfMachines[arch])
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: has %s: not statically linked", name, p.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s: has a symbol table: not built with -ldflags -s", name)
	}
}

// runBinaries copies /manager and /schemagate-schema out of fsys and runs each with --help:
// the manager uses the flag package, whose ExitOnError exits 0 on -help after printing the
// usage to standard error; schemagate-schema prints its help to standard output and exits 0.
func runBinaries(t *testing.T, fsys map[string]entry) {
	t.Helper()
	dir := t.TempDir()
	for _, c := range []struct {
		file, stream string
		want         []string
	}{
		{"manager", "stderr", []string{"-leader-elect", "-metrics-bind-address", "-health-probe-bind-address"}},
		{"schemagate-schema", "stdout", []string{"schemagate-schema", "report", "run"}},
	} {
		bin := filepath.Join(dir, c.file)
		if err := os.WriteFile(bin, fsys[c.file].data, 0o755); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "--help")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("/%s --help: %v, want exit 0; stderr:\n%s", c.file, err, stderr.String())
			continue
		}
		out := map[string]string{"stdout": stdout.String(), "stderr": stderr.String()}[c.stream]
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("/%s --help: %s lacks %q:\n%s", c.file, c.stream, w, out)
			}
		}
	}
}

// checkDockerTarball reads the `docker load` tarball at file: its manifest.json must name testTag
// and the image in it must have img's config and layers.
func checkDockerTarball(t *testing.T, file string, img v1.Image) {
	t.Helper()
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(file) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{testTag}) {
		t.Fatalf("manifest.json %+v, want one image tagged %s", m, testTag)
	}
	loaded, err := tarball.ImageFromPath(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func(v1.Image) (any, error){
		func(i v1.Image) (any, error) { return i.ConfigName() },
		func(i v1.Image) (any, error) {
			ls, err := i.Layers()
			var ds []string
			for _, l := range ls {
				d, _ := l.Digest()
				ds = append(ds, d.String())
			}
			return strings.Join(ds, ","), err
		},
	} {
		got, err1 := f(loaded)
		want, err2 := f(img)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("docker tarball has %v, the layout %v", got, want)
		}
	}
}

// checkOCIArchive checks that the tar file at file holds the OCI layout at dir byte for byte.
func checkOCIArchive(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	files := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		files++
		got, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(hdr.Name)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s in the archive: %d bytes, in the layout %d bytes (%v)", hdr.Name, len(got), len(want), err)
		}
	}
	var want int
	if err := filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			want++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if files != want || files < 4 {
		t.Errorf("archive holds %d files, the layout %d (want oci-layout, index.json and blobs)", files, want)
	}
}

// checkSameDigests checks that two builds of the same tree with the same metadata gave the same
// index and image digests, and that their layouts' index.json files are equal.
func checkSameDigests(t *testing.T, a, b *image.Result, layoutA, layoutB string) {
	t.Helper()
	da, err1 := a.Index.Digest()
	db, err2 := b.Index.Digest()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if da != db {
		t.Errorf("index digest %s, then %s", da, db)
	}
	for arch, img := range a.Images {
		x, _ := img.Digest()
		y, _ := b.Images[arch].Digest()
		if x != y {
			t.Errorf("linux/%s digest %s, then %s", arch, x, y)
		}
	}
	if _, err := image.WriteLayout(layoutB, b.Index, testTag); err != nil {
		t.Fatal(err)
	}
	ja, err1 := os.ReadFile(filepath.Join(layoutA, "index.json"))
	jb, err2 := os.ReadFile(filepath.Join(layoutB, "index.json"))
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ja, jb) {
		t.Errorf("index.json differs:\n%s\n%s", ja, jb)
	}
	t.Logf("both builds: index %s", da)
}
