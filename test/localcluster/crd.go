package localcluster

import (
	"context"
	"fmt"
	"os/exec"
	"time"

	"k8s.io/client-go/discovery"
)

// InstallCRDs applies the kustomization in dir with `kubectl apply --server-side -k` (kubectl is
// the path of the kubectl binary) and waits until the API server serves groupVersion.
func (c *Cluster) InstallCRDs(ctx context.Context, kubectl, dir, groupVersion string) error {
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig, "apply", "--server-side", "-k", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply --server-side -k %s: %v: %s", dir, err, out)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err = dc.ServerResourcesForGroupVersion(groupVersion); err == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not served within 30s: %v", groupVersion, err)
}
