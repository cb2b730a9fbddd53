package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// stalledQuoting reports as an error whether rs-a is not Stalled=True with reason and a message
// holding every one of parts.
func stalledQuoting(t *testing.T, ns, reason string, parts ...string) func() error {
	return func() error {
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, reason)(); err != nil {
			return err
		}
		c := story.Condition(kit.Get(t, ns), routingv1alpha1.ConditionStalled)
		for _, p := range parts {
			if !strings.Contains(c.Message, p) {
				return fmt.Errorf("Stalled message %q does not say %q", c.Message, p)
			}
		}
		return nil
	}
}

// An admission policy (a ValidatingAdmissionPolicy, enforced by the API server itself) forbids
// the new revision's ReplicaSet. The refusal is in status with the policy's message, v1 keeps
// serving untouched, the shard's progress deadline still ends the step, and once the policy is
// gone the next spec rolls out.
func TestRefusedByAdmissionPolicyIsVisible(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := steadyV1(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(15)) })
	kit.WaitReady(t, ns, 30*time.Second)

	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-v2-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"replicasets"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression: "object.spec.template.spec.containers.all(c, c.image != 'app:v2')",
				Message:    "app:v2 is not approved in this namespace",
			}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "no-v2-" + ns},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}
	// The API server enforces a policy once its informer has it: wait until a dry run is refused.
	probe := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"probe": "1"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"probe": "1"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v2"}}}}},
	}
	story.Eventually(t, 20*time.Second, "the policy is enforced", func() error {
		if err := k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll); err == nil {
			return fmt.Errorf("a ReplicaSet of app:v2 is still admitted")
		}
		return nil
	})

	kit.Update(t, ns, story.ToV2("app:v2", "migrate:ok"))
	story.Eventually(t, 20*time.Second, "the refusal is in status", stalledQuoting(t, ns, routingv1alpha1.ReasonWriteRefused,
		"refused to create ReplicaSet rs-a-us-east-", "app:v2 is not approved in this namespace"))
	if got := kit.Serving(t, ns); got != story.AllV1 {
		t.Fatalf("nothing serving may change: %s", got)
	}
	if !contains(kit.EventsFor(t, ns), routingv1alpha1.ReasonWriteRefused) {
		t.Errorf("no WriteRefused Event: %v", kit.EventsFor(t, ns))
	}
	// The progress deadline (15 s) still ends the refused step.
	story.Eventually(t, 40*time.Second, "the progress deadline still applies", kit.HasCondition(t, ns,
		routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonProgressDeadlineExceeded))
	if got := kit.Serving(t, ns); got != story.AllV1 {
		t.Fatalf("nothing serving may change: %s", got)
	}

	if err := k8s.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 20*time.Second, "the policy is gone", func() error {
		return k8s.Create(ctx, probe.DeepCopy(), client.DryRunAll)
	})
	kit.Update(t, ns, story.ToV2("app:v3", "migrate:ok"))
	kit.WaitReady(t, ns, 90*time.Second)
	story.Eventually(t, 10*time.Second, "v3 everywhere", kit.ServingIs(t, ns, strings.ReplaceAll(story.AllV1, "app:v1", "app:v3")))
}

// A pod template field the CRD cannot check (a CPU request above its limit) makes the API server
// refuse the ReplicaSet as Invalid: status quotes its message, v1 keeps serving, and a fixed spec
// rolls out with no stale refusal left.
func TestInvalidPodTemplateFieldIsVisible(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(60))
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		}
	})
	story.Eventually(t, 20*time.Second, "the refusal is in status", stalledQuoting(t, ns, routingv1alpha1.ReasonWriteRefused,
		"refused to create ReplicaSet rs-a-us-east-", "must be less than or equal to cpu limit"))
	story.Consistently(t, 2*time.Second, "v1 untouched", kit.ServingIs(t, ns, story.AllV1))

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	})
	kit.WaitReady(t, ns, 90*time.Second)
	story.Eventually(t, 10*time.Second, "v2 everywhere", kit.ServingIs(t, ns, strings.ReplaceAll(story.AllV1, "app:v1", "app:v2")))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
