package localcluster

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
)

// InstallCRDs applies the kustomization in dir with `kubectl apply --server-side -k` (kubectl is
// the path of the kubectl binary) and waits until the API server serves every resource of
// groupVersion that it applied a CRD for.
func (c *Cluster) InstallCRDs(ctx context.Context, kubectl, dir, groupVersion string) error {
	out, err := exec.CommandContext(ctx, kubectl, "--kubeconfig", c.Kubeconfig, "apply", "--server-side", "-k", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl apply --server-side -k %s: %v: %s", dir, err, out)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return err
	}
	// Every CRD of the group that was applied ("customresourcedefinition.apiextensions.k8s.io/
	// <plural>.<group> serverside-applied"), so that a manager started next finds each kind.
	group, _, _ := strings.Cut(groupVersion, "/")
	var want []string
	for _, line := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimPrefix(line, "customresourcedefinition.apiextensions.k8s.io/"), " ")
		if plural, ok := strings.CutSuffix(name, "."+group); ok && strings.HasPrefix(line, "customresourcedefinition.") {
			want = append(want, plural)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var list *metav1.APIResourceList
		if list, err = dc.ServerResourcesForGroupVersion(groupVersion); err == nil {
			missing := slices.DeleteFunc(slices.Clone(want), func(plural string) bool {
				return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == plural })
			})
			if len(missing) == 0 {
				return nil
			}
			err = fmt.Errorf("not served yet: %v", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not served within 30s: %v", groupVersion, err)
}
