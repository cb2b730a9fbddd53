package rollout

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
)

// The size of an autoscaled shard is its RoutingShard's, bounded; a scale-down is held at the size
// the promotion started with (recorded on the update revision's ReplicaSet) while the shard
// promotes, and only then; a shard without autoscaling keeps spec.shards[].replicas.
func TestShardSizes(t *testing.T) {
	rsvc := fixture()
	rsvc.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{MaxReplicas: ptr.To(int32(20))}
	update := Revision(&rsvc.Spec)
	promoting := func(step routingv1alpha1.ShardStep) []routingv1alpha1.ShardStatus {
		return []routingv1alpha1.ShardStatus{{Name: "us-east", Step: step, StepRevision: update}}
	}
	updateRS := func(annotation string) []*appsv1.ReplicaSet {
		rs := NewReplicaSet(rsvc, rsvc.Spec.Shards[0], update, 3)
		rs.Annotations[AnnotationPromotionReplicas] = annotation
		return []*appsv1.ReplicaSet{rs}
	}
	for _, tc := range []struct {
		name   string
		scale  *ShardScale
		status []routingv1alpha1.ShardStatus
		rss    []*appsv1.ReplicaSet
		want   int32
		held   bool
	}{
		{name: "no RoutingShard yet", want: 3},
		{name: "no size in it", scale: &ShardScale{}, want: 3},
		{name: "scaled up", scale: &ShardScale{Replicas: ptr.To(int32(7))}, want: 7},
		{name: "negative", scale: &ShardScale{Replicas: ptr.To(int32(-4))}, want: 0},
		{name: "beyond bounds", scale: &ShardScale{Replicas: ptr.To(int32(1 << 30))}, want: maxShardReplicas},
		{name: "scale-down held while baking", scale: &ShardScale{Replicas: ptr.To(int32(2))}, status: promoting(routingv1alpha1.ShardStepBaking), rss: updateRS("7"), want: 7, held: true},
		{name: "scale-down held while progressing", scale: &ShardScale{Replicas: ptr.To(int32(2))}, status: promoting(routingv1alpha1.ShardStepProgressing), rss: updateRS("7"), want: 7, held: true},
		{name: "scale-up while promoting", scale: &ShardScale{Replicas: ptr.To(int32(9))}, status: promoting(routingv1alpha1.ShardStepBaking), rss: updateRS("7"), want: 9},
		{name: "promoted: no hold", scale: &ShardScale{Replicas: ptr.To(int32(2))}, status: promoting(routingv1alpha1.ShardStepPromoted), rss: updateRS("7"), want: 2},
		{name: "a record that does not parse holds nothing", scale: &ShardScale{Replicas: ptr.To(int32(2))}, status: promoting(routingv1alpha1.ShardStepBaking), rss: updateRS("lots"), want: 2},
		{name: "a record out of bounds holds nothing", scale: &ShardScale{Replicas: ptr.To(int32(2))}, status: promoting(routingv1alpha1.ShardStepBaking), rss: updateRS("99999999"), want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rsvc.DeepCopy()
			r.Status.Shards = tc.status
			o := Observed{RoutingService: r, ReplicaSets: tc.rss}
			if tc.scale != nil {
				o.ShardScales = map[string]ShardScale{"us-east": *tc.scale}
			}
			sized, scaling := shardSizes(o, update)
			if got := sized.Spec.Shards[0].Replicas; got != tc.want {
				t.Errorf("us-east: %d, want %d", got, tc.want)
			}
			if r.Spec.Shards[0].Replicas != 3 {
				t.Errorf("the observed RoutingService was changed")
			}
			if sized.Spec.Shards[1].Replicas != 3 || scaling["eu-west"] != nil {
				t.Errorf("eu-west, not autoscaled: %d, scaling %+v", sized.Spec.Shards[1].Replicas, scaling["eu-west"])
			}
			if st := scaling["us-east"]; st == nil || st.RoutingShard != "rs-a-us-east" || (st.Held != "") != tc.held {
				t.Errorf("scaling %+v, held %v", st, tc.held)
			}
		})
	}
}

