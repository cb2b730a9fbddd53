package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/schemagate/schemagate/controllers"
	"github.com/schemagate/schemagate/test/story"
)

// The example policy that protects what the manager records on Jobs, as shipped (its binding
// narrowed to this test's namespace, so the suite's manager elsewhere is not judged by it): a
// user who may patch Jobs can neither add nor change a schemagate.io/ annotation, nor create a
// Job that carries one; the manager's ServiceAccount can; removing one and writing other
// annotations stay allowed.
func TestProtectJobEvidencePolicy(t *testing.T) {
	ctx := context.Background()
	policy, binding := examplePolicy(t, "protect-job-evidence.yaml")
	ns := kit.NewNamespace(t)
	binding.Spec.MatchResources = &admissionv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	// The manager's ServiceAccount, as the installs name it, may write Jobs here.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager-jobs"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "patch"}}}}
	grant := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "manager-jobs"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccount:schemagate-system:schemagate-manager"}}}
	for _, o := range []client.Object{role, grant} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	managerCfg := rest.CopyConfig(cfg)
	managerCfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:schemagate-system:schemagate-manager"}
	manager, err := client.New(managerCfg, client.Options{Scheme: controllers.Scheme()})
	if err != nil {
		t.Fatal(err)
	}

	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-a-schema-2-1"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "migrate", Image: "migrate:v2"}}}}}}
	if err := k8s.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	annotate := func(c client.Client, key, value string) error {
		var j batchv1.Job
		if err := c.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			return err
		}
		patch := client.MergeFrom(j.DeepCopy())
		if value == "" {
			delete(j.Annotations, key)
		} else {
			metav1.SetMetaDataAnnotation(&j.ObjectMeta, key, value)
		}
		return c.Patch(ctx, &j, patch)
	}
	forged := `{"schemagate":"schema-report/v1","version":"2"}`
	// The API server enforces a new policy once it has compiled it: wait for the refusal.
	story.Eventually(t, 30*time.Second, "a forged report refused", func() error {
		err := annotate(k8s, "schemagate.io/schema-report", forged)
		if err == nil {
			_ = annotate(k8s, "schemagate.io/schema-report", "")
			return errors.New("admitted")
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only schemagate's manager") {
			return fmt.Errorf("refused, but not as the policy says: %v", err)
		}
		return nil
	})
	planted := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rs-a-probe-x-1",
		Annotations: map[string]string{"schemagate.io/probe-report": `{"schemagate":"probe-report/v1","verdict":"expand"}`}},
		Spec: *job.Spec.DeepCopy()}
	planted.Spec.Selector, planted.Spec.Template.Labels = nil, nil
	if err := k8s.Create(ctx, planted, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Fatalf("a Job created with a probe report: %v, want Forbidden", err)
	}
	// Its RoleBinding reaches the API server's authorizer through a watch: wait for it.
	story.Eventually(t, 10*time.Second, "the manager records a report", func() error { return annotate(manager, "schemagate.io/schema-report", forged) })
	if err := annotate(k8s, "schemagate.io/schema-report", `{"schemagate":"schema-report/v1","version":"3"}`); !apierrors.IsForbidden(err) {
		t.Fatalf("a user changes the manager's record: %v, want Forbidden", err)
	}
	if err := annotate(k8s, "team.example/owner", "edge"); err != nil {
		t.Fatalf("another annotation, beside the manager's: %v", err)
	}
	if err := annotate(k8s, "schemagate.io/schema-report", ""); err != nil {
		t.Fatalf("removing the manager's record (less evidence, never more): %v", err)
	}
}
