package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// +kubebuilder:rbac:groups=routing.schemagate.io,resources=routingservices,verbs=patch
// Secrets are read by name (a region cluster's kubeconfig, a check's header or CA) with get,
// which config/rbac/namespaced_role.yaml grants per namespace, not the markers' ClusterRole
// (docs/security.md).

// spokeRecheck is how often a RoutingService with a shard in another cluster is reconciled when
// nothing wakes it: its Secrets are read, not watched.
const spokeRecheck = 15 * time.Second

// DefaultSpokeCleanupTimeout is how long a deletion waits for unreachable spokes before the
// finalizer lets the RoutingService go, leaving their ReplicaSets (--spoke-cleanup-timeout).
const DefaultSpokeCleanupTimeout = 5 * time.Minute

func minRequeue(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// hasClusterShard reports whether a shard names a cluster, or did (schemagate.io/clusters-used
// still lists a cluster to clean up).
func hasClusterShard(rsvc *routingv1alpha1.RoutingService) bool {
	for _, s := range rsvc.Spec.Shards {
		if s.Cluster != nil {
			return true
		}
	}
	return len(readClustersUsed(rsvc)) > 0
}

// ensureFinalizer adds schemagate.io/clusters to a RoutingService with a shard in another
// cluster (the hub's garbage collector cannot reach a spoke). rsvc is updated from the answer, so
// the reconcile goes on with it (the write changes no generation, label or annotation: no event
// of it wakes the controller).
func (r *RoutingServiceReconciler) ensureFinalizer(ctx context.Context, rsvc *routingv1alpha1.RoutingService) error {
	if !hasClusterShard(rsvc) || controllerutil.ContainsFinalizer(rsvc, routingv1alpha1.FinalizerClusters) {
		return nil
	}
	// With the resourceVersion: a merge patch replaces the whole list, so a finalizer another
	// controller changed since this read must not be put back or lost (a Conflict retries).
	patch := client.MergeFromWithOptions(rsvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(rsvc, routingv1alpha1.FinalizerClusters)
	return r.Patch(ctx, rsvc, patch)
}

// The Warning Events of a deletion that cannot reach every spoke: pending while it waits for an
// unreachable spoke, abandoned when --spoke-cleanup-timeout has passed and the RoutingService goes
// without that spoke's cleanup (its ReplicaSets keep running there).
const (
	EventSpokeCleanupPending   = "SpokeCleanupPending"
	EventSpokeCleanupAbandoned = "SpokeCleanupAbandoned"
)

// finalizeSpokes cleans up a RoutingService being deleted: in each spoke it reaches, it deletes
// the anchor (the spoke's garbage collector then removes the ReplicaSets and pods the anchor
// owns); a spoke it cannot reach is reported (an Event) and retried, until the cleanup timeout
// since the deletion began, when the finalizer is removed anyway and what is left there keeps
// running: a finalizer never holds a deletion forever.
func (r *RoutingServiceReconciler) finalizeSpokes(ctx context.Context, rsvc *routingv1alpha1.RoutingService) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(rsvc, routingv1alpha1.FinalizerClusters) {
		return ctrl.Result{}, nil
	}
	var left, leftNames []string
	done := map[string]bool{}
	// Every cluster a shard runs in, or ran in (retired ones not cleaned up yet).
	for _, u := range append(currentClusters(rsvc), retiredClusters(rsvc)...) {
		shard := routingv1alpha1.ShardSpec{Name: u.Shard, Cluster: &u.Cluster}
		if r.Spokes == nil {
			left, leftNames = append(left, fmt.Sprintf("%s (%v)", shard.Cluster.Name, errNoSpokes)), append(leftNames, shard.Cluster.Name)
			continue
		}
		view, conn := r.Spokes.view(ctx, rsvc, shard.Cluster)
		if conn == nil {
			left, leftNames = append(left, fmt.Sprintf("%s (%s: %s)", shard.Cluster.Name, view.State, view.Message)), append(leftNames, shard.Cluster.Name)
			continue
		}
		if done[conn.key] {
			continue
		}
		cm := &corev1.ConfigMap{}
		err := conn.client.Get(ctx, client.ObjectKey{Namespace: conn.namespace, Name: spoke.AnchorName(rsvc.Name)}, cm)
		if err == nil {
			a := spoke.ReadAnchor(cm)
			if a.Owner(rsvc, r.Spokes.Hub) == "" && (a.UID == "" || a.UID == rsvc.UID) {
				err = conn.client.Delete(ctx, cm, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &cm.UID})
			}
		}
		if err != nil && !apierrors.IsNotFound(err) {
			left, leftNames = append(left, fmt.Sprintf("%s (%v)", shard.Cluster.Name, err)), append(leftNames, shard.Cluster.Name)
			continue
		}
		done[conn.key] = true
	}
	timeout := r.SpokeCleanupTimeout
	if timeout == 0 {
		timeout = DefaultSpokeCleanupTimeout
	}
	waited := r.Clock.Since(rsvc.DeletionTimestamp.Time)
	key := types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name}
	if len(left) > 0 && waited < timeout {
		// One Event per set of clusters waited for: the time left and the errors change on every
		// retry, the fact does not.
		if r.cleanupsPending.fresh(key, map[string]string{"clusters": strings.Join(leftNames, ",")}) != nil && r.Recorder != nil {
			r.Recorder.Eventf(rsvc, nil, corev1.EventTypeWarning, EventSpokeCleanupPending, "Delete",
				"waiting until %s (--spoke-cleanup-timeout %s after the deletion) for unreachable clusters to remove this RoutingService's ReplicaSets: %v",
				rsvc.DeletionTimestamp.Add(timeout).UTC().Format(time.RFC3339), timeout, left)
		}
		return ctrl.Result{RequeueAfter: 5 * time.Second}, nil
	}
	r.cleanupsPending.forget(key)
	if len(left) > 0 {
		logf.FromContext(ctx).Info("deleting with spokes not cleaned up", "left", left)
		if r.Recorder != nil {
			r.Recorder.Eventf(rsvc, nil, corev1.EventTypeWarning, EventSpokeCleanupAbandoned, "Delete",
				"clusters not reached within %s keep this RoutingService's ReplicaSets (delete its anchor ConfigMap %s there to remove them): %v", timeout, spoke.AnchorName(rsvc.Name), left)
		}
	}
	patch := client.MergeFromWithOptions(rsvc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(rsvc, routingv1alpha1.FinalizerClusters)
	return ctrl.Result{}, client.IgnoreNotFound(r.Patch(ctx, rsvc, patch))
}
