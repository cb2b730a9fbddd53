package integration

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

// newNamespace creates a namespace of the test's own, so that tests run in parallel.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "story-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// fixture is the scenarios' rs-a: shards us-east, eu-west, ap-south with 3 replicas each, image
// app:v1 needing schema 1, migration image migrate:ok; bake 1 s and a progress deadline of 6 s
// keep the stories short.
func fixture(ns string) *routingv1alpha1.RoutingService {
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
				BakeSeconds: 1, ProgressDeadlineSeconds: 6, RevisionHistoryLimit: 2,
				FailurePolicy: routingv1alpha1.FailurePolicyRollback,
			},
		},
	}
}

func get(t *testing.T, ns string) *routingv1alpha1.RoutingService {
	t.Helper()
	rsvc := &routingv1alpha1.RoutingService{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, rsvc); err != nil {
		t.Fatal(err)
	}
	return rsvc
}

// update changes rs-a's spec (retrying on conflicts, as kubectl edit would be retried by a person).
func update(t *testing.T, ns string, mutate func(*routingv1alpha1.RoutingService)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rsvc := get(t, ns)
		mutate(rsvc)
		return k8s.Update(context.Background(), rsvc)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// toV2 is the scenarios' "update": image app:v2 needing schema 2, with a migration Job.
func toV2(image, migrationImage string) func(*routingv1alpha1.RoutingService) {
	return func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = image
		r.Spec.Schema.Version = "2"
		r.Spec.Schema.Migration.Template.Spec.Containers[0].Image = migrationImage
	}
}

// condition returns rs-a's condition of type t if it describes the current generation.
func condition(rsvc *routingv1alpha1.RoutingService, t string) *metav1.Condition {
	c := meta.FindStatusCondition(rsvc.Status.Conditions, t)
	if c == nil || c.ObservedGeneration != rsvc.Generation || rsvc.Status.ObservedGeneration != rsvc.Generation {
		return nil
	}
	return c
}

// hasCondition reports as an error whether rs-a's condition t is status with reason (any if "").
func hasCondition(t *testing.T, ns, condType string, status metav1.ConditionStatus, reason string) func() error {
	return func() error {
		rsvc := get(t, ns)
		c := condition(rsvc, condType)
		if c == nil {
			return fmt.Errorf("no %s condition for generation %d: %+v", condType, rsvc.Generation, rsvc.Status.Conditions)
		}
		if c.Status != status || (reason != "" && c.Reason != reason) {
			return fmt.Errorf("%s is %s/%s (%s), want %s/%s", condType, c.Status, c.Reason, c.Message, status, reason)
		}
		return nil
	}
}

func waitReady(t *testing.T, ns string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "Ready=True", hasCondition(t, ns, routingv1alpha1.ConditionReady, metav1.ConditionTrue, routingv1alpha1.ReasonRolloutComplete))
}

func replicaSets(t *testing.T, ns string) []appsv1.ReplicaSet {
	t.Helper()
	var list appsv1.ReplicaSetList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func jobs(t *testing.T, ns string) []batchv1.Job {
	t.Helper()
	var list batchv1.JobList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// serving describes, per shard in order, the images asked for and available:
// "us-east=app:v1:3/3 eu-west=app:v1:3/3 ap-south=app:v1:3/3" (ReplicaSets at 0 are left out).
func serving(t *testing.T, ns string) string {
	t.Helper()
	per := map[string][]string{}
	for _, rs := range replicaSets(t, ns) {
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

func servingIs(t *testing.T, ns, want string) func() error {
	return func() error {
		if got := serving(t, ns); got != want {
			return fmt.Errorf("serving %q, want %q", got, want)
		}
		return nil
	}
}

const allV1 = "us-east=app:v1:3/3 eu-west=app:v1:3/3 ap-south=app:v1:3/3"

// steadyV1 creates rs-a and waits until v1 serves every shard.
func steadyV1(t *testing.T) string {
	t.Helper()
	ns := newNamespace(t)
	if err := k8s.Create(context.Background(), fixture(ns)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, 60*time.Second)
	eventually(t, 10*time.Second, "v1 everywhere", servingIs(t, ns, allV1))
	return ns
}

// finishJob finishes the migration Job for version (a "manual" one) as the Job controller would.
func finishJob(t *testing.T, ns, version string, success bool) {
	t.Helper()
	name := rollout.MigrationJobName("rs-a", version, 1)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := &batchv1.Job{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, j); err != nil {
			return err
		}
		return fake.finish(context.Background(), j, success)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// eventsFor lists the reasons of the Events recorded on rs-a.
func eventsFor(t *testing.T, ns string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
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
