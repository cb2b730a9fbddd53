//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// owned lists the UIDs of rs-a's ReplicaSets and Jobs in ns (by schemagate's name label).
func owned(t *testing.T, ns string) (rss []appsv1.ReplicaSet, jobs []batchv1.Job, uids map[types.UID]string) {
	t.Helper()
	uids = map[types.UID]string{}
	sel := client.MatchingLabels{rollout.LabelName: "rs-a"}
	var rsList appsv1.ReplicaSetList
	var jobList batchv1.JobList
	if err := k8s.List(context.Background(), &rsList, client.InNamespace(ns), sel); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(context.Background(), &jobList, client.InNamespace(ns), sel); err != nil {
		t.Fatal(err)
	}
	for _, rs := range rsList.Items {
		uids[rs.UID] = "ReplicaSet " + rs.Name
	}
	for _, j := range jobList.Items {
		uids[j.UID] = "Job " + j.Name
	}
	return rsList.Items, jobList.Items, uids
}

// deleteRS deletes rs-a with a propagation policy and checks, until it is gone, that schemagate
// creates nothing more once its deletionTimestamp is set (S-20).
func deleteRS(t *testing.T, ns string, policy metav1.DeletionPropagation) {
	t.Helper()
	_, _, before := owned(t, ns)
	if err := k8s.Delete(context.Background(), kit().Get(t, ns), client.PropagationPolicy(policy)); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 90*time.Second, "rs-a is gone", func() error {
		_, _, now := owned(t, ns)
		for uid, what := range now {
			if _, ok := before[uid]; !ok {
				t.Fatalf("%s was created after rs-a was deleted (%s)", what, policy)
			}
		}
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "rs-a"}, &routingv1alpha1.RoutingService{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
}

// S-20, foreground and background: deleted mid-migration and mid-shard, rs-a creates nothing more,
// the garbage collector removes what it owned, and rs-a re-created under the same name starts
// afresh and converges.
func TestStoryS20DeleteAndRecreate(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		policy metav1.DeletionPropagation
		mid    func(*routingv1alpha1.RoutingService)
	}{
		{"foreground mid-migration", metav1.DeletePropagationForeground, func(r *routingv1alpha1.RoutingService) {
			story.ToV2("app:v2", "migrate:v2")(r)
			r.Spec.Schema.Migration.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready"}
		}},
		{"background mid-shard", metav1.DeletePropagationBackground, func(r *routingv1alpha1.RoutingService) {
			story.ToV2("app:v2", "migrate:v2")(r)
			r.Spec.Template.Annotations = map[string]string{"schemagate.io/fake-pod": "never-ready", "schemagate.io/fake-pod-region": "eu-west-1"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ns := steadyV1(t)
			kit().Update(t, ns, c.mid)
			story.Eventually(t, 60*time.Second, "mid-rollout", func() error {
				if c.policy == metav1.DeletePropagationBackground {
					if got := kit().Get(t, ns).Status.PromotedShards; got != "1/3" {
						return fmt.Errorf("promoted shards %s", got)
					}
					return nil
				}
				return kit().HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionFalse, routingv1alpha1.ReasonMigrating)()
			})
			deleteRS(t, ns, c.policy)
			story.Eventually(t, 60*time.Second, "the garbage collector removes what rs-a owned", func() error {
				if rss, jobs, _ := owned(t, ns); len(rss)+len(jobs) > 0 {
					return fmt.Errorf("%d ReplicaSets and %d Jobs left", len(rss), len(jobs))
				}
				return nil
			})
			if err := k8s.Create(context.Background(), e2eFixture(ns)); err != nil {
				t.Fatal(err)
			}
			kit().WaitReady(t, ns, 2*time.Minute)
			story.Eventually(t, 30*time.Second, "v1 everywhere", kit().ServingIs(t, ns, story.AllV1))
		})
	}
}

