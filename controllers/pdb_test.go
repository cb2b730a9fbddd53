package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/test/story"
)

// recorded counts the Events recorded, by reason.
type recorded struct{ reasons []string }

func (r *recorded) Eventf(_ runtime.Object, _ runtime.Object, _, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

func (r *recorded) AnnotatedEventf(_ runtime.Object, _ runtime.Object, _ map[string]string, _, reason, _, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

func (r *recorded) count(reason string) int {
	n := 0
	for _, x := range r.reasons {
		if x == reason {
			n++
		}
	}
	return n
}

func withUID(rsvc client.Object) client.Object {
	rsvc.SetUID(types.UID("uid-rs-a"))
	return rsvc
}

// A shard removed from the spec keeps its budget while its pods still run, and loses it once they
// are gone.
func TestRemovedShardKeepsItsBudgetWhileItsPodsRun(t *testing.T) {
	ctx := context.Background()
	rsvc := story.Fixture("ns")
	withUID(rsvc)
	pdb := rollout.DesiredDisruptionBudgets(rsvc)[2] // ap-south's
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rs-a-ap-south-x-1", Namespace: "ns",
		Labels: map[string]string{rollout.LabelName: "rs-a", rollout.LabelShard: "ap-south", rollout.LabelComponent: rollout.ComponentRouting, rollout.LabelManagedBy: rollout.ManagedByValue}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	rsvc.Spec.Shards = rsvc.Spec.Shards[:2]
	c := indexed(fake.NewClientBuilder().WithScheme(Scheme())).WithObjects(rsvc, pdb, pod).Build()
	r := &RoutingServiceReconciler{Client: c, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	if _, _, err := r.syncDisruptionBudgets(ctx, rsvc, nil, rollout.DesiredDisruptionBudgets(rsvc)); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{}); err != nil {
		t.Fatalf("the removed shard's budget was deleted while its pod runs: %v", err)
	}
	if err := c.Delete(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.syncDisruptionBudgets(ctx, rsvc, nil, rollout.DesiredDisruptionBudgets(rsvc)); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{}); err == nil {
		t.Fatal("the removed shard's budget must go once its pods are gone")
	}
}

// A foreign budget holding a shard's budget name is reported once per holder, not on every
// reconcile.
func TestBudgetConflictEventOncePerHolder(t *testing.T) {
	ctx := context.Background()
	rsvc := story.Fixture("ns")
	withUID(rsvc)
	foreign := rollout.DesiredDisruptionBudgets(rsvc)[0]
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "other", UID: "uid-other", Controller: new(bool)}}
	*foreign.OwnerReferences[0].Controller = true
	c := indexed(fake.NewClientBuilder().WithScheme(Scheme())).WithObjects(rsvc, foreign).Build()
	rec := &recorded{}
	r := &RoutingServiceReconciler{Client: c, Recorder: rec, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	for i := 0; i < 5; i++ {
		if _, _, err := r.syncDisruptionBudgets(ctx, rsvc, nil, rollout.DesiredDisruptionBudgets(rsvc)); err != nil {
			t.Fatal(err)
		}
	}
	if n := rec.count(EventDisruptionBudgetConflict); n != 1 {
		t.Fatalf("%d %s Events over 5 reconciles, want 1 (%s)", n, EventDisruptionBudgetConflict, strings.Join(rec.reasons, ","))
	}
}
