package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	routingv1alpha1 "github.com/schemagate/schemagate/api/v1alpha1"
	"github.com/schemagate/schemagate/pkg/rollout"
)

// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;update;patch;delete

// EventDisruptionBudgetConflict is the Warning Event of a shard's PodDisruptionBudget name held by
// an object this RoutingService does not control: schemagate leaves that object alone.
const EventDisruptionBudgetConflict = "DisruptionBudgetConflict"

// syncDisruptionBudgets makes the RoutingService's PodDisruptionBudgets what
// rollout.DesiredDisruptionBudgets says: it creates the missing ones, patches the ones whose
// labels, controller reference or spec differ (a merge patch carrying the observed
// resourceVersion, so a stale cache fails with a Conflict), and deletes the ones it controls that
// are no longer desired (a shard removed, spec.disruptionBudget.enabled false), with the observed
// UID and resourceVersion as preconditions. A budget already as desired is not written, so a
// steady RoutingService writes nothing (I4). Reconcile calls it before the planner's actions, so a
// shard's budget exists before its first ReplicaSet; an error stops the reconcile there and is
// returned for a retry with backoff.
//
// A name held by a budget this RoutingService does not control is left alone and reported with a
// Warning Event (EventDisruptionBudgetConflict); the shard's rollout is not held back by it.
func (r *RoutingServiceReconciler) syncDisruptionBudgets(ctx context.Context, rsvc *routingv1alpha1.RoutingService) error {
	var list policyv1.PodDisruptionBudgetList
	if err := r.List(ctx, &list, client.InNamespace(rsvc.Namespace),
		client.MatchingLabels{rollout.LabelName: rsvc.Name, rollout.LabelManagedBy: rollout.ManagedByValue}); err != nil {
		return fmt.Errorf("listing PodDisruptionBudgets: %w", err)
	}
	existing := map[string]*policyv1.PodDisruptionBudget{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	desired := map[string]bool{}
	for _, want := range rollout.DesiredDisruptionBudgets(rsvc) {
		desired[want.Name] = true
		if err := r.syncDisruptionBudget(ctx, rsvc, want, existing[want.Name]); err != nil {
			return err
		}
	}
	for name, have := range existing {
		if desired[name] || !metav1.IsControlledBy(have, rsvc) || have.DeletionTimestamp != nil {
			continue
		}
		logf.FromContext(ctx).Info("delete PodDisruptionBudget", "name", name)
		if err := r.Delete(ctx, have, client.Preconditions{UID: &have.UID, ResourceVersion: &have.ResourceVersion}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting PodDisruptionBudget %s: %w", name, err)
		}
	}
	return nil
}

// syncDisruptionBudget creates want, or patches have (the cached object of that name, nil when
// the cache has none) to it.
func (r *RoutingServiceReconciler) syncDisruptionBudget(ctx context.Context, rsvc *routingv1alpha1.RoutingService, want, have *policyv1.PodDisruptionBudget) error {
	log := logf.FromContext(ctx)
	if have == nil {
		log.Info("create PodDisruptionBudget", "name", want.Name, "maxUnavailable", want.Spec.MaxUnavailable.String())
		err := r.Create(ctx, want)
		if !apierrors.IsAlreadyExists(err) {
			return wrapBudgetErr("creating", want.Name, err)
		}
		// The cache is behind, or the name is held by an object without schemagate's labels
		// (which the label-filtered cache never shows): read past the cache to tell which.
		reader := r.APIReader
		if reader == nil {
			reader = r.Client
		}
		held := &policyv1.PodDisruptionBudget{}
		if getErr := reader.Get(ctx, client.ObjectKeyFromObject(want), held); getErr != nil || metav1.IsControlledBy(held, rsvc) {
			return wrapBudgetErr("creating", want.Name, err)
		}
		have = held
	}
	if !metav1.IsControlledBy(have, rsvc) {
		if r.Recorder != nil {
			r.Recorder.Eventf(rsvc, nil, corev1.EventTypeWarning, EventDisruptionBudgetConflict, "SyncDisruptionBudget",
				"PodDisruptionBudget %s/%s: %s; schemagate leaves it alone and keeps no budget of its own for that shard",
				have.Namespace, have.Name, rollout.Holder(have))
		}
		return nil
	}
	if budgetMatches(want, have) {
		return nil
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
	return wrapBudgetErr("updating", want.Name, r.Patch(ctx, updated, patch))
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
