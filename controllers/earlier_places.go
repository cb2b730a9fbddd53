package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// The places a shard ran in before (rollout.EarlierPlace): what still runs there serves until it
// is retired (retireSpokes, retireMovedShards), and the planner's contract waits for it. They
// are read here, each reconcile, from the clusters themselves: the RoutingService's own cluster
// for a shard since moved to another, and each place schemagate.io/clusters-used records that
// the spec no longer names.

// hubEarlierPlaces are the places in the RoutingService's own cluster of the shards that now
// name a cluster: their ReplicaSets this RoutingService controls, and their routing pods, from o
// as observed (before observeSpokes leaves them out).
func hubEarlierPlaces(rsvc *routingv1alpha1.RoutingService, o *rollout.Observed, moved map[string]bool) []rollout.EarlierPlace {
	byShard := map[string]*rollout.EarlierPlace{}
	place := func(shard string) *rollout.EarlierPlace {
		if byShard[shard] == nil {
			byShard[shard] = &rollout.EarlierPlace{Shard: shard, Cluster: rollout.ClusterView{State: routingv1alpha1.ClusterReachable}}
		}
		return byShard[shard]
	}
	for _, rs := range o.ReplicaSets {
		if shard := rs.Labels[rollout.LabelShard]; moved[shard] && metav1.IsControlledBy(rs, rsvc) {
			e := place(shard)
			e.ReplicaSets = append(e.ReplicaSets, rs)
		}
	}
	for _, pod := range o.Pods {
		if shard := pod.Labels[rollout.LabelShard]; moved[shard] && pod.Labels[rollout.LabelComponent] == rollout.ComponentRouting {
			countPod(place(shard), pod)
		}
	}
	var out []rollout.EarlierPlace
	for _, s := range rsvc.Spec.Shards {
		if e := byShard[s.Name]; e != nil {
			out = append(out, *e)
		}
	}
	return out
}

func countPod(e *rollout.EarlierPlace, pod *corev1.Pod) {
	if e.RoutingPods == nil {
		e.RoutingPods = map[string]int32{}
	}
	e.RoutingPods[pod.Labels[rollout.LabelRevision]]++
}

// observeRetiredPlaces adds to o.EarlierPlaces each place of schemagate.io/clusters-used that
// the spec no longer names, as its cluster answers: not Reachable (then nothing of it can be
// counted), or its ReplicaSets and routing pods of the shard under this RoutingService's anchor
// there. A place with no anchor, or another's anchor, or the anchor a current shard of the same
// name uses (its live place, named another way), has nothing of this shard's to wait for.
//
// The contract and the expand gate both wait for them (rollout's earlierPlaceWait, servingSet).
func (r *RoutingServiceReconciler) observeRetiredPlaces(ctx context.Context, rsvc *routingv1alpha1.RoutingService, o *rollout.Observed, spokes map[string]*spokeShard) {
	retired := retiredClusters(rsvc)
	if len(retired) == 0 {
		return
	}
	live := map[string]bool{} // anchor UID + shard of the current shards
	for shard, sh := range spokes {
		if sh.anchor != nil { // none yet: the plan's Places create it
			live[string(sh.anchor.UID)+"/"+shard] = true
		}
	}
	for _, u := range retired {
		e := rollout.EarlierPlace{Shard: u.Shard, Cluster: rollout.ClusterView{Name: u.Cluster.Name, State: routingv1alpha1.ClusterConnecting}}
		if r.Spokes == nil {
			e.Cluster.Message = errNoSpokes.Error()
			o.EarlierPlaces = append(o.EarlierPlaces, e)
			continue
		}
		view, conn := r.Spokes.view(ctx, rsvc, &u.Cluster)
		e.Cluster = view
		if conn == nil {
			o.EarlierPlaces = append(o.EarlierPlaces, e)
			continue
		}
		if !r.readRetiredPlace(ctx, rsvc, conn, &e, live) {
			continue
		}
		o.EarlierPlaces = append(o.EarlierPlaces, e)
	}
}

// readRetiredPlace fills e from conn's cache; false when nothing there is this shard's.
func (r *RoutingServiceReconciler) readRetiredPlace(ctx context.Context, rsvc *routingv1alpha1.RoutingService, conn *spokeConn, e *rollout.EarlierPlace, live map[string]bool) bool {
	anchor := &corev1.ConfigMap{}
	key := client.ObjectKey{Namespace: conn.namespace, Name: spoke.AnchorName(rsvc.Name)}
	err := conn.cache.Get(ctx, key, anchor)
	if apierrors.IsNotFound(err) {
		// Not in the cache is not proof of nothing there: ask directly.
		err = conn.client.Get(ctx, key, anchor)
	}
	a := spoke.ReadAnchor(anchor)
	switch {
	case apierrors.IsNotFound(err):
		return false
	case err != nil:
		e.Cluster.State, e.Cluster.Message = routingv1alpha1.ClusterUnreachable, fmt.Sprintf("reading its anchor: %v", err)
		return true
	case a.Owner(rsvc, r.Spokes.Hub) != "" || (a.UID != "" && a.UID != rsvc.UID) || live[string(anchor.UID)+"/"+e.Shard]:
		return false
	}
	sel := ownedBy(conn.namespace, rsvc.Name, map[string]string{rollout.LabelShard: e.Shard})
	var sets appsv1.ReplicaSetList
	var pods corev1.PodList
	if err := conn.cache.List(ctx, &sets, sel...); err != nil {
		e.Cluster.State, e.Cluster.Message = routingv1alpha1.ClusterUnreachable, fmt.Sprintf("listing its ReplicaSets: %v", err)
		return true
	}
	if err := conn.cache.List(ctx, &pods, sel...); err != nil {
		e.Cluster.State, e.Cluster.Message = routingv1alpha1.ClusterUnreachable, fmt.Sprintf("listing its pods: %v", err)
		return true
	}
	for i := range sets.Items {
		if rs := &sets.Items[i]; metav1.IsControlledBy(rs, anchor) {
			e.ReplicaSets = append(e.ReplicaSets, rs)
		}
	}
	for i := range pods.Items {
		if pod := &pods.Items[i]; pod.Labels[rollout.LabelComponent] == rollout.ComponentRouting {
			countPod(e, pod)
		}
	}
	return len(e.ReplicaSets) > 0 || len(e.RoutingPods) > 0
}
