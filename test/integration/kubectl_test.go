package integration

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// kubectl runs the kubectl that hack/build-binaries.sh built, against the envtest API server,
// and returns its stdout and stderr together.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	// An administrator of its own (group system:masters), as envtest's deprecated default kubectl was.
	admin, err := testEnv.ControlPlane.AddUser(envtest.User{Name: "kubectl-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatalf("envtest user for kubectl: %v", err)
	}
	k, err := admin.Kubectl()
	if err != nil {
		t.Fatalf("kubectl for the envtest user: %v", err)
	}
	stdout, stderr, err := k.Run(args...)
	o, _ := io.ReadAll(stdout)
	e, _ := io.ReadAll(stderr)
	return string(o) + string(e), err
}

// The generated CRD and the samples apply with server-side apply, as the README says.
func TestKubectlServerSideApplyOfCRDAndSamples(t *testing.T) {
	t.Parallel()
	ns := kit.NewNamespace(t)
	if out, err := kubectl(t, "apply", "--server-side", "-f", filepath.Join(rootDir, "config/crd/bases")); err != nil {
		t.Fatalf("apply CRD: %v\n%s", err, out)
	}
	if out, err := kubectl(t, "apply", "--server-side", "-n", ns, "-k", filepath.Join(rootDir, "config/samples")); err != nil {
		t.Fatalf("apply samples: %v\n%s", err, out)
	}
	story.Eventually(t, 20*time.Second, "the sample is reconciled", func() error {
		out, err := kubectl(t, "get", "routingservice", "edge-router", "-n", ns)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		// Printer columns: READY REASON CONFIRMED REQUIRED SHARDS AGE.
		if !strings.Contains(out, "REQUIRED") || !strings.Contains(out, "SHARDS") || !strings.Contains(out, "/3") {
			return fmt.Errorf("printer columns: %s", out)
		}
		return nil
	})
	out, err := kubectl(t, "explain", "routingservice.spec.strategy")
	if err != nil || !strings.Contains(out, "bakeSeconds") || !strings.Contains(out, "counted from the moment") {
		t.Fatalf("kubectl explain: %v\n%s", err, out)
	}
}

// S-14: wrong specs are rejected by the API server with a message naming the field, nothing
// already running changes, and then a valid v2 rolls out with no stale failure left.
func TestStoryS14InvalidSpecThenFix(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	before := map[string]string{}
	for _, rs := range kit.ReplicaSets(t, ns) {
		before[rs.Name] = rs.ResourceVersion
	}
	generation := kit.Get(t, ns).Generation

	// Each case edits the manifest as a person would (an explicit empty value stays in the YAML).
	cases := []struct {
		name  string
		fresh bool // apply as a new object (server-side apply merges lists into the existing one)
		path  []string
		value any
		field string
	}{
		{"empty image", false, []string{"spec", "template", "spec", "containers"}, []any{map[string]any{"name": "app", "image": ""}}, "spec.template.spec.containers"},
		{"schema version that is not a version", false, []string{"spec", "schema", "version"}, "v2", "spec.schema.version"},
		{"duplicate shard names", false, []string{"spec", "shards"}, []any{
			map[string]any{"name": "us-east", "replicas": int64(3)}, map[string]any{"name": "us-east", "replicas": int64(3)}}, "spec.shards"},
		{"zero shards", true, []string{"spec", "shards"}, []any{}, "spec.shards"},
		{"negative replicas", false, []string{"spec", "shards"}, []any{map[string]any{"name": "us-east", "replicas": int64(-1)}}, "spec.shards[0].replicas"},
		{"migration restartPolicy Always", false, []string{"spec", "schema", "migration", "template", "spec", "restartPolicy"}, "Always", "spec.schema.migration.template.spec.restartPolicy"},
		{"unknown schema evidence", false, []string{"spec", "schema", "evidence"}, "Trust", "spec.schema.evidence"},
		{"check restartPolicy Always", false, []string{"spec", "schema", "check"}, map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Always", "containers": []any{map[string]any{"name": "check", "image": "schemagate-schema:dev"}}}}}, "spec.schema.check.template.spec.restartPolicy"},
		{"check without an image", false, []string{"spec", "schema", "check"}, map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Never", "containers": []any{map[string]any{"name": "check"}}}}}, "spec.schema.check.template.spec.containers"},
		{"shard check restartPolicy Always", false, []string{"spec", "strategy", "checks"}, []any{map[string]any{"name": "smoke", "job": map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Always", "containers": []any{map[string]any{"name": "verify", "image": "verify:ok"}}}}}}}, "spec.strategy.checks[0].job.template.spec.restartPolicy"},
		{"shard check at an unknown moment", false, []string{"spec", "strategy", "checks"}, []any{map[string]any{"name": "smoke", "when": []any{"Later"}, "job": map[string]any{"template": map[string]any{"spec": map[string]any{
			"restartPolicy": "Never", "containers": []any{map[string]any{"name": "verify", "image": "verify:ok"}}}}}}}, "spec.strategy.checks[0].when[0]"},
		{"maxSurge and maxUnavailable both 0", false, []string{"spec", "strategy"}, map[string]any{"maxSurge": int64(0), "maxUnavailable": "0%"}, "spec.strategy"},
		{"name too long for ReplicaSet and Job names", false, []string{"metadata", "name"}, strings.Repeat("a", 41), "metadata.name"},
	}
	for _, c := range cases {
		u := manifest(t, kit.Get(t, ns))
		if c.fresh {
			u.SetName("rs-new")
		}
		if err := unstructured.SetNestedField(u.Object, runtime.DeepCopyJSONValue(c.value), c.path...); err != nil {
			t.Fatal(err)
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "rs.yaml")
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := kubectl(t, "apply", "--server-side", "--force-conflicts", "-f", file)
		if err == nil {
			t.Errorf("%s: accepted:\n%s", c.name, out)
			continue
		}
		if !strings.Contains(out, c.field) {
			t.Errorf("%s: the error does not name %s:\n%s", c.name, c.field, out)
		}
		t.Logf("%s: %s", c.name, strings.TrimSpace(out))
	}
	if g := kit.Get(t, ns).Generation; g != generation {
		t.Fatalf("a rejected spec changed the generation: %d → %d", generation, g)
	}
	for _, rs := range kit.ReplicaSets(t, ns) {
		if before[rs.Name] != rs.ResourceVersion {
			t.Fatalf("%s changed after rejected specs", rs.Name)
		}
	}
	kit.Update(t, ns, story.ToV2("app:v2", "migrate:ok"))
	kit.WaitReady(t, ns, 60*time.Second)
	story.Eventually(t, 10*time.Second, "v2 everywhere", kit.ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	rsvc := kit.Get(t, ns)
	if c := story.Condition(rsvc, routingv1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionFalse {
		t.Fatalf("Stalled = %+v", c)
	}
}

// manifest is rsvc as a person would keep it in Git: apiVersion, kind, metadata.name and
// namespace, and the spec.
func manifest(t *testing.T, rsvc *routingv1alpha1.RoutingService) *unstructured.Unstructured {
	t.Helper()
	spec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&rsvc.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": routingv1alpha1.GroupVersion.String(),
		"kind":       "RoutingService",
		"metadata":   map[string]any{"name": rsvc.Name, "namespace": rsvc.Namespace},
		"spec":       spec,
	}}
}
