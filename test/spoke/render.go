// Package spoke renders what a spoke cluster installs for the hub's schemagate manager: the
// kustomization config/spoke and the chart charts/schemagate-spoke, which must produce the same
// objects (spoke_test.go). test/fleet applies Manifest to each region cluster.
package spoke

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// ServiceAccount is the name config/spoke gives the hub's ServiceAccount, and its Role and
// RoleBinding; TokenSecret is its token Secret's.
const (
	ServiceAccount = "schemagate-hub"
	TokenSecret    = ServiceAccount + "-token"
)

// RepoRoot is the repository's root folder, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ConfigDir is config/spoke.
func ConfigDir() string { return filepath.Join(RepoRoot(), "config", "spoke") }

// ChartDir is charts/schemagate-spoke.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "schemagate-spoke") }

// Manifest builds config/spoke with the kustomize library (the engine of `kubectl apply -k`) as
// an overlay with `namespace: <namespace>` would, and returns multi-document YAML. The files on
// disk are only read. Errors: unreadable files, kustomize build errors.
func Manifest(namespace string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	const root = "/spoke"
	entries, err := os.ReadDir(ConfigDir())
	if err != nil {
		return nil, err
	}
	if err := mem.MkdirAll(root + "/base"); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ConfigDir(), e.Name()))
		if err != nil {
			return nil, err
		}
		if err := mem.WriteFile(path.Join(root, "base", e.Name()), b); err != nil {
			return nil, err
		}
	}
	k := types.Kustomization{
		TypeMeta:  types.TypeMeta{APIVersion: types.KustomizationVersion, Kind: types.KustomizationKind},
		Namespace: namespace,
		Resources: []string{"base"},
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	if err := mem.WriteFile(root+"/kustomization.yaml", b); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, root)
	if err != nil {
		return nil, fmt.Errorf("kustomize build config/spoke: %w", err)
	}
	return res.AsYaml()
}
