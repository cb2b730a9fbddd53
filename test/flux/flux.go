// Package flux runs Flux's source-controller and kustomize-controller, built from source by
// hack/build-binaries.sh, as processes beside a local cluster, for the GitOps stories of
// test/e2e. Every address they bind is on loopback, and they watch every namespace.
package flux

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/schemagate/schemagate/test/localcluster"
)

// Controllers are the Flux controllers Start runs; hack/build-binaries.sh builds each into the
// binaries folder with its CRDs beside it (<name>.crds.yaml).
var Controllers = []string{"source-controller", "kustomize-controller"}

// Options says where the binaries are and which cluster the controllers reconcile.
type Options struct {
	// BinDir holds the controllers and their CRDs (hack/build-binaries.sh's bin/k8s).
	BinDir string
	// Kubeconfig is the cluster's kubeconfig; Kubectl applies the CRDs.
	Kubeconfig, Kubectl string
	// StateDir receives the logs (<name>.log) and source-controller's artifact storage.
	StateDir string
}

// Flux is the running controllers.
type Flux struct {
	procs []*localcluster.Process
}

// Start applies the controllers' CRDs, starts both controllers, and returns once both report
// ready on their health endpoints (at most 60 s; an error says which did not, with its log's
// tail).
func Start(ctx context.Context, o Options) (*Flux, error) {
	for _, name := range Controllers {
		crds := filepath.Join(o.BinDir, name+".crds.yaml")
		if out, err := exec.CommandContext(ctx, o.Kubectl, "--kubeconfig", o.Kubeconfig, "apply", "--server-side", "-f", crds).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("applying %s: %v: %s (run hack/build-binaries.sh %s)", crds, err, out, name)
		}
	}
	if out, err := exec.CommandContext(ctx, o.Kubectl, "--kubeconfig", o.Kubeconfig, "wait", "--for=condition=Established", "--timeout=30s",
		"crd/gitrepositories.source.toolkit.fluxcd.io", "crd/kustomizations.kustomize.toolkit.fluxcd.io").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("the Flux CRDs are not established: %v: %s", err, out)
	}
	storage := filepath.Join(o.StateDir, "flux-artifacts")
	if err := os.MkdirAll(storage, 0o755); err != nil {
		return nil, err
	}
	ports := make([]int, 5)
	for i := range ports {
		p, err := localcluster.FreePort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	addr := func(p int) string { return "127.0.0.1:" + strconv.Itoa(p) }
	args := map[string][]string{
		"source-controller": {
			"--storage-path=" + storage, "--storage-addr=" + addr(ports[0]), "--storage-adv-addr=" + addr(ports[0]),
			"--metrics-addr=" + addr(ports[1]), "--health-addr=" + addr(ports[2]),
		},
		// A new commit cancels the health check of the one before, so a commit made while
		// a rollout is waited on (paused: true) applies at once, not after the timeout
		// (kustomize-controller's default waits; docs/gitops.md).
		"kustomize-controller": {"--metrics-addr=" + addr(ports[3]), "--health-addr=" + addr(ports[4]),
			"--feature-gates=CancelHealthCheckOnNewRevision=true"},
	}
	health := map[string]int{"source-controller": ports[2], "kustomize-controller": ports[4]}
	f := &Flux{}
	for _, name := range Controllers {
		p := &localcluster.Process{
			Name: name, Path: filepath.Join(o.BinDir, name),
			Args: append(args[name], "--enable-leader-election=false", "--log-level=info", "--log-encoding=console"),
			Log:  filepath.Join(o.StateDir, name+".log"),
			// Flux reads its kubeconfig from the environment; RUNTIME_NAMESPACE is where it
			// would keep leader-election leases (off here).
			Env: []string{"KUBECONFIG=" + o.Kubeconfig, "RUNTIME_NAMESPACE=flux-system"},
		}
		if err := p.Start(); err != nil {
			f.Stop()
			return nil, err
		}
		f.procs = append(f.procs, p)
	}
	for _, p := range f.procs {
		if err := waitReady(ctx, p, health[p.Name]); err != nil {
			f.Stop()
			return nil, err
		}
	}
	return f, nil
}

// waitReady polls a controller's /readyz until it answers 200, at most 60 s.
func waitReady(ctx context.Context, p *localcluster.Process, port int) error {
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", port)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if !p.Running() {
			return fmt.Errorf("%s exited: %s", p.Name, p.Tail(2000))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return errors.New(p.Name + " not ready within 60s: " + p.Tail(2000))
}

// Stop stops both controllers (10 s grace each).
func (f *Flux) Stop() {
	for _, p := range f.procs {
		p.Stop(10 * time.Second)
	}
}
