package controllers

import (
	"testing"

	"k8s.io/utils/ptr"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// Each shard's sizes and who sets them: a fixed shard's desired size is the spec's, an autoscaled
// one's is its scaler's (held higher while a promotion bakes: applied), with the autoscaler's
// maximum for the at-maximum alert; a deleted RoutingService's series go.
func TestScalingMetrics(t *testing.T) {
	t.Cleanup(func() { forgetMetrics("scaling", "rs-a") })
	rsvc := alertRS()
	rsvc.Namespace = "scaling"
	rsvc.Spec.Shards[0].Replicas = 3
	rsvc.Spec.Shards[0].Autoscaling = &routingv1alpha1.ShardAutoscaling{MinReplicas: ptr.To(int32(2)), MaxReplicas: ptr.To(int32(10))}
	rsvc.Spec.Shards[1].Replicas = 4
	var plan rollout.Plan
	plan.Status.Shards = []routingv1alpha1.ShardStatus{
		{Name: "us-east", Replicas: 7, Available: 6, Scaling: &routingv1alpha1.ShardScalingStatus{RoutingShard: "rs-a-us-east", DesiredReplicas: ptr.To(int32(5)), ScaledBy: "kube-controller-manager", Held: "baking"}},
		{Name: "eu-west", Replicas: 4, Available: 4},
	}
	recordMetrics(rsvc, plan, nil)
	want := `schemagate_shard_autoscaler_max_replicas{name=rs-a,namespace=scaling,shard=us-east} 10
schemagate_shard_replicas{kind=applied,name=rs-a,namespace=scaling,shard=eu-west} 4
schemagate_shard_replicas{kind=applied,name=rs-a,namespace=scaling,shard=us-east} 7
schemagate_shard_replicas{kind=available,name=rs-a,namespace=scaling,shard=eu-west} 4
schemagate_shard_replicas{kind=available,name=rs-a,namespace=scaling,shard=us-east} 6
schemagate_shard_replicas{kind=desired,name=rs-a,namespace=scaling,shard=eu-west} 4
schemagate_shard_replicas{kind=desired,name=rs-a,namespace=scaling,shard=us-east} 5
schemagate_shard_scaled_by{name=rs-a,namespace=scaling,shard=eu-west,source=spec} 1
schemagate_shard_scaled_by{name=rs-a,namespace=scaling,shard=us-east,source=kube-controller-manager} 1`
	if got := seriesIn(t, "scaling", shardReplicas.vec, shardScaledBy.vec, shardMaxReplicas.vec); got != want {
		t.Fatalf("series:\n%s\nwant:\n%s", got, want)
	}
	forgetMetrics("scaling", "rs-a")
	if got := seriesIn(t, "scaling", shardReplicas.vec, shardScaledBy.vec, shardMaxReplicas.vec); got != "" {
		t.Errorf("after the RoutingService is gone:\n%s", got)
	}
}
