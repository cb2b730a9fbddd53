package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// orphan does to every object of ns owned by uid what the garbage collector does for a delete
// with --cascade=orphan (envtest runs no garbage collector): it removes the owner references to
// uid.
func orphan(t *testing.T, ns string, uid string) {
	t.Helper()
	ctx := context.Background()
	var objs []client.Object
	for _, rs := range kit.ReplicaSets(t, ns) {
		objs = append(objs, rs.DeepCopy())
	}
	for _, j := range kit.Jobs(t, ns) {
		objs = append(objs, j.DeepCopy())
	}
	for _, p := range budgets(t, ns) {
		objs = append(objs, p.DeepCopy())
	}
	for _, cr := range records(t, ns) {
		objs = append(objs, cr.DeepCopy())
	}
	for _, o := range objs {
		var kept []metav1.OwnerReference
		for _, ref := range o.GetOwnerReferences() {
			if string(ref.UID) != uid {
				kept = append(kept, ref)
			}
		}
		patch := client.MergeFrom(o.DeepCopyObject().(client.Object))
		o.SetOwnerReferences(kept)
		if err := k8s.Patch(ctx, o, patch); err != nil {
			t.Fatalf("orphaning %s: %v", o.GetName(), err)
		}
	}
}

// Item: orphans leak. rs-a is deleted with its dependents orphaned and applied again: every
// ReplicaSet, Job and PodDisruptionBudget that is provably its own is adopted, so that it goes
// with the new object (the garbage collector follows owner references; envtest runs none, so the
// references are what is checked): ReplicaSets and budgets with a controller reference, Jobs with
// an owner reference that is not one (history, never evidence). The shards are never left without
// a budget of their own, and after an update the new Job and ReplicaSets are owned as usual.
func TestOrphansAreAdoptedAndGoWithTheRoutingService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := steadyV1(t)
	story.Eventually(t, 10*time.Second, "one budget per shard", budgetsAre(t, ns,
		map[string]string{"rs-a-us-east": "1", "rs-a-eu-west": "1", "rs-a-ap-south": "1"}))
	old := kit.Get(t, ns)
	if err := k8s.Delete(ctx, old); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 10*time.Second, "rs-a is gone", func() error {
		err := k8s.Get(ctx, client.ObjectKeyFromObject(old), &routingv1alpha1.RoutingService{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	orphan(t, ns, string(old.UID))

	if err := k8s.Create(ctx, story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	owned := func() error {
		rsvc := kit.Get(t, ns)
		for _, rs := range kit.ReplicaSets(t, ns) {
			if !metav1.IsControlledBy(&rs, rsvc) {
				return fmt.Errorf("ReplicaSet %s: owners %v", rs.Name, rs.OwnerReferences)
			}
		}
		for _, j := range kit.Jobs(t, ns) {
			if !ownedBy(j.OwnerReferences, rsvc) {
				return fmt.Errorf("Job %s: owners %v", j.Name, j.OwnerReferences)
			}
		}
		for _, cr := range records(t, ns) {
			if !metav1.IsControlledBy(&cr, rsvc) {
				return fmt.Errorf("revision record %s: owners %v", cr.Name, cr.OwnerReferences)
			}
		}
		pdbs := budgets(t, ns)
		if len(pdbs) != 3 {
			return fmt.Errorf("%d budgets, want 3", len(pdbs))
		}
		for _, p := range pdbs {
			if !metav1.IsControlledBy(&p, rsvc) {
				return fmt.Errorf("budget %s: owners %v", p.Name, p.OwnerReferences)
			}
		}
		return nil
	}
	story.Eventually(t, 20*time.Second, "every orphan adopted", owned)
	rsvc := kit.Get(t, ns)
	for _, j := range kit.Jobs(t, ns) {
		if metav1.IsControlledBy(&j, rsvc) {
			t.Errorf("the earlier migration Job %s must be history, not controlled (never evidence): %v", j.Name, j.OwnerReferences)
		}
	}

	kit.Update(t, ns, story.ToV2("app:v2", "migrate:ok"))
	kit.WaitReady(t, ns, 90*time.Second)
	story.Eventually(t, 20*time.Second, "everything still owned after the update", owned)
}

// records lists the namespace's ControllerRevisions (schemagate's revision records).
func records(t *testing.T, ns string) []appsv1.ControllerRevision {
	t.Helper()
	var list appsv1.ControllerRevisionList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// ownedBy reports whether refs has a reference, controller or not, to rsvc.
func ownedBy(refs []metav1.OwnerReference, rsvc *routingv1alpha1.RoutingService) bool {
	for _, ref := range refs {
		if ref.UID == rsvc.UID {
			return true
		}
	}
	return false
}

// A plain ReplicaSet (no labels, so in no cache of schemagate's) holds the name of us-east's
// ReplicaSet for v2: the create fails with AlreadyExists, a read past the cache finds the holder,
// and the rollout stalls with NameConflict naming it, touching nothing, until it is deleted.
func TestNameTakenByAPlainReplicaSet(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := steadyV1(t)
	next := kit.Get(t, ns)
	toV2 := func(r *routingv1alpha1.RoutingService) {
		story.ToV2("app:v2", "migrate:ok")(r)
		r.Spec.Strategy.ProgressDeadlineSeconds = ptr.To(int32(120))
	}
	toV2(next)
	name := rollout.ReplicaSetName("rs-a", "us-east", rollout.Revision(&next.Spec))
	plain := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(int32(0)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"plain": "1"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"plain": "1"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}},
	}
	if err := k8s.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	// A progress deadline longer than the wait for the conflict to show: the shard's step has
	// started, and a deadline that ran out first would fail the revision instead (deadlines run
	// while a name is held).
	kit.Update(t, ns, toV2)
	story.Eventually(t, 30*time.Second, "Stalled=True NameConflict naming the ReplicaSet",
		stalledQuoting(t, ns, routingv1alpha1.ReasonNameConflict, name))
	if got := kit.Serving(t, ns); got != story.AllV1 {
		t.Fatalf("nothing serving may change: %s", got)
	}
	if err := k8s.Delete(ctx, plain); err != nil {
		t.Fatal(err)
	}
	kit.WaitReady(t, ns, 90*time.Second)
}
