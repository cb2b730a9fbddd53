//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// appChart writes a chart whose only template is rsvc (the way an application team ships a
// RoutingService with Helm) and returns its folder.
func appChart(t *testing.T, rsvc *routingv1alpha1.RoutingService) string {
	t.Helper()
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "templates"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte("apiVersion: v2\nname: edge\nversion: 0.1.0\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(dir, "templates", "routingservice.yaml"), manifest(t, rsvc), 0o644))
	return dir
}

// Helm 4 waits with kstatus (`--wait=watcher`): `helm install` of a chart holding a
// RoutingService returns only once it is promoted in every shard; `helm upgrade` to a version
// whose migration fails returns an error once the RoutingService is Stalled, and v1 keeps
// serving.
func TestHelmWaitWatcher(t *testing.T) {
	t.Parallel()
	ns := kit().NewNamespace(t)
	helm := helmOn(t, cluster.Kubeconfig)

	start := time.Now()
	out, err := helm("install", "edge", appChart(t, e2eFixture(ns)), "-n", ns, "--wait=watcher", "--timeout=3m")
	installed := time.Since(start)
	if err != nil {
		t.Fatalf("helm install --wait=watcher: %v\n%s", err, out)
	}
	r := kit().Get(t, ns)
	ready := story.Condition(r, routingv1alpha1.ConditionReady)
	if ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != r.Generation || r.Status.PromotedShards != "3/3" {
		t.Fatalf("helm install returned after %s while the RoutingService is %s", installed.Round(time.Millisecond), rsvcLine(r))
	}
	if got := kit().Serving(t, ns); got != story.AllV1 {
		t.Fatalf("helm install returned while serving %s", got)
	}
	t.Logf("helm install --wait=watcher returned after %s, with the RoutingService %s", installed.Round(time.Millisecond), rsvcLine(r))

	broken := e2eFixture(ns)
	story.ToV2("app:v2", "migrate:v2")(broken)
	broken.Spec.Schema.Migration.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "fail"}
	start = time.Now()
	out, err = helm("upgrade", "edge", appChart(t, broken), "-n", ns, "--wait=watcher", "--timeout=2m")
	upgraded := time.Since(start)
	r = kit().Get(t, ns)
	t.Logf("helm upgrade --wait=watcher to a failing migration returned after %s (%v): %s; the RoutingService is %s",
		upgraded.Round(time.Millisecond), err, firstLine(out), rsvcLine(r))
	if err == nil {
		t.Fatalf("helm upgrade to a failing migration succeeded:\n%s", out)
	}
	if stalled := story.Condition(r, routingv1alpha1.ConditionStalled); stalled == nil || stalled.Status != metav1.ConditionTrue ||
		stalled.Reason != routingv1alpha1.ReasonMigrationFailed {
		t.Errorf("helm upgrade failed, but the RoutingService is %s", rsvcLine(r))
	}
	if upgraded >= 2*time.Minute {
		t.Errorf("helm upgrade waited its whole timeout (%s) instead of failing on Stalled", upgraded.Round(time.Millisecond))
	}
	if !strings.Contains(out, "RoutingService") {
		t.Errorf("helm's error does not name the RoutingService:\n%s", out)
	}
	story.Consistently(t, 2*time.Second, "v1 keeps serving", kit().ServingIs(t, ns, story.AllV1))
}
