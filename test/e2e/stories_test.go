//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/localcluster"
	"github.com/schemagate/schemagate/test/story"
)

func kit() story.Kit { return story.Kit{C: k8s} }

// e2eFixture is the scenarios' rs-a with deadlines sized for real controllers: kwok makes a pod
// ready ~1 s after it is bound, so a shard of 3 takes ~5 s.
func e2eFixture(ns string) *routingv1alpha1.RoutingService {
	r := story.Fixture(ns)
	r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(25))
	r.Spec.Schema.Migration.BackoffLimit = ptr.To(int32(0))
	return r
}

func steadyV1(t *testing.T) string {
	t.Helper()
	ns := kit().NewNamespace(t)
	if err := k8s.Create(context.Background(), e2eFixture(ns)); err != nil {
		t.Fatal(err)
	}
	kit().WaitReady(t, ns, 2*time.Minute)
	story.Eventually(t, 30*time.Second, "v1 everywhere", kit().ServingIs(t, ns, story.AllV1))
	return ns
}

// pods lists the namespace's pods of a component, not being deleted.
func pods(t *testing.T, ns, component string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{rollout.LabelComponent: component}); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// podsInTheirRegion checks that every routing pod is bound to a node of its shard's region.
func podsInTheirRegion(t *testing.T, ns string) {
	t.Helper()
	region := map[string]string{"us-east": "us-east-1", "eu-west": "eu-west-1", "ap-south": "ap-south-1"}
	for _, p := range pods(t, ns, rollout.ComponentRouting) {
		want := region[p.Labels[rollout.LabelShard]]
		if p.Spec.NodeName == "" || !strings.HasPrefix(p.Spec.NodeName, "kwok-"+want+"-") {
			t.Fatalf("pod %s of shard %s is on node %q, not in %s", p.Name, p.Labels[rollout.LabelShard], p.Spec.NodeName, want)
		}
	}
}

// The demo's story: v1, then v2 with schema 2, then a v3 that never becomes ready.
func TestDemoStory(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	podsInTheirRegion(t, ns)

	kit().Update(t, ns, story.ToV2("app:v2", "migrate:v2"))
	story.Eventually(t, 30*time.Second, "migration Job for schema 2", func() error {
		for _, p := range pods(t, ns, rollout.ComponentMigration) {
			if p.Labels[rollout.LabelSchemaVersion] == "2" {
				return nil
			}
		}
		return fmt.Errorf("no migration pod for schema 2")
	})
	kit().WaitReady(t, ns, 2*time.Minute)
	story.Eventually(t, 30*time.Second, "v2 everywhere", kit().ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	podsInTheirRegion(t, ns)

	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v3"
		r.Spec.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
	})
	story.Eventually(t, 90*time.Second, "Stalled=True ProgressDeadlineExceeded",
		kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonProgressDeadlineExceeded))
	story.Eventually(t, 30*time.Second, "v2 still serving everywhere", kit().ServingIs(t, ns, "us-east=app:v2:3/3 eu-west=app:v2:3/3 ap-south=app:v2:3/3"))
	for _, rs := range kit().ReplicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == "app:v3" && rs.Labels[rollout.LabelShard] != "us-east" {
			t.Fatalf("v3 reached shard %s", rs.Labels[rollout.LabelShard])
		}
	}
}

// S-01 on real controllers: the migration pod keeps running, then fails (backoffLimit 0).
func TestS01MigrationRunningThenFailing(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:v2")(r)
		r.Spec.Schema.Migration.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
	})
	story.Eventually(t, 30*time.Second, "SchemaReady=False Migrating", kit().HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating))
	var migration corev1.Pod
	story.Eventually(t, 30*time.Second, "the migration pod runs", func() error {
		for _, p := range pods(t, ns, rollout.ComponentMigration) {
			if p.Labels[rollout.LabelSchemaVersion] == "2" && p.Status.Phase == corev1.PodRunning {
				migration = p
				return nil
			}
		}
		return fmt.Errorf("no running migration pod for schema 2")
	})
	story.Consistently(t, 5*time.Second, "no v2 pod while migrating", func() error {
		if got := kit().Serving(t, ns); got != story.AllV1 {
			return fmt.Errorf("serving changed while migrating: %s", got)
		}
		return nil
	})

	// The migration now fails: its pod exits 1, and with backoffLimit 0 the Job fails.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &corev1.Pod{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&migration), p); err != nil {
			return err
		}
		p.Annotations["schemagate.io/fake-pod"] = "fail"
		return k8s.Update(context.Background(), p)
	})
	if err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 60*time.Second, "SchemaReady=False MigrationFailed", kit().HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrationFailed))
	story.Eventually(t, 10*time.Second, "Stalled=True", kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonMigrationFailed))
	story.Consistently(t, 3*time.Second, "v1 keeps serving at full size", kit().ServingIs(t, ns, story.AllV1))
}

// S-07 on real controllers: the schema is in place; the new image never becomes ready.
func TestS07BadImageInFirstShard(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:bad"
		r.Spec.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
	})
	story.Eventually(t, 90*time.Second, "Stalled=True ProgressDeadlineExceeded",
		kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonProgressDeadlineExceeded))
	story.Eventually(t, 30*time.Second, "us-east back to full v1", kit().ServingIs(t, ns, story.AllV1))
	for _, rs := range kit().ReplicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == "app:bad" && rs.Labels[rollout.LabelShard] != "us-east" {
			t.Fatalf("shard %s was touched", rs.Labels[rollout.LabelShard])
		}
	}
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v3"
		r.Spec.Template.Annotations = nil
	})
	kit().WaitReady(t, ns, 2*time.Minute)
	story.Eventually(t, 30*time.Second, "v3 everywhere", kit().ServingIs(t, ns, "us-east=app:v3:3/3 eu-west=app:v3:3/3 ap-south=app:v3:3/3"))
}

// S-08 on real controllers: us-east takes v2 fine; v2 never becomes ready in eu-west; failurePolicy
// Rollback returns both shards to v1, stable up before v2 down (the checker watches I2).
func TestS08RollbackNeverRemovesTheOnlyHealthyPods(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:v2")(r)
		r.Spec.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready", "schemagate.io/fake-pod-region": "eu-west-1"}
	})
	story.Eventually(t, 2*time.Minute, "Stalled=True ProgressDeadlineExceeded",
		kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonProgressDeadlineExceeded))
	if f := kit().Get(t, ns).Status.Failure; f == nil || f.Shard != "eu-west" {
		t.Fatalf("status.failure = %+v, want shard eu-west", f)
	}
	story.Eventually(t, 60*time.Second, "every shard back on v1", kit().ServingIs(t, ns, story.AllV1))
	podsInTheirRegion(t, ns)
	_ = localcluster.RegionLabel
}