// S-20, orphan: deleted with --cascade=orphan mid-shard, then applied again. The new rs-a adopts
// the orphaned ReplicaSets (never two sets of pods per shard), never takes the orphaned migration
// Job as evidence and says so (NameConflict naming it, not a create loop), rolls out once the
// user removes that Job, and its final delete leaves nothing behind.
func TestStoryS20OrphanThenRecreate(t *testing.T) {
	t.Parallel()
	ns := steadyV1(t)
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v2" // schema 1: no migration
		r.Spec.Strategy.BakeSeconds = ptr.To(int32(600))
	})
	story.Eventually(t, 60*time.Second, "us-east baking v2", kit().HasCondition(t, ns, routingv1alpha1.ConditionReconciling, metav1.ConditionTrue, routingv1alpha1.ReasonShardBaking))
	deleteRS(t, ns, metav1.DeletePropagationOrphan)
	story.Eventually(t, 30*time.Second, "the garbage collector orphans the ReplicaSets", func() error {
		rss, _, _ := owned(t, ns)
		for _, rs := range rss {
			if metav1.GetControllerOf(&rs) != nil {
				return fmt.Errorf("%s still has its controller", rs.Name)
			}
		}
		return nil
	})

	// Applied again, as v1 (a GitOps tool restoring the object from Git).
	if err := k8s.Create(context.Background(), e2eFixture(ns)); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 30*time.Second, "adopted", func() error {
		rss, _, _ := owned(t, ns)
		rsvc := kit().Get(t, ns)
		for _, rs := range rss {
			if !metav1.IsControlledBy(&rs, rsvc) {
				return fmt.Errorf("%s not adopted", rs.Name)
			}
		}
		return nil
	})
	// The adopted ReplicaSets served schema 1, so it was confirmed; the orphaned Jobs are not
	// evidence, and with no spec.schema.check nothing may confirm it again but a retry, which
	// runs the migration (issue 10, S-23), whose name an orphaned Job holds.
	story.Eventually(t, 30*time.Second, "SchemaEvidenceLost", kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonSchemaEvidenceLost))
	kit().Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Annotations = map[string]string{routingv1alpha1.AnnotationRetry: "after-restore"}
	})
	story.Eventually(t, 30*time.Second, "NameConflict for the orphaned schema-1 Job", kit().HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonNameConflict))
	if kit().HasCondition(t, ns, routingv1alpha1.ConditionSchemaReady, metav1.ConditionTrue, "")() == nil {
		t.Fatal("an orphaned Job opened the gate")
	}
	// Never two sets of pods per shard: the adopted ReplicaSets are the shard's.
	story.Consistently(t, 3*time.Second, "one set of pods per shard", func() error {
		if n := len(pods(t, ns, rollout.ComponentRouting)); n > 3*3+1 {
			return fmt.Errorf("%d routing pods for 3 shards of 3", n)
		}
		return nil
	})

	// The user removes the orphaned Jobs; the migration runs for the new rs-a and v1 serves.
	var jobs batchv1.JobList
	if err := k8s.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs.Items {
		if metav1.GetControllerOf(&j) == nil {
			if err := k8s.Delete(context.Background(), &j, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
				t.Fatal(err)
			}
		}
	}
	kit().WaitReady(t, ns, 2*time.Minute)
	story.Eventually(t, 30*time.Second, "v1 everywhere", kit().ServingIs(t, ns, story.AllV1))

	// The final delete leaves nothing labelled for rs-a.
	deleteRS(t, ns, metav1.DeletePropagationBackground)
	story.Eventually(t, 60*time.Second, "nothing left", func() error {
		rss, jobs, _ := owned(t, ns)
		var list corev1.PodList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{rollout.LabelName: "rs-a"}); err != nil {
			return err
		}
		if len(rss)+len(jobs)+len(list.Items) > 0 {
			return fmt.Errorf("%d ReplicaSets, %d Jobs, %d pods left", len(rss), len(jobs), len(list.Items))
		}
		return nil
	})
}