// In the simulated cluster: an autoscaler's size reaches the shard's ReplicaSet and no other; a
// promotion creates the new revision's ReplicaSet for the autoscaled size, records it, and ends
// with every shard at its size.
func TestAutoscaledShardInThePlanner(t *testing.T) {
	w := newWorld(t)
	w.rsvc.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{MaxReplicas: ptr.To(int32(10))}
	w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	w.scales = map[string]ShardScale{"us-east": {Replicas: ptr.To(int32(6)), ScaledBy: "kube-controller-manager"}}
	w.run(30, func() bool { return w.shardImages() == "us-east=app:v1:6 eu-west=app:v1:3 ap-south=app:v1:3" })
	if st := w.rsvc.Status.Shards[0]; st.Replicas != 6 || st.Scaling == nil || st.Scaling.ScaledBy != "kube-controller-manager" {
		t.Fatalf("status.shards[us-east]: %+v", st)
	}
	if !w.isTrue(routingv1alpha1.ConditionReady) {
		t.Fatalf("a scale change made the RoutingService not Ready: %+v", w.condition(routingv1alpha1.ConditionReady))
	}
	w.update("app:v2", "1", "migrate:ok")
	w.run(200, func() bool {
		return w.isTrue(routingv1alpha1.ConditionReady) && w.shardImages() == "us-east=app:v2:6 eu-west=app:v2:3 ap-south=app:v2:3"
	})
	for _, rs := range w.rss {
		if rs.Labels[LabelShard] == "us-east" && strings.Contains(rs.Spec.Template.Spec.Containers[0].Image, "v2") && rs.Annotations[AnnotationPromotionReplicas] != "6" {
			t.Errorf("%s records %q as the promotion's size, want 6", rs.Name, rs.Annotations[AnnotationPromotionReplicas])
		}
		if rs.Labels[LabelShard] != "us-east" && rs.Annotations[AnnotationPromotionReplicas] != "" {
			t.Errorf("%s is not autoscaled but records a promotion size", rs.Name)
		}
	}
	shards := DesiredRoutingShards(w.rsvc, &w.rsvc.Status, w.observed().ReplicaSets)
	if len(shards) != 1 || shards[0].Status.Revision != Revision(&w.rsvc.Spec) || shards[0].Status.Replicas != 6 || ptr.Deref(shards[0].Spec.Replicas, 0) != 3 {
		t.Fatalf("RoutingShards %+v", shards)
	}
	sel, err := metav1.ParseToLabelSelector(shards[0].Status.Selector)
	if err != nil || sel.MatchLabels[LabelRevision] != Revision(&w.rsvc.Spec) || sel.MatchLabels[LabelShard] != "us-east" {
		t.Fatalf("selector %q: %v", shards[0].Status.Selector, err)
	}
}

// Whatever a RoutingShard or a ReplicaSet's record says, the planner neither panics nor sizes a
// shard outside 0..10000.
func FuzzShardSizes(f *testing.F) {
	f.Add(int32(7), "7", true)
	f.Add(int32(-1), "-3", false)
	f.Add(int32(1<<31-1), "+12", true)
	f.Fuzz(func(t *testing.T, scaled int32, record string, baking bool) {
		rsvc := fixture()
		rsvc.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{Scaler: routingv1alpha1.ShardScalerExternal}
		update := Revision(&rsvc.Spec)
		if baking {
			rsvc.Status.Shards = []routingv1alpha1.ShardStatus{{Name: "us-east", Step: routingv1alpha1.ShardStepBaking, StepRevision: update}}
		}
		rs := NewReplicaSet(rsvc, rsvc.Spec.Shards[0], update, 3)
		rs.Annotations[AnnotationPromotionReplicas] = record
		sized, _ := shardSizes(Observed{RoutingService: rsvc, ReplicaSets: []*appsv1.ReplicaSet{rs}, ShardScales: map[string]ShardScale{"us-east": {Replicas: &scaled}}}, update)
		if n := sized.Spec.Shards[0].Replicas; n < 0 || n > maxShardReplicas {
			t.Fatalf("size %d", n)
		}
	})
}

// A shard's ReplicaSet scaled by someone else through /scale is set back, and the Event names the
// writer; one scaled by schemagate itself (no /scale entry) is not reported.
func TestForeignScaleIsNamed(t *testing.T) {
	w := newWorld(t)
	w.run(60, func() bool { return w.isTrue(routingv1alpha1.ConditionReady) })
	var target *appsv1.ReplicaSet
	for _, rs := range w.rss {
		if rs.Labels[LabelShard] == "eu-west" {
			target = rs
		}
	}
	target.Spec.Replicas = ptr.To(int32(6))
	target.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "manager", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)},
		{Manager: "test-hpa", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "scale", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:replicas":{}}}`)},
	}
	plan := w.reconcile()
	named := false
	for _, e := range plan.Events {
		if e.Reason == EventReplicasOverwritten && e.Warning && strings.Contains(e.Message, "by test-hpa") && strings.Contains(e.Message, target.Name) {
			named = true
		}
	}
	if !named {
		t.Errorf("no %s Event naming test-hpa: %+v", EventReplicasOverwritten, plan.Events)
	}
	if *target.Spec.Replicas != 3 {
		t.Errorf("eu-west's ReplicaSet at %d, want set back to 3", *target.Spec.Replicas)
	}
	target.Spec.Replicas = ptr.To(int32(5))
	target.ManagedFields = nil
	for _, e := range w.reconcile().Events {
		if e.Reason == EventReplicasOverwritten {
			t.Errorf("reported without a /scale writer: %s", e.Message)
		}
	}
}
