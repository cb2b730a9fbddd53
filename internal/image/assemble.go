package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Options say what Build builds.
type Options struct {
	// ModuleDir is the root of the schemagate module (the folder of go.mod).
	ModuleDir string
	// Arches are the GOARCH values to build, one image each on OS; DefaultArches when empty.
	Arches []string
	// CABundle is the host path of the CA bundle copied to CABundlePath; CABundlePath when "".
	CABundle string
	// WorkDir receives the binaries, in one folder per arch; a temporary folder, removed
	// afterwards, when "".
	WorkDir string
	// Meta gives the labels and the created time.
	Meta Metadata
}

// Result is a built image: the index and, keyed by GOARCH, the image of each platform in it.
type Result struct {
	Index  v1.ImageIndex
	Images map[string]v1.Image
}

// Build cross-compiles the binaries for each arch in opts and assembles the image index. It fails
// when the CA bundle is missing (install Debian's ca-certificates) or a build fails.
func Build(ctx context.Context, opts Options) (*Result, error) {
	arches := opts.Arches
	if len(arches) == 0 {
		arches = DefaultArches
	}
	caPath := opts.CABundle
	if caPath == "" {
		caPath = CABundlePath
	}
	ca, err := os.ReadFile(caPath)
	if err != nil {
		return nil, fmt.Errorf("CA bundle (Debian: apt-get install ca-certificates): %w", err)
	}
	workDir := opts.WorkDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "schemagate-image-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(workDir)
	}
	base, err := baseLayer(ca, opts.Meta)
	if err != nil {
		return nil, err
	}
	res := &Result{Images: map[string]v1.Image{}}
	for _, arch := range arches {
		bins, err := BuildBinaries(ctx, opts.ModuleDir, arch, filepath.Join(workDir, OS+"_"+arch))
		if err != nil {
			return nil, err
		}
		img, err := Assemble(arch, base, bins, opts.Meta)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", OS, arch, err)
		}
		res.Images[arch] = img
	}
	if res.Index, err = Index(res.Images); err != nil {
		return nil, err
	}
	return res, nil
}

// baseLayer is the layer of /etc/passwd, /etc/group and the CA bundle ca (PEM bytes).
func baseLayer(ca []byte, meta Metadata) (v1.Layer, error) {
	passwd, err := etcFile("passwd")
	if err != nil {
		return nil, err
	}
	group, err := etcFile("group")
	if err != nil {
		return nil, err
	}
	return tarLayer([]layerFile{
		{path: "/etc/passwd", mode: 0o644, data: passwd},
		{path: "/etc/group", mode: 0o644, data: group},
		{path: CABundlePath, mode: 0o644, data: ca},
	}, meta.Created)
}

// Assemble returns the linux/arch image: the base layer, then a layer of the binaries (host
// paths keyed by image path, as BuildBinaries returns them), with the config of spec.go and the
// labels and created time of meta. It reads each binary whole.
func Assemble(arch string, base v1.Layer, bins map[string]string, meta Metadata) (v1.Image, error) {
	var files []layerFile
	for _, b := range Binaries {
		host, ok := bins[b.Path]
		if !ok {
			return nil, fmt.Errorf("no binary for %s", b.Path)
		}
		data, err := os.ReadFile(host)
		if err != nil {
			return nil, err
		}
		files = append(files, layerFile{path: b.Path, mode: 0o755, data: data})
	}
	app, err := tarLayer(files, meta.Created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	created := v1.Time{Time: meta.Created.UTC()}
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		Architecture: arch,
		OS:           OS,
		Created:      created,
		Config: v1.Config{
			User:       User,
			Entrypoint: slices.Clone(Entrypoint),
			WorkingDir: WorkingDir,
			Labels:     meta.Labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "schemagate hack/image: /etc/passwd, /etc/group, " + CABundlePath,
		}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{
			Created: created, CreatedBy: "schemagate hack/image: go build " + binaryList(),
		}},
	)
}

// Index returns the OCI image index of images (keyed by GOARCH), in sorted arch order, each
// manifest's descriptor carrying its platform.
func Index(images map[string]v1.Image) (v1.ImageIndex, error) {
	arches := make([]string, 0, len(images))
	for a := range images {
		arches = append(arches, a)
	}
	slices.Sort(arches)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, a := range arches {
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        images[a],
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: OS, Architecture: a}},
		})
	}
	if _, err := idx.Digest(); err != nil {
		return nil, err
	}
	return idx, nil
}

// binaryList is "./cmd → /manager, ./cmd/schemagate-schema → /schemagate-schema".
func binaryList() string {
	s := ""
	for i, b := range Binaries {
		if i > 0 {
			s += ", "
		}
		s += b.Package + " → " + b.Path
	}
	return s
}
