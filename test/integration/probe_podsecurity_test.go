package integration

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// A probe pod in a namespace that enforces the restricted Pod Security Standard: the API server's
// PodSecurity admission admits it when the team's migration container is restricted itself (the
// probe's own containers always are), and refuses it, naming the team's container, when that is
// not (so would it the team's migration Job's pods).
func TestProbePodIsAdmittedByRestrictedPodSecurity(t *testing.T) {
	ctx := context.Background()
	ns := kit.NewNamespace(t)
	namespace := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, namespace); err != nil {
		t.Fatal(err)
	}
	namespace.Labels["pod-security.kubernetes.io/enforce"] = "restricted"
	if err := k8s.Update(ctx, namespace); err != nil {
		t.Fatal(err)
	}
	rsvc := story.Fixture(ns)
	podOf := func() *corev1.Pod {
		job := rollout.NewProbeJob(rsvc, rollout.ProbeImages{Tools: "schemagate:dev", Database: "postgres:18"}, "2", "1", 1)
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, Spec: job.Spec.Template.Spec}
	}

	// The fixture's migration container, as most teams write one: no security context.
	err := k8s.Create(ctx, podOf(), client.DryRunAll)
	if err == nil || !strings.Contains(err.Error(), "restricted") || !strings.Contains(err.Error(), `"migrate"`) {
		t.Fatalf("a probe pod of an unrestricted migration container: %v, want a refusal naming container \"migrate\"", err)
	}
	for _, ours := range []string{rollout.ProbeContainerTools, rollout.ProbeContainerScratch, rollout.ProbeContainerCopy, rollout.ProbeContainerReport} {
		if strings.Contains(err.Error(), `"`+ours+`"`) {
			t.Errorf("the refusal names the probe's own container %s: %v", ours, err)
		}
	}

	// The same container made restricted: the probe pod is admitted.
	m := &rsvc.Spec.Schema.Migration.Template.Spec.Containers[0]
	m.SecurityContext = &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](1000), AllowPrivilegeEscalation: ptr.To(false),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if err := k8s.Create(ctx, podOf(), client.DryRunAll); err != nil {
		t.Fatalf("a probe pod of a restricted migration container: %v", err)
	}
}
