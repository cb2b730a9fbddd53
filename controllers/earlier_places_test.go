package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// The RoutingService's own cluster as a shard's earlier place: only the shards that now name a
// cluster, only the ReplicaSets it controls, and their routing pods by revision.
func TestHubEarlierPlaces(t *testing.T) {
	rsvc := &routingv1alpha1.RoutingService{ObjectMeta: metav1.ObjectMeta{Name: "rs-a", Namespace: "default", UID: "uid-a"}}
	rsvc.Spec.Shards = []routingv1alpha1.ShardSpec{{Name: "us-east"}, {Name: "eu-west", Cluster: &routingv1alpha1.ShardCluster{Name: "eu"}}}
	rs := func(name, shard string, controlled bool) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{rollout.LabelShard: shard}}}
		if controlled {
			r.OwnerReferences = []metav1.OwnerReference{rollout.ControllerRef(rsvc)}
		}
		return r
	}
	pod := func(shard, component, rev string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{rollout.LabelShard: shard, rollout.LabelComponent: component, rollout.LabelRevision: rev}}}
	}
	o := &rollout.Observed{
		ReplicaSets: []*appsv1.ReplicaSet{rs("eu-v1", "eu-west", true), rs("eu-foreign", "eu-west", false), rs("us-v1", "us-east", true)},
		Pods: []*corev1.Pod{pod("eu-west", rollout.ComponentRouting, "v1"), pod("eu-west", rollout.ComponentRouting, "v1"),
			pod("eu-west", rollout.ComponentShardCheck, "v1"), pod("us-east", rollout.ComponentRouting, "v1")},
	}
	got := hubEarlierPlaces(rsvc, o, map[string]bool{"eu-west": true})
	if len(got) != 1 {
		t.Fatalf("%d places, want 1: %+v", len(got), got)
	}
	e := got[0]
	if e.Shard != "eu-west" || e.Cluster.Name != "" || e.Cluster.State != routingv1alpha1.ClusterReachable {
		t.Fatalf("place %+v", e)
	}
	if len(e.ReplicaSets) != 1 || e.ReplicaSets[0].Name != "eu-v1" {
		t.Fatalf("ReplicaSets %v, want eu-v1 only", e.ReplicaSets)
	}
	if len(e.RoutingPods) != 1 || e.RoutingPods["v1"] != 2 {
		t.Fatalf("routing pods %v, want v1: 2", e.RoutingPods)
	}
	if none := hubEarlierPlaces(rsvc, &rollout.Observed{ReplicaSets: o.ReplicaSets[2:]}, map[string]bool{"eu-west": true}); len(none) != 0 {
		t.Fatalf("places %+v with nothing of eu-west left", none)
	}
}
