// Package story holds the vocabulary of schemagate's user-story tests, shared by the envtest
// suite (test/integration) and the end-to-end suite (test/e2e): the scenarios' fixture rs-a, and
// reads and waits on a real API server through a Kit.
package story

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Kit reads and waits on a real API server.
type Kit struct{ C client.Client }

// NewNamespace creates a namespace of the test's own, so that tests run in parallel.
func (k Kit) NewNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "story-"}}
	if err := k.C.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// Fixture is the scenarios' rs-a: shards us-east, eu-west, ap-south with 3 replicas each, image
// app:v1 needing schema 1, migration image migrate:ok; bake 1 s and a progress deadline of 6 s
// keep the stories short.
func Fixture(ns string) *routingv1alpha1.RoutingService {
	shard := func(name, region string) routingv1alpha1.ShardSpec {
		return routingv1alpha1.ShardSpec{Name: name, Replicas: 3, NodeSelector: map[string]string{"topology.kubernetes.io/region": region}}
	}
	return &routingv1alpha1.RoutingService{
		ObjectMeta: metav1.ObjectMeta{Name: "rs-a", Namespace: ns},
		Spec: routingv1alpha1.RoutingServiceSpec{
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "rs-a"}, Annotations: map[string]string{"example.com/owner": "edge"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v1"}}},
			},
			Schema: routingv1alpha1.SchemaSpec{Version: "1", Migration: routingv1alpha1.MigrationSpec{
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "migrate", Image: "migrate:ok"}}}},
			}},
			Shards: []routingv1alpha1.ShardSpec{shard("us-east", "us-east-1"), shard("eu-west", "eu-west-1"), shard("ap-south", "ap-south-1")},
			Strategy: routingv1alpha1.RolloutStrategy{
				MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				BakeSeconds: ptr.To(int32(1)), ProgressDeadlineSeconds: ptr.To(int32(6)), RevisionHistoryLimit: ptr.To(int32(2)),
				FailurePolicy: routingv1alpha1.FailurePolicyRollback,
			},
		},
	}
}

func (k Kit) Get(t *testing.T, ns string) *routingv1alpha1.RoutingService {
	t.Helper()
	rsvc := &routingv1alpha1.RoutingService{}
	if err := k.C.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, rsvc); err != nil {
		t.Fatal(err)
	}
	return rsvc
}

// Update changes rs-a's spec (retrying on conflicts, as kubectl edit would be retried by a person).
func (k Kit) Update(t *testing.T, ns string, mutate func(*routingv1alpha1.RoutingService)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rsvc := k.Get(t, ns)
		mutate(rsvc)
		return k.C.Update(context.Background(), rsvc)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ToV2 is the scenarios' "update": image app:v2 needing schema 2, with a migration Job.
func ToV2(image, migrationImage string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = image
		r.Spec.Schema.Version = "2"
		r.Spec.Schema.Migration.Template.Spec.Containers[0].Image = migrationImage
	}
}

// Condition returns rs-a's condition of type t if it describes the current generation.
func Condition(rsvc *routingv1alpha1.RoutingService, t string) *metav1.Condition {
	c := meta.FindStatusCondition(rsvc.Status.Conditions, t)
	if c == nil || c.ObservedGeneration != rsvc.Generation || rsvc.Status.ObservedGeneration != rsvc.Generation {
		return nil
	}
	return c
}

// HasCondition reports as an error whether rs-a's condition t is status with reason (any if "").
func (k Kit) HasCondition(t *testing.T, ns, condType string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		rsvc := k.Get(t, ns)
		c := Condition(rsvc, condType)
		if c == nil {
			return fmt.Errorf("no %s condition for generation %d: %+v", condType, rsvc.Generation, rsvc.Status.Conditions)
		}
		if c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s is %s/%s (%s), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
		}
		return nil
	}
}

// WaitReady waits for Ready=True (RolloutComplete) on the current generation.
func (k Kit) WaitReady(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "Ready=True", k.HasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete))
}

// ReplicaSets lists the namespace's ReplicaSets.
func (k Kit) ReplicaSets(t *testing.T, ns string) []appsv1.ReplicaSet {
	t.Helper()
	var list appsv1.ReplicaSetList
	if err := k.C.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// Jobs lists the namespace's Jobs.
func (k Kit) Jobs(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := k.C.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// Serving describes, per shard in order, the images asked for and available:
// "us-east=app:v1:3/3 eu-west=app:v1:3/3 ap-south=app:v1:3/3" (ReplicaSets at 0 are left out).
func (k Kit) Serving(t *testing.T, ns string) string {
	t.Helper()
	per := map[string][]string{}
	for _, rs := range k.ReplicaSets(t, ns) {
		if ptr.Deref(rs.Spec.Replicas, 1) == 0 && rs.Status.Replicas == 0 {
			continue
		}
		per[rs.Labels[rollout.LabelShard]] = append(per[rs.Labels[rollout.LabelShard]],
			fmt.Sprintf("%s=%s:%d/%d", rs.Labels[rollout.LabelShard], rs.Spec.Template.Spec.Containers[0].Image, *rs.Spec.Replicas, rs.Status.AvailableReplicas))
	}
	var out []string
	for _, shard := range []string{"us-east", "eu-west", "ap-south"} {
		sort.Strings(per[shard])
		out = append(out, per[shard]...)
	}
	return strings.Join(out, " ")
}

// ServingIs reports as an error whether Serving differs from want.
func (k Kit) ServingIs(t *testing.T, ns, want string) func() error {
	return func() error {
		if got := k.Serving(t, ns); got != want {
			return fmt.Errorf("serving %q, want %q", got, want)
		}
		return nil
	}
}

// AllV1 is Serving of the steady fixture.
const AllV1 = "us-east=app:v1:3/3 eu-west=app:v1:3/3 ap-south=app:v1:3/3"

// EventsFor lists the reasons of the Events recorded on rs-a.
func (k Kit) EventsFor(t *testing.T, ns string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k.C.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Name == "rs-a" {
			out = append(out, e.Reason)
		}
	}
	return out
}

// Eventually polls cond every 100 ms until it returns nil or timeout passes; then it fails the
// test with cond's last error.
func Eventually(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}

// Consistently checks cond every 100 ms for d and fails the test at its first error.
func Consistently(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if err := cond(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
