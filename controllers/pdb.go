package controllers

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch;delete

// EventDisruptionBudgetConflict is the Warning Event of a shard's PodDisruptionBudget name held by
// an object this RoutingService does not control: schemagate leaves that object alone.
const EventDisruptionBudgetConflict = "DisruptionBudgetConflict"

// syncDisruptionBudgets makes the RoutingService's PodDisruptionBudgets the plan's budgets
// (rollout.Plan.DisruptionBudgets, what rollout.DesiredDisruptionBudgets says): it creates the missing ones, adopts the orphaned ones that
// are provably its own (adoptableBudget: deleted with --cascade=orphan and applied again), patches
// the ones whose labels, controller reference or spec differ (a merge patch carrying the observed
// resourceVersion, so a stale cache fails with a Conflict), and deletes the ones it controls that
// are no longer desired, with the observed UID and resourceVersion as preconditions:
// spec.disruptionBudget.enabled false deletes them at once; a shard removed from spec.shards keeps
// its budget until its pods are gone (shardRuns), since its ReplicaSets are scaled down only once
// the rollout is complete everywhere else. A budget already as desired is not written, so a
// steady RoutingService writes nothing (I4). Reconcile calls it before the planner's actions.
//
// A write the API server refuses (isRefusal: a ResourceQuota on budgets, an admission policy) is
// returned as a rollout.Refusal and the other budgets are still synced: the planner holds the
// rolling steps of a shard whose budget could not be created, and nothing else (a rollback never
// waits for a budget). Any other error of the hub stops the reconcile there and is returned for a
// retry with backoff; a spoke's is that region's (down, shard → error: syncSpokeBudgets).
//
// A name held by a budget this RoutingService does not control is left alone and reported with a
// Warning Event (EventDisruptionBudgetConflict) once per holder; the shard's rollout is not held
// back by it.
//
// A shard in another cluster (spec.shards[].cluster) has its budget there, not in the hub
// (syncSpokeBudgets); a hub budget left from before is deleted here like a removed shard's.
func (r *RoutingServiceReconciler) syncDisruptionBudgets(ctx context.Context, rsvc *routingv1alpha1.RoutingService, spokes map[string]*spokeShard, budgets []*policyv1.PodDisruptionBudget) (_ []rollout.Refusal, down map[string]error, _ error) {
	var list policyv1.PodDisruptionBudgetList
	if err := r.List(ctx, &list, ownedBy(rsvc.Namespace, rsvc.Name, nil)...); err != nil {
		return nil, nil, fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	existing := map[string]*policyv1.PodDisruptionBudget{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	var refusals []rollout.Refusal
	desired := map[string]bool{}
	foreign := map[string]string{}
	inSpoke := map[string]*policyv1.PodDisruptionBudget{}
	clusterShards := map[string]bool{}
	for _, shard := range rsvc.Spec.Shards {
		clusterShards[shard.Name] = shard.Cluster != nil
	}
	for _, want := range budgets {
		if shard := want.Labels[rollout.LabelShard]; clusterShards[shard] {
			inSpoke[shard] = want
			continue
		}
		desired[want.Name] = true
		refusal, holder, err := r.syncDisruptionBudget(ctx, rsvc, want, existing[want.Name])
		if err != nil {
			return nil, nil, err
		}
		if refusal != nil {
			refusals = append(refusals, *refusal)
		}
		if holder != "" {
			foreign[want.Name] = holder
		}
	}
	spokeRefusals, down := r.syncSpokeBudgets(ctx, rsvc, inSpoke, spokes, foreign)
	refusals = append(refusals, spokeRefusals...)
	r.reportBudgetConflicts(rsvc, foreign)
	for name, have := range existing {
		if desired[name] || have.DeletionTimestamp != nil {
			continue
		}
		if !metav1.IsControlledBy(have, rsvc) {
			if adoptableBudget(rsvc, have) {
				// An orphan of a shard no longer in the spec: adopted, so that it goes with the
				// RoutingService, and deleted below once its pods are gone.
				if refusal, err := r.adoptBudget(ctx, rsvc, have, nil); err != nil || refusal != nil {
					if err != nil {
						return nil, nil, err
					}
					refusals = append(refusals, *refusal)
				}
			}
			continue
		}
		if rsvc.Spec.DisruptionBudget.EnabledOrDefault() {
			runs, err := r.shardRuns(ctx, rsvc, have.Labels[rollout.LabelShard])
			if err != nil {
				return nil, nil, err
			}
			if runs {
				continue // the removed shard's pods still run: they keep their budget
			}
		}
		logf.FromContext(ctx).Info("delete PodDisruptionBudget", "name", name)
		err := r.Delete(ctx, have, client.Preconditions{UID: &have.UID, ResourceVersion: &have.ResourceVersion})
		if isRefusal(err) {
			refusals = append(refusals, rollout.Refusal{Verb: "delete", Kind: "PodDisruptionBudget", Name: name, Message: apiMessage(err)})
			continue
		}
		if client.IgnoreNotFound(err) != nil {
			return nil, nil, fmt.Errorf("deleting PodDisruptionBudget %s: %w", name, err)
		}
	}
	return refusals, down, nil
}

// syncDisruptionBudget creates want, or adopts or patches have (the cached object of that name,
// nil when the cache has none) to it. It returns a refused write as a Refusal, and who holds the
// name when this RoutingService does not control it and cannot adopt it.
func (r *RoutingServiceReconciler) syncDisruptionBudget(ctx context.Context, rsvc *routingv1alpha1.RoutingService, want, have *policyv1.PodDisruptionBudget) (*rollout.Refusal, string, error) {
	log := logf.FromContext(ctx)
	shard := want.Labels[rollout.LabelShard]
	if have == nil {
		log.Info("create PodDisruptionBudget", "name", want.Name, "maxUnavailable", want.Spec.MaxUnavailable.String())
		err := r.Create(ctx, want)
		if isRefusal(err) {
			return &rollout.Refusal{Verb: "create", Kind: "PodDisruptionBudget", Name: want.Name, Shard: shard, Message: apiMessage(err)}, "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, "", wrapBudgetErr("creating", want.Name, err)
		}
		// The cache is behind, or the name is held by an object without schemagate's labels
		// (which the label-filtered cache never shows): read past the cache to tell which.
		reader := r.apiReader()
		held := &policyv1.PodDisruptionBudget{}
		if getErr := reader.Get(ctx, client.ObjectKeyFromObject(want), held); getErr != nil || metav1.IsControlledBy(held, rsvc) {
			return nil, "", wrapBudgetErr("creating", want.Name, err)
		}
		have = held
	}
	if !metav1.IsControlledBy(have, rsvc) {
		if !adoptableBudget(rsvc, have) {
			return nil, rollout.Holder(have), nil
		}
		refusal, err := r.adoptBudget(ctx, rsvc, have, want)
		if refusal != nil {
			refusal.Shard = shard // the shard has no budget of its own until the adoption is written
		}
		return refusal, "", err
	}
	if budgetMatches(want, have) {
		return nil, "", nil
	}
	patch := client.MergeFromWithOptions(have.DeepCopy(), client.MergeFromWithOptimisticLock{})
	updated := have.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		updated.Labels[k] = v
	}
	updated.Spec = want.Spec
	log.Info("update PodDisruptionBudget", "name", want.Name, "maxUnavailable", want.Spec.MaxUnavailable.String())
	err := r.Patch(ctx, updated, patch)
	if isRefusal(err) {
		return &rollout.Refusal{Verb: "patch", Kind: "PodDisruptionBudget", Name: want.Name, Message: apiMessage(err)}, "", nil
	}
	return nil, "", wrapBudgetErr("updating", want.Name, err)
}

// adoptableBudget reports whether pdb is an orphan that is provably rsvc's: no controller, not
// being deleted, in rsvc's namespace, labelled by schemagate as the routing budget of rsvc's name
// and a shard, named as that shard's budget, and selecting exactly that shard's pods. This is how a
// RoutingService deleted with --cascade=orphan and applied again gets its budgets back instead of
// running without them.
func adoptableBudget(rsvc *routingv1alpha1.RoutingService, pdb *policyv1.PodDisruptionBudget) bool {
	if metav1.GetControllerOf(pdb) != nil || pdb.DeletionTimestamp != nil || pdb.Namespace != rsvc.Namespace {
		return false
	}
	l, shard := pdb.Labels, pdb.Labels[rollout.LabelShard]
	if shard == "" || l[rollout.LabelManagedBy] != rollout.ManagedByValue || l[rollout.LabelComponent] != rollout.ComponentRouting ||
		l[rollout.LabelName] != rsvc.Name || pdb.Name != rollout.DisruptionBudgetName(rsvc.Name, shard) {
		return false
	}
	return pdb.Spec.Selector != nil && len(pdb.Spec.Selector.MatchExpressions) == 0 &&
		equality.Semantic.DeepEqual(pdb.Spec.Selector.MatchLabels, rollout.DisruptionBudgetSelector(rsvc.Name, shard))
}

// adoptBudget adds rsvc's controller reference to the orphan have, and, when want is not nil,
// makes its labels and spec want's, in one merge patch with have's resourceVersion.
func (r *RoutingServiceReconciler) adoptBudget(ctx context.Context, rsvc *routingv1alpha1.RoutingService, have, want *policyv1.PodDisruptionBudget) (*rollout.Refusal, error) {
	patch := client.MergeFromWithOptions(have.DeepCopy(), client.MergeFromWithOptimisticLock{})
	adopted := have.DeepCopy()
	adopted.OwnerReferences = append(adopted.OwnerReferences, rollout.ControllerRef(rsvc))
	if want != nil {
		for k, v := range want.Labels {
			adopted.Labels[k] = v
		}
		adopted.Spec = want.Spec
	}
	logf.FromContext(ctx).Info("adopt orphaned PodDisruptionBudget", "name", have.Name)
	err := r.Patch(ctx, adopted, patch)
	if isRefusal(err) {
		return &rollout.Refusal{Verb: "patch", Kind: "PodDisruptionBudget", Name: have.Name, Message: apiMessage(err)}, nil
	}
	if err == nil && r.Recorder != nil {
		r.recordFact(rsvc, corev1.EventTypeNormal, EventDisruptionBudgetAdopted,
			"adopted orphaned PodDisruptionBudget %s (shard %s)", have.Name, have.Labels[rollout.LabelShard])
	}
	return nil, wrapBudgetErr("adopting", have.Name, err)
}

// EventDisruptionBudgetAdopted is the Event of an orphaned PodDisruptionBudget adopted
// (adoptableBudget).
const EventDisruptionBudgetAdopted = "DisruptionBudgetAdopted"

// shardRuns reports whether shard of rsvc still has routing pods that have not finished, or a
// ReplicaSet that asks for or has pods: its budget is kept until both are gone.
func (r *RoutingServiceReconciler) shardRuns(ctx context.Context, rsvc *routingv1alpha1.RoutingService, shard string) (bool, error) {
	if shard == "" {
		return false, nil
	}
	selector := ownedBy(rsvc.Namespace, rsvc.Name, rollout.DisruptionBudgetSelector(rsvc.Name, shard))
	var pods corev1.PodList
	if err := r.List(ctx, &pods, selector...); err != nil {
		return false, fmt.Errorf("listing the pods of shard %s: %w", shard, err)
	}
	for i := range pods.Items {
		if p := pods.Items[i].Status.Phase; p != corev1.PodSucceeded && p != corev1.PodFailed {
			return true, nil
		}
	}
	var sets appsv1.ReplicaSetList
	if err := r.List(ctx, &sets, selector...); err != nil {
		return false, fmt.Errorf("listing the ReplicaSets of shard %s: %w", shard, err)
	}
	for i := range sets.Items {
		rs := &sets.Items[i]
		if rs.Spec.Replicas == nil || *rs.Spec.Replicas > 0 || rs.Status.Replicas > 0 {
			return true, nil
		}
	}
	return false, nil
}

// reportBudgetConflicts records an Event for each budget name in foreign (name → holder) whose
// holder is new since the last reconcile (r.budgetConflicts), rather than on every reconcile.
func (r *RoutingServiceReconciler) reportBudgetConflicts(rsvc *routingv1alpha1.RoutingService, foreign map[string]string) {
	for _, name := range r.budgetConflicts.fresh(types.NamespacedName{Namespace: rsvc.Namespace, Name: rsvc.Name}, foreign) {
		if r.Recorder != nil {
			r.recordFact(rsvc, corev1.EventTypeWarning, EventDisruptionBudgetConflict,
				"PodDisruptionBudget %s/%s: %s; schemagate leaves it alone and keeps no budget of its own for that shard",
				rsvc.Namespace, name, foreign[name])
		}
	}
}

func wrapBudgetErr(verb, name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s PodDisruptionBudget %s: %w", verb, name, err)
}

// budgetMatches reports whether have already carries want's labels and spec (labels added by
// others are kept and ignored).
func budgetMatches(want, have *policyv1.PodDisruptionBudget) bool {
	for k, v := range want.Labels {
		if have.Labels[k] != v {
			return false
		}
	}
	return equality.Semantic.DeepEqual(want.Spec, have.Spec)
}
