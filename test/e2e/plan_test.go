//go:build e2e

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// planAgainst runs `kubectl schemagate plan -f <rsvc as a manifest> --exit-code` against the
// local cluster and returns its output and exit code.
func planAgainst(t *testing.T, rsvc *routingv1alpha1.RoutingService, extra ...string) (string, int) {
	t.Helper()
	m := rsvc.DeepCopy()
	m.APIVersion, m.Kind = routingv1alpha1.GroupVersion.String(), "RoutingService"
	m.Status, m.ResourceVersion, m.UID, m.Generation, m.ManagedFields = routingv1alpha1.RoutingServiceStatus{}, "", "", 0, nil
	m.CreationTimestamp = metav1.Time{}
	b, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "rsvc.yaml")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"plan", "-f", file, "--exit-code", "--kubeconfig", cluster.Kubeconfig}, extra...)
	out, err := exec.Command(filepath.Join(binDir, "kubectl-schemagate"), args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("plan: %v\n%s", err, out)
	return "", -1
}

// Issue 12: `plan` against the live object: the manifest as applied plans no rollout (exit 0);
// a new image and a schema bump plan a rollout (exit 2) with the migration from the confirmed
// version; a shard reorder is flagged; an invalid manifest is refused offline with the API
// server's message (exit 1), and the live object is untouched throughout.
func TestPlanAgainstTheLiveObject(t *testing.T) {
	t.Parallel()
	ns := kit().NewNamespace(t)
	ctx := context.Background()
	if err := k8s.Create(ctx, story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 2*time.Minute)
	live := kit().Get(t, ns)

	out, code := planAgainst(t, live)
	if code != 0 || !strings.Contains(out, "compared with the live object") || !strings.Contains(out, "(unchanged): no rollout") {
		t.Fatalf("unchanged: exit %d\n%s", code, out)
	}
	next := live.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "app:v2"
	next.Spec.Schema.Version = "2"
	out, code = planAgainst(t, next)
	if code != 2 || !strings.Contains(out, "Migration: schema 1 → 2: a Job runs first") || !strings.Contains(out, "1.  us-east   re-roll: 3 pods replaced, at least 3 of 3 available, surge 1") {
		t.Fatalf("v2: exit %d\n%s", code, out)
	}
	t.Logf("plan of v2 with schema 2:\n%s", out)
	next = live.DeepCopy()
	next.Spec.Shards[0], next.Spec.Shards[2] = next.Spec.Shards[2], next.Spec.Shards[0]
	if out, code = planAgainst(t, next); code != 2 || !strings.Contains(out, "! spec.shards: the shard order changes") {
		t.Fatalf("reorder: exit %d\n%s", code, out)
	}
	// The schema lifecycle: v2 declares the range it runs on and a contract. plan lists the live
	// ReplicaSets and prints the phases in order and the range of the revision every shard
	// serves (recorded on its ReplicaSets, or assumed for one of an earlier release).
	next = live.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "app:v2"
	next.Spec.Schema.Version = "2"
	next.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Min: "2", Max: "3"}
	next.Spec.Schema.Contract = &routingv1alpha1.ContractSpec{Version: "3", Migration: next.Spec.Schema.Migration}
	out, code = planAgainst(t, next)
	for _, want := range []string{"Lifecycle, in order:", "1.  expand    schema 1 → 2 before any shard", "3.  contract  schema 2 → 3",
		"Schema ranges:", "serves us-east, eu-west, ap-south; the stable revision, where a rollback returns"} {
		if code != 2 || !strings.Contains(out, want) {
			t.Fatalf("lifecycle: exit %d, want 2 and %q\n%s", code, want, out)
		}
	}
	// v1 declares no range: either its recorded range stops below 3 (the contract closes its way
	// back) or it is assumed (and said to be): the contract is flagged against v1 either way.
	flagged := false
	for _, line := range strings.Split(out, "\n") {
		flagged = flagged || strings.HasPrefix(line, "  ! spec.schema.contract: ") && strings.Contains(line, live.Status.StableRevision)
	}
	if !flagged {
		t.Fatalf("lifecycle: the contract is not flagged against revision %s\n%s", live.Status.StableRevision, out)
	}
	t.Logf("plan of v2 on [2, 3] with a contract to 3:\n%s", out)
	next = live.DeepCopy()
	next.Spec.Shards[1].Replicas = -1
	if out, code = planAgainst(t, next); code != 1 || !strings.Contains(out, "spec.shards[1].replicas") {
		t.Fatalf("invalid: exit %d\n%s", code, out)
	}
	if after := kit().Get(t, ns); after.Generation != live.Generation || after.ResourceVersion != live.ResourceVersion {
		t.Fatalf("plan changed the live object: generation %d → %d", live.Generation, after.Generation)
	}
}
