package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// The retirement controller: a small controller of its own, which talks with the rollout's
// reconciler through the RoutingService's status only. It cleans up a shard's earlier places (the
// clusters schemagate.io/clusters-used records and the spec no longer names: retireSpokes; the
// hub's ReplicaSets of a shard now in another cluster: retireMovedShards) once status has said
// Ready=True for the current generation for retireSettle (settledReady). The rollout's reconciler
// decides nothing about them but reads them (earlier_places.go): the contract and the expand gate
// wait while they still run, and the cleanup waits for nothing those wait for, so the two never
// wait on each other.
//
// It writes clusters-used like the rollout's reconciler (applyPlaces), each with the
// resourceVersion it read (setClustersUsed), so that neither drops an entry the other has just
// written; a conflict is tried again.

// retirementController is the retirement controller's name (its logs and metrics).
const retirementController = "retirement"

// setupRetirement registers the retirement controller with mgr. It is woken by every change of a
// RoutingService that has an earlier place to clean up (its status included), and looks again
// when the settle time ends and, while an entry remains, every spokeRecheck.
func (r *RoutingServiceReconciler) setupRetirement(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&routingv1alpha1.RoutingService{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			rsvc, ok := o.(*routingv1alpha1.RoutingService)
			return ok && hasEarlierPlaces(rsvc)
		}))).
		Named(retirementController).
		Complete(reconcile.Func(r.reconcileRetirement))
}

// hasEarlierPlaces reports whether rsvc may have an earlier place to clean up: a retired entry of
// clusters-used, or a shard in another cluster (whose ReplicaSets may remain in the hub).
func hasEarlierPlaces(rsvc *routingv1alpha1.RoutingService) bool {
	if len(retiredClusters(rsvc)) > 0 {
		return true
	}
	for _, s := range rsvc.Spec.Shards {
		if s.Cluster != nil {
			return true
		}
	}
	return false
}

// reconcileRetirement cleans up rsvc's earlier places once its status allows it.
func (r *RoutingServiceReconciler) reconcileRetirement(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rsvc := &routingv1alpha1.RoutingService{}
	if err := r.Get(ctx, req.NamespacedName, rsvc); err != nil || !rsvc.DeletionTimestamp.IsZero() || !hasEarlierPlaces(rsvc) {
		// Gone, or being deleted: the finalizer cleans up every place (spoke_finalizer.go).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	st := &rsvc.Status
	if !settledReady(rsvc, st, now) {
		if left := settleLeft(rsvc, st, now); left > 0 {
			return ctrl.Result{RequeueAfter: left}, nil
		}
		return ctrl.Result{}, nil // the status write that says Ready wakes it
	}
	r.retireMovedShards(ctx, rsvc, st, st)
	if len(retiredClusters(rsvc)) == 0 {
		return ctrl.Result{}, nil
	}
	spokes, ok := r.liveAnchors(ctx, rsvc)
	if !ok {
		return ctrl.Result{RequeueAfter: spokeRecheck}, nil
	}
	if err := r.retireSpokes(ctx, rsvc, st, st, spokes); err != nil {
		if ignoreConflict(err) == nil {
			return ctrl.Result{RequeueAfter: time.Second}, nil // the rollout's reconciler wrote first
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(retiredClusters(rsvc)) > 0 {
		// A cluster that did not answer, or a place whose pods still go: look again.
		return ctrl.Result{RequeueAfter: spokeRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// settleLeft is how long until st's Ready=True for the current generation has held for
// retireSettle (0 when it is not True for it, or already has).
func settleLeft(rsvc *routingv1alpha1.RoutingService, st *routingv1alpha1.RoutingServiceStatus, now time.Time) time.Duration {
	since, ok := readySince(rsvc, st)
	if !ok {
		return 0
	}
	return max(0, since.Add(retireSettle).Sub(now)) + time.Second/10
}

// liveAnchors are the anchors of rsvc's current shards in other clusters, by shard, as their
// clusters' caches hold them: what retireSpokes must never take for an earlier place. ok is false
// when a current shard's cluster or anchor cannot be read (then nothing is cleaned up).
func (r *RoutingServiceReconciler) liveAnchors(ctx context.Context, rsvc *routingv1alpha1.RoutingService) (map[string]*spokeShard, bool) {
	out := map[string]*spokeShard{}
	if r.Spokes == nil {
		return out, true
	}
	for _, s := range rsvc.Spec.Shards {
		if s.Cluster == nil {
			continue
		}
		_, conn := r.Spokes.view(ctx, rsvc, s.Cluster)
		if conn == nil {
			return nil, false
		}
		anchor := &corev1.ConfigMap{}
		if err := conn.cache.Get(ctx, client.ObjectKey{Namespace: conn.namespace, Name: spoke.AnchorName(rsvc.Name)}, anchor); err != nil {
			return nil, false
		}
		out[s.Name] = &spokeShard{conn: conn, anchor: anchor}
	}
	return out, true
}

// ignoreConflict is err, or nil when it is a conflict (another writer was first: the next
// reconcile reads the object again).
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) {
		return nil
	}
	return err
}
