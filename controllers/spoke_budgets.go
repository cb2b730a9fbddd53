package controllers

import (
	"context"
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
	"github.com/schemagate/schemagate/pkg/spoke"
)

// syncSpokeBudgets keeps each cluster shard's PodDisruptionBudget in its spoke, beside the pods it
// protects, controlled by the spoke's anchor like the shard's ReplicaSets (so the spoke's garbage
// collector removes it with the anchor): created when missing, patched when it differs, deleted
// when spec.disruptionBudget.enabled is false. want is the hub's desired budget per shard
// (rollout.DesiredDisruptionBudgets); a shard whose cluster is not reachable (no entry in
// spokes) is not written. A name held there by an object the anchor does not control is left
// alone.
//
// As in the hub: a write the spoke refuses (isRefusal) is returned as a Refusal (a refused create
// holds that shard's rolling steps), a Conflict is left to the next reconcile, and any other error
// (a 5xx, a timeout, a failing webhook: the region's own trouble) is returned in down, shard →
// error, and that region is frozen for this reconcile like one that fails an action's write; the
// other regions' budgets are still synced. A name held there by an object the anchor does not
// control is reported in foreign (budget name → holder) and left alone.
func (r *RoutingServiceReconciler) syncSpokeBudgets(ctx context.Context, rsvc *routingv1alpha1.RoutingService, want map[string]*policyv1.PodDisruptionBudget, spokes map[string]*spokeShard, foreign map[string]string) ([]rollout.Refusal, map[string]error) {
	var refusals []rollout.Refusal
	var down map[string]error
	for _, shard := range rsvc.Spec.Shards {
		sh := spokes[shard.Name]
		if shard.Cluster == nil || sh == nil {
			continue
		}
		refusal, holder, err := r.syncSpokeBudget(ctx, rsvc, shard.Name, want[shard.Name], sh)
		if err != nil {
			// The region's API server failed (refusals and stale caches are answered above):
			// that region is frozen for this reconcile, as for any write it fails (S-45).
			down = markDown(down, shard.Name, err)
			continue
		}
		if refusal != nil {
			refusals = append(refusals, *refusal)
		}
		if holder != "" {
			foreign[rollout.DisruptionBudgetName(rsvc.Name, shard.Name)] = holder + " (cluster " + shard.Cluster.Name + ")"
		}
	}
	return refusals, down
}

func (r *RoutingServiceReconciler) syncSpokeBudget(ctx context.Context, rsvc *routingv1alpha1.RoutingService, shard string, want *policyv1.PodDisruptionBudget, sh *spokeShard) (*rollout.Refusal, string, error) {
	log := logf.FromContext(ctx).WithValues("cluster", sh.conn.key)
	key := client.ObjectKey{Namespace: sh.conn.namespace, Name: rollout.DisruptionBudgetName(rsvc.Name, shard)}
	fail := func(verb string, err error) (*rollout.Refusal, string, error) {
		switch {
		case isRefusal(err):
			return &rollout.Refusal{Verb: verb, Kind: "PodDisruptionBudget", Name: key.Name, Shard: shard,
				Message: "in cluster " + sh.conn.key + ": " + apiMessage(err)}, "", nil
		case apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err):
			return nil, "", nil // a stale cache: the next reconcile sees the object as it is
		}
		return nil, "", fmt.Errorf("%s PodDisruptionBudget %s in cluster %s: %w", verb, key.Name, sh.conn.key, err)
	}
	have := &policyv1.PodDisruptionBudget{}
	err := sh.conn.cache.Get(ctx, key, have)
	if apierrors.IsNotFound(err) {
		// The cache may be behind this manager's own create: ask directly.
		err = sh.conn.client.Get(ctx, key, have)
	}
	switch {
	case apierrors.IsNotFound(err):
		have = nil
	case err != nil:
		return fail("get", err)
	}
	ref := spoke.AnchorRef(sh.anchor)
	controlled := have != nil && metav1.IsControlledBy(have, sh.anchor)
	if want == nil {
		if !controlled || have.DeletionTimestamp != nil {
			return nil, "", nil
		}
		log.Info("delete PodDisruptionBudget in spoke", "name", key.Name)
		if err := sh.conn.client.Delete(ctx, have, client.Preconditions{UID: &have.UID, ResourceVersion: &have.ResourceVersion}); err != nil {
			return fail("delete", err)
		}
		return nil, "", nil
	}
	desired := want.DeepCopy()
	desired.Namespace = sh.conn.namespace
	desired.OwnerReferences = []metav1.OwnerReference{ref}
	switch {
	case have == nil:
		log.Info("create PodDisruptionBudget in spoke", "name", key.Name)
		if err := sh.conn.client.Create(ctx, desired); err != nil {
			return fail("create", err)
		}
		return nil, "", nil
	case !controlled:
		// Someone else's (or an earlier anchor's): never taken over silently.
		return nil, rollout.Holder(have), nil
	case budgetMatches(desired, have):
		return nil, "", nil
	}
	patch := client.MergeFromWithOptions(have.DeepCopy(), client.MergeFromWithOptimisticLock{})
	updated := have.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		updated.Labels[k] = v
	}
	updated.Spec = desired.Spec
	log.Info("update PodDisruptionBudget in spoke", "name", key.Name)
	if err := sh.conn.client.Patch(ctx, updated, patch); err != nil {
		return fail("patch", err)
	}
	return nil, "", nil
}
