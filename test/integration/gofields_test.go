package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// minimalRoutingService sets only the required fields: no strategy field, no migration
// backoffLimit or activeDeadlineSeconds, not paused.
func minimalRoutingService(ns string) *routingv1alpha1.RoutingService {
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Name: "rs-a", Namespace: ns},
		Spec: routingv1alpha1.RoutingServiceSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rs-a"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v1"}}},
			},
			Schema: routingv1alpha1.SchemaSpec{Version: "1", Migration: routingv1alpha1.MigrationSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "migrate", Image: "migrate:ok"}}}},
			}},
			Shards:   []routingv1alpha1.ShardSpec{{Name: "us-east", Replicas: 3}},
			Strategy: routingv1alpha1.RolloutStrategy{},
		},
	}
}

// Issue 8 item 14: a Go client that leaves the strategy empty sends no zeros, so the API server
// accepts the RoutingService and the CRD fills in every default, the same defaults the Go
// accessors return for an object that never went through the API server.
func TestGoClientEmptyStrategyGetsEveryCRDDefault(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)

	if err := k8s.Create(ctx, minimalRoutingService(ns)); err != nil {
		t.Fatalf("the API server rejected a RoutingService with an empty strategy from Go: %v", err)
	}
	got := kit.Get(t, ns)
	s, m := got.Spec.Strategy, got.Spec.Schema.Migration
	str := func(v *intstr.IntOrString) string {
		if v == nil {
			return "<unset>"
		}
		return v.String()
	}
	i32 := func(v *int32) string {
		if v == nil {
			return "<unset>"
		}
		return fmt.Sprint(*v)
	}
	i64 := func(v *int64) string {
		if v == nil {
			return "<unset>"
		}
		return fmt.Sprint(*v)
	}
	for _, c := range []struct{ field, got, want string }{
		{"strategy.maxSurge", str(s.MaxSurge), "25%"},
		{"strategy.maxUnavailable", str(s.MaxUnavailable), "0"},
		{"strategy.minReadySeconds", i32(s.MinReadySeconds), "0"},
		{"strategy.bakeSeconds", i32(s.BakeSeconds), "60"},
		{"strategy.progressDeadlineSeconds", i32(s.ProgressDeadlineSeconds), "600"},
		{"strategy.failurePolicy", string(s.FailurePolicy), "Rollback"},
		{"strategy.revisionHistoryLimit", i32(s.RevisionHistoryLimit), "2"},
		{"schema.migration.backoffLimit", i32(m.BackoffLimit), "2"},
		{"schema.migration.activeDeadlineSeconds", i64(m.ActiveDeadlineSeconds), "600"},
	} {
		if c.got != c.want {
			t.Errorf("stored spec.%s = %s, want the CRD default %s", c.field, c.got, c.want)
		}
	}

	// The API server's defaults are the Go accessors' defaults.
	var empty routingv1alpha1.RolloutStrategy
	var noMigration routingv1alpha1.MigrationSpec
	if s.MaxSurgeOrDefault() != empty.MaxSurgeOrDefault() || s.MaxUnavailableOrDefault() != empty.MaxUnavailableOrDefault() ||
		s.MinReadySecondsOrDefault() != empty.MinReadySecondsOrDefault() || s.BakeSecondsOrDefault() != empty.BakeSecondsOrDefault() ||
		s.ProgressDeadlineSecondsOrDefault() != empty.ProgressDeadlineSecondsOrDefault() ||
		s.FailurePolicyOrDefault() != empty.FailurePolicyOrDefault() || s.RevisionHistoryLimitOrDefault() != empty.RevisionHistoryLimitOrDefault() ||
		m.BackoffLimitOrDefault() != noMigration.BackoffLimitOrDefault() || m.ActiveDeadlineSecondsOrDefault() != noMigration.ActiveDeadlineSecondsOrDefault() {
		t.Errorf("the API server's defaults %+v %+v differ from the Go accessors' defaults", s, m)
	}

	// And the controller runs it with them: the migration Job carries the defaulted limits.
	story.Eventually(t, 20*time.Second, "migration Job created", func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: rollout.MigrationJobName("rs-a", "1", 1)}, j); err != nil {
			return err
		}
		if j.Spec.BackoffLimit == nil || *j.Spec.BackoffLimit != 2 || j.Spec.ActiveDeadlineSeconds == nil || *j.Spec.ActiveDeadlineSeconds != 600 {
			return fmt.Errorf("job backoffLimit %s, activeDeadlineSeconds %s, want 2 and 600", i32(j.Spec.BackoffLimit), i64(j.Spec.ActiveDeadlineSeconds))
		}
		return nil
	})
}

// The control: the zeros a Go client used to send for an empty strategy are what the API server
// rejects, so omitting them (not the server's leniency) is what makes the story above pass.
func TestGoClientZeroProgressDeadlineIsRejected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := kit.NewNamespace(t)

	obj, err := runtimeToUnstructured(minimalRoutingService(ns))
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(obj.Object, map[string]any{
		"minReadySeconds": int64(0), "bakeSeconds": int64(0), "progressDeadlineSeconds": int64(0), "revisionHistoryLimit": int64(0),
	}, "spec", "strategy"); err != nil {
		t.Fatal(err)
	}
	err = k8s.Create(ctx, obj)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "progressDeadlineSeconds") {
		t.Fatalf("creating with progressDeadlineSeconds: 0 = %v, want Invalid naming progressDeadlineSeconds", err)
	}
}

func runtimeToUnstructured(r *routingv1alpha1.RoutingService) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(routingv1alpha1.GroupVersion.String())
	u.SetKind("RoutingService")
	return u, nil
}
