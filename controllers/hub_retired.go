package controllers

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// EventShardMovedOut is the Event of a hub ReplicaSet deleted because its shard now runs in
// another cluster (retireMovedShards).
const EventShardMovedOut = "ShardMovedOut"

// retireMovedShards deletes the ReplicaSets left in the hub by shards that have since been given
// a cluster (spec.shards[].cluster): the planner no longer sees them (observeSpokes leaves them
// out), so without this they would serve, unmanaged, until the RoutingService is deleted.
//
// The rule is the one for a shard moved between spokes (retireSpokes): only once the whole
// RoutingService is Ready for the current generation, and has been for retireSettle (so every
// moved shard is fully available, on the update revision, in its cluster), and only the
// ReplicaSets this RoutingService controls, each deleted with its UID and resourceVersion as
// preconditions (background propagation: the ReplicaSet goes now, its pods after). The shard's
// budget in the hub then goes once its pods have (syncDisruptionBudgets). A failed delete is
// logged and tried again on the next reconcile; it never fails this one.
func (r *RoutingServiceReconciler) retireMovedShards(ctx context.Context, rsvc *routingv1alpha1.RoutingService, stored, status *routingv1alpha1.RoutingServiceStatus) {
	moved := map[string]bool{}
	for _, s := range rsvc.Spec.Shards {
		if s.Cluster != nil {
			moved[s.Name] = true
		}
	}
	if len(moved) == 0 || !settledReady(rsvc, stored, r.Clock.Now()) || !meta.IsStatusConditionTrue(status.Conditions, routingv1alpha1.ConditionReady) {
		return
	}
	log := logf.FromContext(ctx)
	var sets appsv1.ReplicaSetList
	if err := r.List(ctx, &sets, ownedBy(rsvc.Namespace, rsvc.Name, nil)...); err != nil {
		log.Info("listing the hub's ReplicaSets of moved shards failed; tried again later", "error", err.Error())
		return
	}
	for i := range sets.Items {
		rs := &sets.Items[i]
		shard := rs.Labels[rollout.LabelShard]
		if !moved[shard] || !metav1.IsControlledBy(rs, rsvc) || rs.DeletionTimestamp != nil {
			continue
		}
		err := r.Delete(ctx, rs, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &rs.UID, ResourceVersion: &rs.ResourceVersion})
		if client.IgnoreNotFound(err) != nil {
			log.Info("deleting a moved shard's ReplicaSet in the hub failed; tried again later", "replicaSet", rs.Name, "error", err.Error())
			continue
		}
		log.Info("deleted the hub's ReplicaSet of a shard that runs in another cluster", "shard", shard, "replicaSet", rs.Name)
		if r.Recorder != nil && err == nil {
			r.recordFact(rsvc, corev1.EventTypeNormal, EventShardMovedOut,
				"shard %s runs in cluster %s and is Ready there: deleted its ReplicaSet %s in this cluster", shard, clusterOf(rsvc, shard), rs.Name)
		}
	}
}

// clusterOf is the cluster name shard names in rsvc's spec ("" when none).
func clusterOf(rsvc *routingv1alpha1.RoutingService, shard string) string {
	for _, s := range rsvc.Spec.Shards {
		if s.Name == shard && s.Cluster != nil {
			return s.Cluster.Name
		}
	}
	return ""
}
