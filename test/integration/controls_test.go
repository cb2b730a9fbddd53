package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/test/story"
)

// Controls survive a lost status: an abort is handled (us-east, baking v2, rolls back), a fixed
// v3 is rolled out and becomes Ready, and then the status is lost — wiped, or the RoutingService
// deleted with --cascade=orphan and re-created from the object as `kubectl get -o yaml` saved it,
// annotations included. The old abort value is recorded on the ReplicaSets: it does not act
// again, nothing rolls back, and the control's AbortIgnored Event says why.
func TestStoryControlsSurviveALostStatus(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"status wiped", "orphan delete and re-create"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			ns := steadyV1(t)
			kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				story.ToV2("app:v2", "migrate:ok")(r)
				r.Spec.Strategy.BakeSeconds = ptr.To(int32(300))
			})
			story.Eventually(t, 60*time.Second, "us-east bakes v2", func() error {
				for _, ss := range kit.Get(t, ns).Status.Shards {
					if ss.Name == "us-east" && ss.Step == routingv1alpha1.ShardStepBaking {
						return nil
					}
				}
				return fmt.Errorf("shards %+v", kit.Get(t, ns).Status.Shards)
			})
			kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				r.Annotations = map[string]string{routingv1alpha1.AnnotationAbort: "20261130T120000Z-abcde"}
			})
			story.Eventually(t, 30*time.Second, "aborted and rolled back", func() error {
				if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonAborted)(); err != nil {
					return err
				}
				return kit.ServingIs(t, ns, story.AllV1)()
			})
			kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
				r.Spec.Template.Spec.Containers[0].Image = "app:v3"
				r.Spec.Strategy.BakeSeconds = ptr.To(int32(1))
			})
			kit.WaitReady(t, ns, 60*time.Second)
			const v3 = "us-east=app:v3:3/3 eu-west=app:v3:3/3 ap-south=app:v3:3/3"
			story.Eventually(t, 10*time.Second, "v3 everywhere", kit.ServingIs(t, ns, v3))
			story.Eventually(t, 10*time.Second, "the abort recorded on every ReplicaSet", func() error {
				for _, rs := range kit.ReplicaSets(t, ns) {
					if got := rs.Annotations["schemagate.io/handled-abort"]; got != "20261130T120000Z-abcde" {
						return fmt.Errorf("%s records %q", rs.Name, got)
					}
				}
				return nil
			})
			aborted := count(kit.EventsFor(t, ns), routingv1alpha1.ReasonAborted)

			switch how {
			case "status wiped":
				rsvc := kit.Get(t, ns)
				rsvc.Status = routingv1alpha1.RoutingServiceStatus{}
				if err := k8s.Status().Update(ctx, rsvc); err != nil {
					t.Fatal(err)
				}
				// A status write is no reconcile trigger (a restore's create is): touch an
				// unrelated annotation so the manager reads the object as restored.
				kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) { r.Annotations["example.com/restored"] = "yes" })
			default:
				saved := kit.Get(t, ns)
				if err := k8s.Delete(ctx, saved, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
					t.Fatal(err)
				}
				orphanDependents(t, ns, saved.UID)
				story.Eventually(t, 20*time.Second, "rs-a gone", func() error {
					if err := k8s.Get(ctx, kitKey(ns), saved.DeepCopy()); err == nil {
						return fmt.Errorf("still there")
					}
					return nil
				})
				again := saved.DeepCopy()
				again.ResourceVersion, again.UID, again.CreationTimestamp, again.Generation = "", "", metav1.Time{}, 0
				again.DeletionTimestamp, again.DeletionGracePeriodSeconds, again.Finalizers, again.ManagedFields = nil, nil, nil, nil
				again.Status = routingv1alpha1.RoutingServiceStatus{}
				if err := k8s.Create(ctx, again); err != nil {
					t.Fatal(err)
				}
			}
			story.Consistently(t, 5*time.Second, "nothing rolls back", func() error {
				if got := kit.Serving(t, ns); got != v3 {
					return fmt.Errorf("serving %q, want %q", got, v3)
				}
				if f := kit.Get(t, ns).Status.Failure; f != nil {
					return fmt.Errorf("status.failure %+v", f)
				}
				return nil
			})
			story.Eventually(t, 20*time.Second, "AbortIgnored", func() error {
				if events := kit.EventsFor(t, ns); !slices.Contains(events, "AbortIgnored") {
					return fmt.Errorf("events %v", events)
				}
				return nil
			})
			if n := count(kit.EventsFor(t, ns), routingv1alpha1.ReasonAborted); n != aborted {
				t.Fatalf("the old abort acted again: %d Aborted Events, %d before; %s", n, aborted, strings.Join(kit.EventsFor(t, ns), ","))
			}
			if how == "status wiped" {
				kit.WaitReady(t, ns, 30*time.Second)
			}
		})
	}
}

func count(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// orphanDependents does what the garbage collector does for a delete with propagation Orphan
// (envtest runs none): it removes the owner's references from its ReplicaSets, Jobs and
// PodDisruptionBudgets, then the orphan finalizer from the owner.
func orphanDependents(t *testing.T, ns string, owner types.UID) {
	t.Helper()
	ctx := context.Background()
	strip := func(obj client.Object) {
		var kept []metav1.OwnerReference
		for _, ref := range obj.GetOwnerReferences() {
			if ref.UID != owner {
				kept = append(kept, ref)
			}
		}
		if len(kept) == len(obj.GetOwnerReferences()) {
			return
		}
		obj.SetOwnerReferences(kept)
		if err := k8s.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rss appsv1.ReplicaSetList
		var jobs batchv1.JobList
		var pdbs policyv1.PodDisruptionBudgetList
		for _, l := range []client.ObjectList{&rss, &jobs, &pdbs} {
			if err := k8s.List(ctx, l, client.InNamespace(ns)); err != nil {
				return err
			}
		}
		for i := range rss.Items {
			strip(&rss.Items[i])
		}
		for i := range jobs.Items {
			strip(&jobs.Items[i])
		}
		for i := range pdbs.Items {
			strip(&pdbs.Items[i])
		}
		rsvc := &routingv1alpha1.RoutingService{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rs-a"}, rsvc); err != nil {
			return client.IgnoreNotFound(err)
		}
		rsvc.Finalizers = slices.DeleteFunc(rsvc.Finalizers, func(f string) bool { return f == metav1.FinalizerOrphanDependents })
		return k8s.Update(ctx, rsvc)
	})
	if err != nil {
		t.Fatal(err)
	}
}
