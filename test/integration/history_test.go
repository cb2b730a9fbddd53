package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// plantReplicaSet creates, in ns's us-east, a ReplicaSet with schemagate's labels for rs-a and
// revision rev, no controller and no replicas, requiring schema 1, running app:evil, with
// served-order order: what someone who may create ReplicaSets, but not edit the RoutingService,
// can do.
func plantReplicaSet(t *testing.T, ns, rev string, order int64) string {
	t.Helper()
	rsvc := story.Fixture(ns)
	planted := rollout.NewReplicaSet(rsvc, rsvc.Spec.Shards[0], rev, 0)
	planted.OwnerReferences = nil
	planted.Spec.Template.Spec.Containers[0].Image = "app:evil"
	rollout.SetServedOrder(planted, order)
	if err := k8s.Create(context.Background(), planted); err != nil {
		t.Fatal(err)
	}
	return planted.Name
}

// recordNames lists the revision records of ns that rs-a controls, sorted.
func recordNames(t *testing.T, ns string) []string {
	t.Helper()
	rsvc := kit.Get(t, ns)
	var out []string
	for _, cr := range records(t, ns) {
		if metav1.IsControlledBy(&cr, rsvc) && cr.DeletionTimestamp == nil {
			out = append(out, cr.Name)
		}
	}
	slices.Sort(out)
	return out
}

func recordsAre(t *testing.T, ns string, want ...string) func() error {
	slices.Sort(want)
	return func() error {
		if got := recordNames(t, ns); !slices.Equal(got, want) {
			return fmt.Errorf("revision records %v, want %v", got, want)
		}
		return nil
	}
}

// Item: an adopted orphan ReplicaSet is trusted only with a verified revision record. rs-a is
// deleted with its dependents orphaned, a ReplicaSet is planted with its labels, and rs-a is
// applied again: every ReplicaSet is adopted, but a v2 that fails in us-east rolls us-east back to
// v1 (whose record, orphaned and adopted with it, vouches for its template), never to a planted
// ReplicaSet, even one planted mid-rollout with the highest served-order. Records follow the
// ReplicaSets: a revision whose last ReplicaSet is deleted (revisionHistoryLimit 0) loses its
// record.
func TestPlantedReplicaSetIsNeverScaledUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := steadyV1(t)
	old := kit.Get(t, ns)
	v1 := rollout.RevisionRecordName("rs-a", old.Status.UpdateRevision)
	story.Eventually(t, 10*time.Second, "v1's record", recordsAre(t, ns, v1))

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
	before := plantReplicaSet(t, ns, "planted01", 999)
	if err := k8s.Create(ctx, story.Fixture(ns)); err != nil {
		t.Fatal(err)
	}
	story.Eventually(t, 20*time.Second, "v1's record adopted", recordsAre(t, ns, v1))

	kit.Update(t, ns, story.ToV2("app:broken", "migrate:ok"))
	story.Eventually(t, 30*time.Second, "v2 rolling in us-east", func() error {
		for _, rs := range kit.ReplicaSets(t, ns) {
			if rs.Spec.Template.Spec.Containers[0].Image == "app:broken" && ptr.Deref(rs.Spec.Replicas, 0) > 0 {
				return nil
			}
		}
		return fmt.Errorf("serving %s", kit.Serving(t, ns))
	})
	// Above v1's, which schemagate raised over the first planted one's when v1 last served us-east
	// alone: the one a rollback would pick if labels were enough.
	during := plantReplicaSet(t, ns, "planted02", 1_000_000)
	neverScaled := func() error {
		for _, rs := range kit.ReplicaSets(t, ns) {
			if (rs.Name == before || rs.Name == during) && ptr.Deref(rs.Spec.Replicas, 0) != 0 {
				return fmt.Errorf("planted ReplicaSet %s scaled to %d", rs.Name, *rs.Spec.Replicas)
			}
		}
		return nil
	}
	story.Eventually(t, 30*time.Second, "Stalled=True ProgressDeadlineExceeded, us-east back on v1", func() error {
		if err := neverScaled(); err != nil {
			t.Fatal(err)
		}
		if err := kit.HasCondition(t, ns, routingv1alpha1.ConditionStalled, metav1.ConditionTrue, routingv1alpha1.ReasonProgressDeadlineExceeded)(); err != nil {
			return err
		}
		return kit.ServingIs(t, ns, story.AllV1)()
	})
	story.Consistently(t, 3*time.Second, "the planted ReplicaSets stay at 0", neverScaled)
	rsvc := kit.Get(t, ns)
	for _, rs := range kit.ReplicaSets(t, ns) {
		if !metav1.IsControlledBy(&rs, rsvc) {
			t.Errorf("ReplicaSet %s is not adopted: %v", rs.Name, rs.OwnerReferences)
		}
	}

	kit.Update(t, ns, func(r *routingv1alpha1.RoutingService) {
		r.Spec.Template.Spec.Containers[0].Image = "app:v3"
		r.Spec.Strategy.RevisionHistoryLimit = ptr.To(int32(0))
	})
	kit.WaitReady(t, ns, 60*time.Second)
	v3 := rollout.RevisionRecordName("rs-a", kit.Get(t, ns).Status.UpdateRevision)
	// v1 is kept (it served last before v3), v2 goes with its ReplicaSet; the planted ones are
	// never deleted by schemagate, nor scaled.
	story.Eventually(t, 20*time.Second, "v2's record pruned with its ReplicaSet", recordsAre(t, ns, v1, v3))
	for _, rs := range kit.ReplicaSets(t, ns) {
		if rs.Spec.Template.Spec.Containers[0].Image == "app:broken" {
			t.Fatalf("v2's ReplicaSet %s is still there", rs.Name)
		}
	}
	if err := neverScaled(); err != nil {
		t.Fatal(err)
	}
}
