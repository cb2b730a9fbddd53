package story

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// Capture writes rsvc, as the API server returned it, to the Argo CD health check's testdata
// (<root>/config/argocd/resource_customizations/…/testdata/<name>.yaml) when
// SCHEMAGATE_CAPTURE_TESTDATA is set, so the Lua check is tested on objects from real runs
// (envtest and the local cluster). managedFields are left out.
func Capture(t *testing.T, root, name string, rsvc *routingv1alpha1.RoutingService) {
	t.Helper()
	if os.Getenv("SCHEMAGATE_CAPTURE_TESTDATA") == "" {
		return
	}
	obj := rsvc.DeepCopy()
	obj.ManagedFields = nil
	obj.APIVersion, obj.Kind = routingv1alpha1.GroupVersion.String(), "RoutingService"
	b, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "config", "argocd", "resource_customizations", "routing.schemagate.io", "RoutingService", "testdata")
	if err := os.WriteFile(filepath.Join(dir, name+".yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}
