// Package install checks what a cluster administrator installs: the one-file installer
// (dist/install.yaml, rendered from config/default by hack/render-installer) and the Helm chart
// (charts/schemagate), rendered and linted with the Helm v4 library as `helm template` and
// `helm lint` would. The e2e suite (test/e2e/install_test.go) applies both to a real cluster
// with the helpers here.
package install

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	releasev1 "helm.sh/helm/v4/pkg/release/v1"
)

// KubeVersion is the Kubernetes version charts are rendered for: the version of the
// kube-apiserver the tests run against (hack/build-binaries.sh). Helm's own default in test
// binaries is v1.20.
const KubeVersion = "v1.37.2"

// RepoRoot is the repository's root folder, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// ChartDir is charts/schemagate.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "schemagate") }

// Rendered is a chart rendered for one release.
type Rendered struct {
	// Manifest holds the templates' output as multi-document YAML, as `helm template` prints it
	// (without the CRDs).
	Manifest string
	// CRDs are the files of the chart's crds/ folder, sorted by name: what Helm creates before
	// the first install and never touches again.
	CRDs [][]byte
	// Release is the release Helm would store (in a Secret, by default).
	Release *releasev1.Release
}

// RenderChart renders the chart in chartDir for release name in namespace with values (nil:
// the chart's defaults) as `helm install --dry-run=client` does: values.schema.json checked,
// templates executed, no cluster contacted. Errors are Helm's: a schema violation names the
// value ("at '/replicaCount': got string, want integer"), a template's `fail` its message.
func RenderChart(chartDir, name, namespace string, values map[string]any) (*Rendered, error) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		return nil, err
	}
	kv, err := common.ParseKubeVersion(KubeVersion)
	if err != nil {
		return nil, err
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(slog.NewTextHandler(io.Discard, nil)))
	inst := action.NewInstall(cfg)
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = name
	inst.Namespace = namespace
	inst.KubeVersion = kv
	if values == nil {
		values = map[string]any{}
	}
	r, err := inst.Run(ch, values)
	if err != nil {
		return nil, err
	}
	rel, ok := r.(*releasev1.Release)
	if !ok {
		return nil, fmt.Errorf("helm returned a %T, not a v1 release", r)
	}
	out := &Rendered{Manifest: rel.Manifest, Release: rel}
	crds := ch.CRDObjects()
	sort.Slice(crds, func(i, j int) bool { return crds[i].Name < crds[j].Name })
	for _, c := range crds {
		out.CRDs = append(out.CRDs, c.File.Data)
	}
	return out, nil
}

// All returns the CRDs and the manifest as one multi-document YAML stream, CRDs first, as a
// first `helm install` creates them.
func (r *Rendered) All() []byte {
	var b bytes.Buffer
	for _, c := range r.CRDs {
		b.Write(c)
		b.WriteString("\n---\n")
	}
	b.WriteString(r.Manifest)
	return b.Bytes()
}

// ReadFile reads a file relative to the repository's root.
func ReadFile(rel string) ([]byte, error) { return os.ReadFile(filepath.Join(RepoRoot(), rel)) }
