package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// The example policy that requires declared ranges, as shipped: in a labelled namespace the API
// server refuses a RoutingService with no spec.schema.compatibility, naming the field; one that
// declares a range is admitted, and so is any RoutingService in a namespace without the label.
func TestRequireDeclaredRangePolicy(t *testing.T) {
	ctx := context.Background()
	policy, binding := examplePolicy(t, "require-declared-schema-range.yaml")
	for _, o := range []client.Object{policy, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
	}

	strict := kit.NewNamespace(t)
	ns := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: strict}, ns); err != nil {
		t.Fatal(err)
	}
	ns.Labels["schemagate.io/require-declared-range"] = "true"
	if err := k8s.Update(ctx, ns); err != nil {
		t.Fatal(err)
	}
	undeclared := story.Fixture(strict)
	undeclared.Spec.Shards = undeclared.Spec.Shards[:1]
	undeclared.Spec.Shards[0].Replicas = 0
	// The API server starts enforcing a new policy once it has compiled it: wait for the refusal.
	story.Eventually(t, 30*time.Second, "the undeclared range refused", func() error {
		err := k8s.Create(ctx, undeclared.DeepCopy(), client.DryRunAll)
		if err == nil {
			return errors.New("admitted")
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schema.compatibility is required in namespace "+strict) {
			return fmt.Errorf("refused, but not as the policy says: %v", err)
		}
		return nil
	})
	declared := undeclared.DeepCopy()
	declared.Spec.Schema.Compatibility = &routingv1alpha1.SchemaCompatibility{Max: "1"}
	if err := k8s.Create(ctx, declared, client.DryRunAll); err != nil {
		t.Fatalf("a declared range refused: %v", err)
	}
	elsewhere := story.Fixture(kit.NewNamespace(t))
	if err := k8s.Create(ctx, elsewhere, client.DryRunAll); err != nil {
		t.Fatalf("refused in a namespace without the label: %v", err)
	}
}

// examplePolicy reads examples/policies/<name>: a ValidatingAdmissionPolicy and its binding, as
// shipped (strictly: a field the API does not know fails).
func examplePolicy(t *testing.T, name string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	raw, err := os.ReadFile("../../examples/policies/" + name)
	if err != nil {
		t.Fatal(err)
	}
	docs := bytes.Split(raw, []byte("\n---\n"))
	if len(docs) != 2 {
		t.Fatalf("%s has %d documents, want the policy and its binding", name, len(docs))
	}
	policy, binding := &admissionv1.ValidatingAdmissionPolicy{}, &admissionv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict(docs[0], policy); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(docs[1], binding); err != nil {
		t.Fatal(err)
	}
	return policy, binding
}
